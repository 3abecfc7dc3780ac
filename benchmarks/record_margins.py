"""The margins ``servesim plan --record-margin`` would take, group by group of the shipped
track record: every run, and the runs measured within a few TTFT / TPOT targets.

    python benchmarks/record_margins.py [--cover 0.8] [--ttft 200,500,1000] [--tpot 50]

Per GPU class, GPUs a replica and kind of load (the record's scopes without a stack or a
GPU), and per figure (TTFT and TPOT, then the tails the runs published: P99, P95 and P90
TTFT, P99 and P90 TPOT, P99, P95 and P90 ITL, which a P90-P99.9 target reads first): the
runs and the under-reading ``u`` at the cover over every run, then over the runs whose
published figure was within each target (simulator/capacity/margin.py; docs/capacity.md,
"Planning with the record's margin"). A
target's factor is ``1 + u`` where ``u < 0``. It reads ``simulator/track_record.json``
only: no replay.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run as a script from anywhere

from simulator.capacity.margin import DEFAULT_COVER, check_cover, under_reading  # noqa: E402
from simulator.track_record import (  # noqa: E402
    FIGURE_LABELS,
    LOADS,
    PARALLEL,
    TAILS,
    figure_record,
    read_groups,
    scope_text,
)


def _numbers(text: str) -> list[float]:
    return [float(t) for t in text.split(",") if t.strip()]


def _cell(errors: tuple[float, ...], cover: float) -> str:
    u = under_reading(errors, cover)
    return f"{len(errors):4d} runs {'-' if u is None else f'{u:+7.1%}':>7s}"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cover", type=float, default=DEFAULT_COVER,
                    help="share of the runs the margin covers (default %(default)s)")
    ap.add_argument("--ttft", type=_numbers, default=[200.0, 500.0, 1000.0],
                    help="TTFT targets, ms (default 200,500,1000)")
    ap.add_argument("--tpot", type=_numbers, default=[50.0, 100.0],
                    help="TPOT targets, ms (default 50,100)")
    args = ap.parse_args(argv)
    cover = check_cover(args.cover, "--cover")
    groups = read_groups()
    classes = sorted({g.gpu_class for g in groups})
    print(f"under-reading u at cover {cover:g}: the error that {cover:.0%} of the runs are at "
          "or above (factor on a target: 1 + u where u < 0)")
    figures = [("ttft", args.ttft), *((f, args.ttft) for f in TAILS["ttft"]),
               ("tpot", args.tpot), *((f, args.tpot) for f in (*TAILS["tpot"], *TAILS["itl"]))]
    width = max(len(scope_text({"gpu_class": c, "parallel": p, "load": ld}.items()))
                for c in classes for p in PARALLEL for ld in LOADS)
    for figure, targets in figures:
        head = "".join(f"  within {t:g} ms".ljust(22) for t in targets)
        print(f"\n{FIGURE_LABELS[figure]}: {'scope':{width}s} {'every run':17s}{head}")
        for gpu_class in classes:
            for parallel in PARALLEL:
                for load in LOADS:
                    scope = {"gpu_class": gpu_class, "parallel": parallel, "load": load}
                    every = figure_record(groups, figure, scope)
                    if not every.errors:
                        continue
                    cells = [_cell(figure_record(groups, figure, scope, t).errors, cover)
                             for t in targets]
                    print(f"      {scope_text(every.scope):{width}s} {_cell(every.errors, cover)}  "
                          + "  ".join(cells))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
