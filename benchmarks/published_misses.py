"""Where issue 12's three headline figures miss, by the kind of run each case is.

    python benchmarks/published.py --json run.json
    python benchmarks/published_misses.py run.json

Every held-out case of ``published.py``'s headline (TTFT: the mean, else the median; TPOT:
the median, else the mean; output throughput) falls in the first class whose rule it
meets (:data:`CLASSES`). Per figure and class the script prints the cases, the misses
(outside 15%, or no result), the share within 15% and the signed median error; then the
figure without each class, which says how far that class alone holds the figure down. A
TTFT whose published mean is at least twice its published median is counted apart as
well (:data:`TAIL_RATIO`): the mean is then set by a few requests (a cold first wave, the
longest prompts), which a replay of drawn lengths cannot be expected to place. Of the
TTFT misses scored on a mean, those whose source also published a median are counted, and
how many of those medians the replay read within 15% (a miss set by a few slow requests
reads its median right). With ``--by-group``, each class's misses are listed by the cases'
group (stack release and GPU): how many, how many are near (within :data:`NEAR`), and on
which side the replay reads (below or above the published figure), the first look at where
one fix could move many.

The classes are kinds of run, not diagnoses; docs/gpu-profiles.md ("Where the TTFT misses
are", stop 49) says what each one's cases show and what the sources leave unknown.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run as a script from anywhere

from benchmarks.published import HEADLINE_FORMS, WITHIN  # noqa: E402
from benchmarks.published_cases import Case, load_cases  # noqa: E402
from simulator.track_record import CONSUMER_GPUS, MANY_CLIENTS  # noqa: E402

TAIL_RATIO = 2.0  # published mean TTFT / median TTFT from which the mean is a tail's
NEAR = 0.25  # a miss within this |error| is near (--by-group)


def _closed(case: Case) -> bool:
    return case.workload.get("arrival") == "closed"


def _clients(case: Case) -> int:
    return int(case.workload.get("concurrency") or 0)


# (class, rule), first match wins
CLASSES: tuple[tuple[str, Callable[[Case], bool]], ...] = (
    ("runner in the engine's process", lambda c: bool(c.harness)),
    ("consumer GPUs, tensor parallel", lambda c: c.gpu in CONSUMER_GPUS and c.tp > 1),
    (f"closed loop, {MANY_CLIENTS}+ clients",
     lambda c: _closed(c) and _clients(c) >= MANY_CLIENTS),
    ("closed loop, fewer clients", _closed),
    ("all at once (burst)", lambda c: c.workload.get("arrival") == "burst"),
    ("arrivals at a rate", lambda c: True),
)


def run_class(case: Case) -> str:
    """The first class of :data:`CLASSES` whose rule ``case`` meets."""
    return next(name for name, rule in CLASSES if rule(case))


@dataclass(frozen=True)
class Scored:
    """One held-out case's error on one headline figure (None: no result)."""

    case_id: str
    figure: str
    run_class: str
    error: float | None
    tail: bool  # TTFT only: the published mean is TAIL_RATIO x the median or more
    # TTFT scored on its mean only: whether the replay read the published median within
    # WITHIN too (None: no median published, or another figure)
    median_within: bool | None = None
    group: str = ""  # the case's group: stack release and GPU

    @property
    def within(self) -> bool:
        return self.error is not None and abs(self.error) <= WITHIN


def scored(rows: Iterable[Mapping[str, Any]], cases: Mapping[str, Case]) -> list[Scored]:
    """The held-out rows' headline errors, each with its case's class (rows whose case is
    not in ``cases`` are left out)."""
    out = []
    for r in rows:
        case = cases.get(r["id"])
        metrics = r.get("metrics") or {}
        if r.get("fitted") or case is None or not metrics:
            continue
        for figure, keys in HEADLINE_FORMS.items():
            key = next((k for k in keys if k in metrics), None)
            if key is None:
                continue
            pub = case.metrics
            tail = (key == "mean_ttft_ms" and "median_ttft_ms" in pub
                    and pub["mean_ttft_ms"] >= TAIL_RATIO * pub["median_ttft_ms"])
            median = metrics.get("median_ttft_ms") if key == "mean_ttft_ms" else None
            median_within = None if median is None else (
                median["error"] is not None and abs(median["error"]) <= WITHIN)
            out.append(Scored(case.id, figure, run_class(case), metrics[key]["error"], tail,
                              median_within, case.group))
    return out


