"""An engine run's decode steps over time: the median decode-only step per window.

    python benchmarks/step_windows.py STEPS.parquet|RESULTS_DIR [--window 5]

Groups a step log (a results folder's ``steps.parquet``, or any step table) by its point,
policy and rate columns or its ``run`` column, whichever it has, and prints, per group, the
median duration of the steps that prefill nothing in each ``--window`` seconds of the run,
with the median number of decoding rows. A machine whose speed moves during a run shows
here as windows at different levels with the same rows (docs/gpu-profiles.md, "The first
lent GPU"):

    python benchmarks/step_windows.py benchmarks/gpu_runs/h200-2026-12-04/engine_static
    python benchmarks/step_windows.py \\
        benchmarks/gpu_runs/h200-2026-12-04/engine_continuous_reruns_steps.parquet

Prints figures; asserts nothing.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import pandas as pd


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("steps", type=Path)
    ap.add_argument("--window", type=float, default=5.0, help="seconds (default 5)")
    args = ap.parse_args()
    path = args.steps / "steps.parquet" if args.steps.is_dir() else args.steps
    steps = pd.read_parquet(path)
    keys = [k for k in ("point", "policy", "rate", "run") if k in steps]
    decode = steps[steps["num_prefill_tokens"] == 0].assign(
        ms=(steps["end_s"] - steps["start_s"]) * 1e3,
        window=(steps["start_s"] // args.window * args.window).astype(int))
    for key, part in decode.groupby(keys) if keys else [((), decode)]:
        by = part.groupby("window")
        ms = by["ms"].median().round(0).astype(int)
        rows = by["num_decode_seqs"].median()
        cells = ", ".join(f"{w}s {m} ms ({r:g} rows)" for w, m, r in
                          zip(ms.index, ms, rows, strict=True))
        print(f"{dict(zip(keys, key if isinstance(key, tuple) else (key,), strict=True))}: "
              f"decode steps {part['ms'].min():.0f}-{part['ms'].max():.0f} ms; by window: "
              f"{cells}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
