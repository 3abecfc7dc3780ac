"""How steady is this CPU? Speed drift over time, and cold vs warm caches, for one step.

    python benchmarks/cpu_noise.py [--seconds 40]

1. Drift: one decode step (tiny, 4 rows at context 256, one thread) run back to back for
   ``--seconds``; prints the median of each 2-second window. The spread of those medians
   is what no cost profile can know in advance (docs/calibration.md, "The noise floor").
2. Cold vs warm: the same decode step timed right after a 4,096-token prefill (its weights
   evicted from the caches) and right after itself, alternately; prints both medians. This
   is why the profiler runs each shape once untimed before timing it.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch  # noqa: E402

from engine.models import build_model  # noqa: E402
from engine.step_timing import step_for_shape  # noqa: E402


def timed(step) -> float:  # type: ignore[no-untyped-def]
    t0 = time.perf_counter()
    step()
    return time.perf_counter() - t0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seconds", type=float, default=40.0)
    ap.add_argument("--pairs", type=int, default=40, help="cold/warm pairs")
    args = ap.parse_args()
    torch.set_num_threads(1)
    em = build_model("tiny")
    decode = step_for_shape(em, "decode", 4, 256)
    prefill = step_for_shape(em, "prefill", 8, 512)
    for _ in range(5):
        decode()
    windows, start = [], time.perf_counter()
    while time.perf_counter() - start < args.seconds:
        t_end, times = time.perf_counter() + 2.0, []
        while time.perf_counter() < t_end:
            times.append(timed(decode))
        windows.append(statistics.median(times) * 1e3)
    print("decode 4 rows x 256 context, 2-second medians (ms): "
          + " ".join(f"{w:.1f}" for w in windows))
    print(f"  min {min(windows):.1f}, max {max(windows):.1f}, "
          f"max/min {max(windows) / min(windows):.2f}")
    cold, warm = [], []
    for _ in range(args.pairs):
        prefill()
        cold.append(timed(decode))
        warm.append(timed(decode))
    c, w = statistics.median(cold) * 1e3, statistics.median(warm) * 1e3
    print(f"after a 4,096-token prefill: {c:.2f} ms; right after itself: {w:.2f} ms; "
          f"cold/warm {c / w:.3f} (median of {args.pairs} pairs)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
