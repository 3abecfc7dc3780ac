"""Two runs of benchmarks/published.py side by side: what a change did to the published cases.

    python benchmarks/published.py --json before.json     # on the tree before the change
    python benchmarks/published.py --json after.json      # and after
    python benchmarks/published_compare.py before.json after.json [--metric output_throughput]

For the held-out cases both runs simulated, it prints per group (stack-version/GPU) and
overall: n, share within 15% and median |error| before and after, over every case and
over the cases whose simulated value changed; then the held-out cases only the second run
simulated (a model or GPU newly covered), per group (``--by model``: per model, from runs
that record it; ``--by both``: per model and group): n, share within 15%, median |error|
and signed median. The before/after figures docs/gpu-profiles.md quotes for a change were
printed this way. ``--crossings`` then lists the held-out cases whose error crossed the 15%
line, in and out, each with its error before and after. ``--in-sample`` counts the cases a
preset was fitted on too (a case fitted in either run), for what a fit did to its own.
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path
from typing import NamedTuple

WITHIN = 0.15


class Row(NamedTuple):
    """One held-out case's ``metric`` in one run."""

    group: str
    simulated: float
    error: float
    model: str  # "?" where the run did not record it


def errors(path: Path, metric: str, in_sample: bool = False) -> dict[str, Row]:
    """Case id -> its :class:`Row` of ``metric``, held out only (``in_sample``: the cases a
    preset was fitted on too)."""
    out = {}
    for row in json.loads(path.read_text())["rows"]:
        m = (row.get("metrics") or {}).get(metric)
        if (row.get("fitted") and not in_sample) or not m or m.get("error") is None:
            continue
        out[row["id"]] = Row(row["group"], m["simulated"], m["error"], row.get("model", "?"))
    return out


def figures(errs: list[float]) -> str:
    """n, share within 15%, median |error| of ``errs``."""
    within = sum(abs(e) <= WITHIN for e in errs) / len(errs)
    return f"{len(errs):5d} {within:7.1%} {statistics.median(abs(e) for e in errs):7.1%}"


def compare(before: dict[str, Row], after: dict[str, Row]) -> list[str]:
    """The report's lines: per group and overall, all cases and the changed ones."""
    common = sorted(set(before) & set(after))
    changed = {i for i in common if before[i].simulated != after[i].simulated}
    lines = [f"{'group':<26} {'cases':>5} {'within':>7} {'median':>7}  ->  "
             f"{'within':>7} {'median':>7}   changed: {'n':>5} {'within':>7}  ->  {'within':>7}"]
    if not common:  # no held-out case gives this metric in both runs
        return lines + ["(no case in both runs gives this metric)"]
    groups = sorted({before[i].group for i in common}) + ["all"]
    for group in groups:
        ids = [i for i in common if group == "all" or before[i].group == group]
        moved = [i for i in ids if i in changed]
        line = (f"{group:<26} {figures([before[i].error for i in ids])}  ->  "
                f"{figures([after[i].error for i in ids])[6:]}")
        if moved:
            b = sum(abs(before[i].error) <= WITHIN for i in moved) / len(moved)
            a = sum(abs(after[i].error) <= WITHIN for i in moved) / len(moved)
            line += f"   changed: {len(moved):5d} {b:7.1%}  ->  {a:7.1%}"
        lines.append(line)
    return lines


def newly_simulated(before: dict[str, Row], after: dict[str, Row], by: str = "group"
                    ) -> list[str]:
    """The report's lines for the cases only ``after`` simulated, per group (``by``
    "group"), model ("model") or both ("both") and overall; none when there are none."""
    new = sorted(set(after) - set(before))
    if not new:
        return []
    width = 40 if by == "both" else 26
    lines = [f"only the second run simulated: {by:<{width}} {'cases':>5} {'within':>7} "
             f"{'median':>7} {'signed':>7}"]
    def key(row: Row) -> str:
        return f"{row.model} {row.group}" if by == "both" else getattr(row, by)

    for group in sorted({key(after[i]) for i in new}) + ["all"]:
        errs = [after[i].error for i in new if group == "all" or key(after[i]) == group]
        lines.append(f"{'':31s}{group:<{width}} {figures(errs)} {statistics.median(errs):+7.1%}")
    return lines


def crossings(before: dict[str, Row], after: dict[str, Row]) -> list[str]:
    """The cases both runs simulated whose error crossed the 15% line: those that came
    within it, then those that left it, each by id with its error before -> after."""
    common = sorted(set(before) & set(after))
    lines = []
    for name, came in (("came within 15%", True), ("left it", False)):
        ids = [i for i in common if (abs(after[i].error) <= WITHIN) == came
               and (abs(before[i].error) <= WITHIN) != came]
        lines.append(f"{name}: {len(ids)}")
        lines += [f"  {i}  {before[i].error:+.1%} -> {after[i].error:+.1%}" for i in ids]
    return lines


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("before", type=Path)
    ap.add_argument("after", type=Path)
    ap.add_argument("--metric", default="output_throughput")
    ap.add_argument("--by", choices=("group", "model", "both"), default="group",
                    help="how the newly simulated cases are grouped")
    ap.add_argument("--crossings", action="store_true",
                    help="then the cases whose error crossed the 15%% line, in and out")
    ap.add_argument("--in-sample", action="store_true",
                    help="count the cases a preset was fitted on too (what a fit did to "
                         "its own cases, beside the held-out ones)")
    args = ap.parse_args(argv)
    before = errors(args.before, args.metric, args.in_sample)
    after = errors(args.after, args.metric, args.in_sample)
    print("\n".join(compare(before, after) + newly_simulated(before, after, args.by)
                    + (crossings(before, after) if args.crossings else [])))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
