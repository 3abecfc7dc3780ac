"""What the shipped published runs' per-request records show (benchmarks/published_runs/).

    python benchmarks/published_runs_check.py

For each run: the least-squares line of TTFT against prompt tokens (a cold prefix cache
prefills every prompt token; a warm one does not); for each finite-rate run, how far
before its recorded duration its last request ends when sent at vLLM's client's send
times with seeds 0-4 (simulator/workload/arrivals.py ``vllm_bench_sends``; negative: it
would end after the run did); for the burst, its first tokens in groups (a new group where
two sorted first-token times lie more than 50 ms apart). Published figures, read from the
files: the same on any machine.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run as a script from anywhere

from simulator.workload.arrivals import vllm_bench_sends  # noqa: E402

RUNS = Path(__file__).with_name("published_runs")
GROUP_GAP_S = 0.05


def main() -> int:
    for path in sorted(RUNS.glob("*.json")):
        run = json.loads(path.read_text())
        prompts = np.array(run["input_lens"], dtype=float)
        ttft = np.array(run["ttfts"])
        slope, intercept = np.polyfit(prompts, ttft * 1e3, 1)
        rate = float(run["request_rate"])
        print(f"{path.name}: rate {rate:g}, TTFT = {intercept:.1f} ms + {slope:.4f} ms x "
              "prompt tokens")
        e2e = ttft + np.array([sum(g) for g in run["itls"]])
        if np.isfinite(rate):
            slack = [float(run["duration"] - (vllm_bench_sends(rate, len(e2e), seed=s)
                                              + e2e).max()) for s in range(5)]
            print("  last end before the duration, seeds 0-4 (s): "
                  + ", ".join(f"{x:+.3f}" for x in slack))
        else:
            first = np.sort(ttft)
            cuts = np.flatnonzero(np.diff(first) > GROUP_GAP_S) + 1
            for group in np.split(first, cuts):
                print(f"  {len(group)} first tokens at {group[0] * 1e3:.0f}-"
                      f"{group[-1] * 1e3:.0f} ms")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
