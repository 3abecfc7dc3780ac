"""Write simulator/track_record.json from a replay of every published case.

    python benchmarks/published.py --json run.json
    python benchmarks/track_record.py run.json              # prints the groups, writes the file
    python benchmarks/track_record.py run.json --check      # is the shipped file this run's?

Each held-out case (a preset fitted on none of it) gives its signed error on the three
headline figures of ``published.py`` (mean TTFT, else median; median TPOT, else mean;
output throughput) and on each tail it published (:data:`TAIL_KEYS`: P99 and P90 TTFT,
TPOT and ITL, P95 TTFT and ITL), and the published figure it was compared with (ms, or tok/s),
grouped by stack, GPU, GPUs a replica (the case's ``tp``: one or several) and kind of load
(:func:`simulator.track_record.load_kind` of the case's arrival and clients). ``servesim run`` and
``servesim plan`` read the file to print how the replay read on the published runs most
like the deployment (simulator/track_record.py), and ``plan --record-margin`` to tighten
its targets by the errors of the runs whose published figure was within them
(simulator/capacity/margin.py). Errors are kept to four decimals, published figures to four
significant digits; a case with no result is kept as null (a miss). The runs of a benchmark
runner sharing the engine's process (``Case.harness``: AccelMark's, whose replay adds that
runner's host cost) are left out: no scenario describes such a deployment.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import defaultdict
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run as a script from anywhere

from benchmarks.published import HEADLINE_FORMS  # noqa: E402
from benchmarks.published_cases import Case, load_cases  # noqa: E402
from benchmarks.published_misses import scored  # noqa: E402
from simulator.atomic import atomic_write  # noqa: E402
from simulator.track_record import (  # noqa: E402
    EXPERTS,
    FIGURE_LABELS,
    FIGURES,
    LOADS,
    PARALLEL,
    TAIL_FIGURES,
    TRACK_RECORD_FILE,
    figure_record,
    model_kind,
    parallel_kind,
    read_groups,
    scope_text,
    tail_percentile,
)
from simulator.track_record import (  # noqa: E402
    Group as RecordGroup,
)
from simulator.track_record import (  # noqa: E402
    load_kind as record_load_kind,
)

FIGURE_KEYS = dict(zip(HEADLINE_FORMS, (key for key, _ in FIGURES), strict=True))
"""published.py's headline figure names -> the file's figure keys."""

TAIL_KEYS: dict[str, str] = {
    f"p{tail_percentile(f):g}_{f.split('_')[0]}_ms": f for f, _ in TAIL_FIGURES}
"""published.py's tail metrics -> the file's tail figure keys (TAIL_FIGURES)."""

MADE_BY = ("python benchmarks/published.py --json F; python benchmarks/track_record.py F")


def case_load(case: Case) -> str:
    """The kind of load a published case ran under."""
    arrival = str(case.workload.get("arrival", "poisson"))
    rate = case.workload.get("rate")
    clients = case.workload.get("concurrency")
    return record_load_kind(arrival, float(rate) if rate is not None else None,
                            int(clients) if clients is not None else None)


def published_value(row: Mapping[str, Any], figure: str) -> float:
    """The published value a row's headline ``figure`` (published.py's name) compares."""
    metrics = row["metrics"]
    key = next(k for k in HEADLINE_FORMS[figure] if k in metrics)
    return float(metrics[key]["published"])


def build_groups(rows: Iterable[Mapping[str, Any]], cases: Mapping[str, Case]
                 ) -> list[dict[str, Any]]:
    """The file's groups from ``published.py`` rows: per (stack, GPU, GPUs a replica, load,
    model kind, figure), the held-out cases' errors and published values (four significant
    digits) in row order, sorted by those six fields."""
    rows = list(rows)
    by_id = {r["id"]: r for r in rows if not r.get("fitted")}  # the rows scored() keeps
    Key = tuple[str, str, str, str, str, str]
    errors: dict[Key, list[float | None]] = defaultdict(list)
    published: dict[Key, list[float]] = defaultdict(list)

    def add(case: Case, figure: str, error: float | None, value: float) -> None:
        key = (case.stack, case.gpu, parallel_kind(case.tp), case_load(case),
               model_kind(case.model), figure)
        errors[key].append(None if error is None else round(error, 4))
        published[key].append(float(f"{value:.4g}"))

    for s in scored(rows, cases):
        case = cases[s.case_id]
        if case.harness:  # a runner in the engine's process: no scenario describes one
            continue
        add(case, FIGURE_KEYS[s.figure], s.error,
            published_value(by_id[s.case_id], s.figure))
    for row in by_id.values():  # the tails the held-out rows published
        case = cases.get(row["id"])
        if case is None or case.harness:
            continue
        for metric, figure in TAIL_KEYS.items():
            cell = (row.get("metrics") or {}).get(metric)
            if cell is not None:
                add(case, figure, cell["error"], float(cell["published"]))
    return [{"stack": k[0], "gpu": k[1], "parallel": k[2], "load": k[3], "experts": k[4],
             "figure": k[5], "errors": v, "published": published[k]}
            for k, v in sorted(errors.items())]


def file_body(groups: list[dict[str, Any]], commit: str) -> dict[str, Any]:
    """The JSON written: what it is, how it was made, and the groups."""
    return {
        "about": "servesim's signed errors (simulated / published - 1) on held-out "
                 "published serving runs, and the published figures, by stack, GPU, GPUs "
                 "a replica, kind of load and model kind; read by simulator/track_record.py",
        "made_by": MADE_BY,
        "commit": commit,
        "figures": FIGURE_LABELS,
        "parallel": PARALLEL,
        "loads": LOADS,
        "experts": EXPERTS,
        "groups": groups,
    }


def file_text(body: dict[str, Any]) -> str:
    """``body`` as JSON with one group a line (a diff of two runs then reads by group)."""
    head = {k: v for k, v in body.items() if k != "groups"}
    lines = json.dumps(head, indent=1)[:-2]  # without the closing brace
    groups = ",\n  ".join(json.dumps(g) for g in body["groups"])
    return f'{lines},\n "groups": [\n  {groups}\n ]\n}}\n'


def summary_lines(groups: list[dict[str, Any]]) -> list[str]:
    """One line per (stack, load) and figure, then per (GPU class, GPUs a replica, load),
    the same for MoE models alone, then per load: cases, share within 15%, median
    |error|."""
    typed = [RecordGroup(g["stack"], g["gpu"], g["parallel"], g["load"], g["figure"],
                         tuple(g["errors"]), tuple(g["published"]), g["experts"])
             for g in groups]
    scopes = [{"stack": stack, "load": load}
              for stack, load in sorted({(g.stack, g.load) for g in typed})]
    scopes += [{"gpu_class": c, "parallel": p, "load": load}
               for c in sorted({g.gpu_class for g in typed}) for p in PARALLEL for load in LOADS]
    scopes += [{"gpu_class": c, "parallel": p, "load": load, "experts": "moe"}
               for c in sorted({g.gpu_class for g in typed if g.experts == "moe"})
               for p in PARALLEL for load in LOADS]
    scopes += [{"load": load} for load in LOADS]
    lines = []
    for scope in scopes:
        for figure, label in FIGURE_LABELS.items():
            r = figure_record(typed, figure, scope)
            if not r.cases:
                continue
            med = "-" if r.median_abs is None else f"{r.median_abs:.1%}"
            lines.append(f"{scope_text(r.scope):52s} {label:13s} {r.cases:5d} cases "
                         f"{r.share:6.1%} within, median |error| {med}")
    return lines


def same_groups(groups: list[dict[str, Any]], path: Path = TRACK_RECORD_FILE) -> bool:
    """Whether the file at ``path`` holds exactly ``groups`` (fields, errors and published
    values)."""
    shipped = [(g.stack, g.gpu, g.parallel, g.load, g.experts, g.figure, list(g.errors),
                list(g.published)) for g in read_groups(path)]
    return shipped == [(g["stack"], g["gpu"], g["parallel"], g["load"], g["experts"],
                        g["figure"], g["errors"], g["published"]) for g in groups]


def stale_note(rows: Iterable[Mapping[str, Any]], cases: Mapping[str, Case]) -> str:
    """"" when the shipped track record is these rows'; else a note saying how to renew it
    (``published.py`` prints it after a full replay)."""
    if same_groups(build_groups(rows, cases)):
        return ""
    return (f"note: {TRACK_RECORD_FILE.name} differs from this replay: the simulator's "
            "figures moved; renew it with --json F, then python benchmarks/track_record.py F")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("run", type=Path, help="a published.py --json file")
    ap.add_argument("--out", type=Path, default=TRACK_RECORD_FILE,
                    help=f"where to write (default {TRACK_RECORD_FILE})")
    ap.add_argument("--check", action="store_true",
                    help="write nothing; exit 1 when --out's groups differ from the run's")
    args = ap.parse_args(argv)
    rows = json.loads(args.run.read_text())["rows"]
    cases = {c.id: c for c in load_cases(None)}
    groups = build_groups(rows, cases)
    print("\n".join(summary_lines(groups)))
    if args.check:
        same = same_groups(groups, args.out)
        print(f"{args.out}: {'the same as' if same else 'differs from'} {args.run}'s groups")
        return 0 if same else 1
    commit = json.loads(args.run.read_text()).get("commit", "unknown (not in the replay file)")
    text = file_text(file_body(groups, str(commit)))
    atomic_write(args.out, lambda tmp: tmp.write_text(text, encoding="utf-8"))
    print(f"wrote {args.out}: {len(groups)} groups, "
          f"{sum(len(g['errors']) for g in groups)} errors")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
