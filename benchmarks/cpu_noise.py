"""How steady is this CPU? Speed drift over time, cold vs warm caches, idle gaps, for one step.

    python benchmarks/cpu_noise.py [--seconds 40] [--pairs 40] [--idle-runs 8]

1. Drift: one decode step (tiny, 4 rows at context 256, one thread) run back to back for
   ``--seconds``; prints the median of each 2-second window. The spread of those medians
   is what no cost profile can know in advance (docs/calibration.md, "The noise floor").
2. Cold vs warm: the same decode step timed right after a 4,096-token prefill (its weights
   evicted from the caches) and right after itself, alternately; prints both medians. This
   is why the profiler runs each shape once untimed before timing it.
3. After idling: a 20-token and a 340-token prefill (one row each), each timed after the
   process slept 0, 5 ms, 50 ms and 0.4 s (a served request's wait), alternately; prints
   each median. A profile times its shapes back to back, so what an idle gap adds to a
   small step is in no profile (docs/prefix-caching.md, "TTFT with reuse on the engine").
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

IDLE_GAPS_S = (0.0, 0.005, 0.05, 0.4)  # how long the process sleeps before each timed step


def timed(step) -> float:  # type: ignore[no-untyped-def]
    t0 = time.perf_counter()
    step()
    return time.perf_counter() - t0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seconds", type=float, default=40.0)
    ap.add_argument("--pairs", type=int, default=40, help="cold/warm pairs")
    ap.add_argument("--idle-runs", type=int, default=8, help="runs of each step after each gap")
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
    small, long = step_for_shape(em, "prefill", 1, 20), step_for_shape(em, "prefill", 1, 340)
    for _ in range(3):
        small(), long()
    for gap in IDLE_GAPS_S:
        after: dict[str, list[float]] = {"small": [], "long": []}
        for _ in range(args.idle_runs):
            for name, step in (("small", small), ("long", long)):
                time.sleep(gap)
                after[name].append(timed(step))
        print(f"after {gap * 1e3:g} ms asleep: 20-token prefill "
              f"{statistics.median(after['small']) * 1e3:.2f} ms, 340-token prefill "
              f"{statistics.median(after['long']) * 1e3:.2f} ms "
              f"(medians of {args.idle_runs})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