def summary(items: list[Scored]) -> tuple[int, int, float, float | None]:
    """Cases, misses, share within 15% and signed median (None: no result at all)."""
    errs = [s.error for s in items if s.error is not None]
    within = sum(s.within for s in items)
    return (len(items), len(items) - within, within / len(items) if items else 0.0,
            statistics.median(errs) if errs else None)


def report(items: list[Scored]) -> list[str]:
    """The printed table: per figure, per class, then the figure without each class."""
    lines = []
    for figure in HEADLINE_FORMS:
        mine = [s for s in items if s.figure == figure]
        if not mine:
            continue
        n, miss, share, _ = summary(mine)
        lines.append(f"{figure}: {n} cases, {miss} misses, {share:.1%} within 15%")
        lines.append(f"  {'class':34s} {'cases':>5s} {'misses':>6s} {'within':>7s} "
                     f"{'signed':>7s} {'without it':>10s}")
        for name, _ in CLASSES:
            part = [s for s in mine if s.run_class == name]
            if not part:
                continue
            pn, pmiss, pshare, signed = summary(part)
            rest = summary([s for s in mine if s.run_class != name])[2]
            sign = "   n/a" if signed is None else f"{signed:+7.1%}"
            lines.append(f"  {name:34s} {pn:5d} {pmiss:6d} {pshare:7.0%} {sign} {rest:10.1%}")
        tails = [s for s in mine if s.tail]
        if tails:
            tn, tmiss, _, _ = summary(tails)
            lines.append(f"  of which a mean TTFT {TAIL_RATIO:g}x its median or more: "
                         f"{tn} cases, {tmiss} misses")
        medians = [s for s in mine if not s.within and s.median_within is not None]
        if medians:
            lines.append(f"  of its misses, {len(medians)} published a median too; the replay "
                         f"read it within 15% in {sum(bool(s.median_within) for s in medians)}")
    return lines


def by_group(items: list[Scored]) -> list[str]:
    """Per figure and class, the misses by case group, most first: misses of cases, the
    near ones (|error| within NEAR), and how many the replay read below / above the
    published figure (a miss with no result counts in neither)."""
    lines = []
    for figure in HEADLINE_FORMS:
        mine = [s for s in items if s.figure == figure]
        if not any(not s.within for s in mine):
            continue
        lines.append(f"{figure}: misses by group (near: within {NEAR:.0%}; below / above: "
                     "the replay against the published figure)")
        for name, _ in CLASSES:
            part = [s for s in mine if s.run_class == name]
            groups = sorted({s.group for s in part if not s.within},
                            key=lambda g: (-sum(not s.within for s in part if s.group == g), g))
            if not groups:
                continue
            lines.append(f"  {name}")
            for g in groups:
                cases = [s for s in part if s.group == g]
                misses = [s for s in cases if not s.within]
                errs = [s.error for s in misses if s.error is not None]
                near = sum(abs(e) <= NEAR for e in errs)
                below = sum(e < 0 for e in errs)
                lines.append(f"    {g:28s} {len(misses):4d} of {len(cases):4d}  near {near:4d}"
                             f"  below {below:4d}  above {len(errs) - below:4d}")
    return lines


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("run", type=Path, help="a published.py --json file")
    ap.add_argument("--cases-file", action="append", default=None,
                    help="case file(s) the run replayed (default: every published case file)")
    ap.add_argument("--by-group", action="store_true",
                    help="then each class's misses by case group (stack release and GPU)")
    args = ap.parse_args(argv)
    rows = json.loads(args.run.read_text())["rows"]
    cases = {c.id: c for c in load_cases(args.cases_file)}
    items = scored(rows, cases)
    print("\n".join(report(items) + (by_group(items) if args.by_group else [])))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
