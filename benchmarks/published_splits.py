"""Splits of the published cases: where published.py's errors sit, and how one configuration's
published figure moves between a stack's revisions.

    python benchmarks/published.py --json run.json
    python benchmarks/published_splits.py errors run.json --by gpu --by dtype \\
        --only version=0.13,0.14
    python benchmarks/published_splits.py releases --pair 0.12:0.13 --pair 0.14:0.15 \\
        --by size --by tp
    python benchmarks/published_splits.py twins --pair llama-3-70b:llama-3.1-70b \\
        --only version=0.13

``errors``: per value of the ``--by`` attributes, n, the signed median of the output
throughput error (``--metric``: another of published.py's metrics, e.g. ``p99_ttft_ms``),
and the share within 15% (held-out rows only, as published.py's tables).
``releases``: for every configuration (stack, GPU, model, TP, weight dtype, fixed ISL/OSL)
that two revisions both published, the ratio of their output throughput, then its median
per value of ``--by``. ``twins``: the same ratio between two models of one revision.
``--only ATTRIBUTE=V1,V2`` keeps the cases whose attribute is one of the values (for
``releases`` and ``twins``, those of the first case of each pair).

Attributes: ``gpu``, ``tp``, ``dtype`` (weight dtype), ``model``, ``version`` (the stack's),
``size`` (``moe``, ``large`` from 30B parameters, else ``small``), and ``shape``
(``decode-heavy``: output at least 4x the prompt; ``prefill-heavy``: the reverse; else
``balanced``). Cases come from the published case files (``--cases-file`` to choose).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from collections import defaultdict
from collections.abc import Iterable, Mapping
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run as a script from anywhere

from benchmarks.published import WITHIN  # noqa: E402
from benchmarks.published_cases import Case, load_cases  # noqa: E402
from simulator.specs.models import catalogue_name, get_model  # noqa: E402

METRIC = "output_throughput"
ATTRIBUTES = ("gpu", "tp", "dtype", "model", "version", "size", "shape")
LARGE = 30e9  # parameters: the 70B class against 7-8B


def shape(isl: int, osl: int) -> str:
    """decode-heavy, prefill-heavy or balanced by the 4x rule."""
    if osl >= 4 * isl:
        return "decode-heavy"
    return "prefill-heavy" if isl >= 4 * osl else "balanced"


def size(model: str) -> str:
    """moe, large (30B parameters or more) or small; ``?`` outside the catalogue."""
    name = catalogue_name(model)
    if name is None:
        return "?"
    spec = get_model(name)
    if spec.num_experts > 1:
        return "moe"
    return "large" if spec.params_total >= LARGE else "small"


def attributes(case: Case) -> dict[str, str]:
    """The split attributes of ``case`` (shape only for fixed lengths)."""
    wl = case.workload
    fixed = "prompt_tokens" in wl
    return {"gpu": case.gpu, "tp": f"tp{case.tp}", "dtype": case.weight_dtype,
            "model": case.model, "version": case.stack_version, "size": size(case.model),
            "shape": shape(int(wl["prompt_tokens"]), int(wl["output_tokens"])) if fixed
            else "not fixed"}


def _key(attrs: Mapping[str, str], by: Iterable[str]) -> str:
    return "/".join(attrs[b] for b in by) or "all"


def kept(attrs: Mapping[str, str], only: Mapping[str, set[str]]) -> bool:
    """Whether every ``only`` attribute of a case is one of its allowed values."""
    return all(attrs[k] in values for k, values in only.items())


def error_splits(rows: Iterable[Mapping], cases: Mapping[str, Case], by: list[str],
                 only: Mapping[str, set[str]], metric: str = METRIC
                 ) -> dict[str, tuple[int, float, float]]:
    """Split key -> (n, signed median error, share within 15%) of the held-out rows'
    ``metric`` (a published.py metric key: output throughput unless told)."""
    cells: dict[str, list[float]] = defaultdict(list)
    for row in rows:
        m = (row.get("metrics") or {}).get(metric)
        case = cases.get(row["id"])
        if row.get("fitted") or not m or m.get("error") is None or case is None:
            continue
        attrs = attributes(case)
        if kept(attrs, only):
            cells[_key(attrs, by)].append(m["error"])
    return {k: (len(es), statistics.median(es), sum(abs(e) <= WITHIN for e in es) / len(es))
            for k, es in sorted(cells.items())}


def _config(case: Case) -> tuple | None:
    wl = case.workload
    if METRIC not in case.metrics or "prompt_tokens" not in wl:
        return None
    return (case.stack, case.gpu, case.tp, case.weight_dtype, int(wl["prompt_tokens"]),
            int(wl["output_tokens"]))


def ratio_splits(cases: Iterable[Case], pairs: list[tuple[str, str]], by: list[str],
                 twins: bool, only: Mapping[str, set[str]]) -> dict[str, tuple[int, float]]:
    """``pair`` label and split key -> (n, median published ratio b/a). Releases: a and b
    are stack versions, the model the same; twins: a and b are models, the version the
    same. ``only`` filters on the first case of a pair."""
    published: dict[tuple, float] = {}
    attrs: dict[tuple, dict[str, str]] = {}
    for case in cases:
        config = _config(case)
        if config is None:
            continue
        key = (*config, case.model, case.stack_version)
        published[key] = case.metrics[METRIC]
        attrs[key] = attributes(case)
    cells: dict[str, list[float]] = defaultdict(list)
    for key, value in published.items():
        head, model, version = key[:-2], key[-2], key[-1]
        if not kept(attrs[key], only):
            continue
        for a, b in pairs:
            if twins and model == a:
                other = (*head, b, version)
            elif not twins and version == a:
                other = (*head, model, b)
            else:
                continue
            if other in published:
                cells[f"{b}/{a} {_key(attrs[key], by)}"].append(published[other] / value)
    return {k: (len(rs), statistics.median(rs)) for k, rs in sorted(cells.items())}


def _only(values: list[str]) -> dict[str, set[str]]:
    out = {}
    for v in values:
        name, _, allowed = v.partition("=")
        if name not in ATTRIBUTES or not allowed:
            raise SystemExit(f"published_splits: --only {v!r}: give ATTRIBUTE=V1,V2 with an "
                             f"attribute of {ATTRIBUTES}")
        out[name] = set(allowed.split(","))
    return out


def _pairs(values: list[str]) -> list[tuple[str, str]]:
    out = []
    for v in values:
        a, _, b = v.partition(":")
        if not a or not b:
            raise SystemExit(f"published_splits: --pair {v!r}: give A:B")
        out.append((a, b))
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("what", choices=("errors", "releases", "twins"))
    ap.add_argument("run", nargs="?", help="a published.py --json file (errors)")
    ap.add_argument("--by", action="append", default=[], choices=ATTRIBUTES)
    ap.add_argument("--only", action="append", default=[], help="ATTRIBUTE=V1,V2: keep these")
    ap.add_argument("--pair", action="append", default=[], help="A:B (versions or models)")
    ap.add_argument("--cases-file", action="append", default=None)
    ap.add_argument("--metric", default=METRIC,
                    help="errors: the published.py metric to split (default %(default)s; "
                         "e.g. p99_ttft_ms)")
    args = ap.parse_args(argv)
    cases = load_cases(args.cases_file)
    if args.what == "errors":
        if not args.run:
            raise SystemExit("published_splits: errors needs a published.py --json file")
        rows = json.loads(Path(args.run).read_text())["rows"]
        by_id = {c.id: c for c in cases}
        print(f"{'split':<40} {'n':>5} {'signed median':>14} {'within 15%':>11}")
        only = _only(args.only)
        for k, (n, med, within) in error_splits(rows, by_id, args.by, only,
                                                args.metric).items():
            print(f"{k:<40} {n:5d} {med:>+14.1%} {within:>11.0%}")
        return 0
    pairs = _pairs(args.pair)
    print(f"{'ratio and split':<48} {'n':>5} {'median':>7}")
    for k, (n, med) in ratio_splits(cases, pairs, args.by, args.what == "twins",
                                    _only(args.only)).items():
        print(f"{k:<48} {n:5d} {med:7.3f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
