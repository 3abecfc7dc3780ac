"""Simulator speed of a 16-replica fleet with and without the fleet features (issue 15).

    .venv/bin/python benchmarks/fleet_speed.py [--requests N] [--repeats K]

The fleet: scenarios/chat.toml's traffic (chat lengths, Poisson arrivals) on Llama-3.1-8B,
one H100 SXM per replica, continuous batching, 16 replicas; the requests arrive over a
simulated hour (``--requests`` default 1,000,000: 277.8 req/s, 17.4 per replica, a little
over what one replica serves, ~15; a smaller ``--requests`` keeps the rate, so the span
shrinks). The step log is kept as a summary (``run.step_log = "summary"``) in both cases.

- ``off``: router ``least_outstanding``, no ``[admission]``, no ``[autoscale]``.
- ``on``: router ``least_outstanding_tokens``; ``[admission]`` with a token bucket at
  1.2x the offered rate (burst 100) and a queue bound of 64 per replica (both checked on
  every arrival); ``[autoscale]`` from 16 replicas between 12 and 16 on KV usage
  (up over 0.5, down under 0.2 for 60 s, every 10 s, 60 s cold start).

Each run is a fresh subprocess (so peak RSS does not mix); it prints CPU seconds of the
point (``time.process_time`` around ``run_point``: drawing the requests, simulating,
summarising), simulated requests per CPU-second and the peak RSS (``ru_maxrss``), then the
medians over ``--repeats`` and the ratio on / off. The issue's target: within 2x.
Not a test: the figures depend on the machine, its load and the Python build.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

SPAN_S = 3600.0  # the default 1M requests arrive over a simulated hour
RATE = 1_000_000 / SPAN_S  # req/s, kept for any --requests
BASE = ["policy.name='continuous'", "cluster.replicas=16", "run.step_log='summary'",
        f"workload.rate={RATE}"]
CASES: dict[str, list[str]] = {
    "off": ["cluster.router='least_outstanding'"],
    "on": ["cluster.router='least_outstanding_tokens'",
           f"admission.rate_limit={1.2 * RATE}", "admission.burst=100",
           "admission.max_queue=64",
           "autoscale.min_replicas=12", "autoscale.max_replicas=16", "autoscale.signal='kv'",
           "autoscale.scale_up_above=0.5", "autoscale.scale_down_below=0.2",
           "autoscale.down_hold_s=60.0", "autoscale.interval_s=10.0",
           "autoscale.cold_start_s=60.0"],
}


def run_one(case: str, n: int) -> dict[str, Any]:
    """Run one case in this process and return its figures."""
    from simulator.runner import run_point
    from simulator.scenario import apply_overrides, expand_sweep, load_scenario

    root = Path(__file__).resolve().parent.parent
    sets = [*BASE, f"workload.num_requests={n}", *CASES[case]]
    raw = apply_overrides(load_scenario(root / "scenarios" / "chat.toml"), sets)
    (labels, point), = expand_sweep(raw)
    c0 = time.process_time()
    pr = run_point(labels, point)
    cpu = time.process_time() - c0
    s = pr.summary
    return {"case": case, "requests": len(pr.result.requests), "cpu_s": cpu,
            "req_per_cpu_s": len(pr.result.requests) / cpu,
            "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
            "completed": s["completed"], "rejected": s["num_rejected"],
            "mean_replicas": s.get("mean_replicas"), "p99_ttft_ms": s.get("p99_ttft_ms")}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--requests", type=int, default=1_000_000)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--one", choices=tuple(CASES), help=argparse.SUPPRESS)  # child process
    args = ap.parse_args()
    if args.one:
        print(json.dumps(run_one(args.one, args.requests)))
        return
    rows: dict[str, list[dict[str, Any]]] = {c: [] for c in CASES}
    for _ in range(args.repeats):
        for case in CASES:  # interleaved, so a change in the machine's load hits both
            out = subprocess.run([sys.executable, __file__, "--one", case, "--requests",
                                  str(args.requests)], capture_output=True, text=True,
                                 check=True)
            row = json.loads(out.stdout.strip().splitlines()[-1])
            rows[case].append(row)
            print(f"{case:>3}: {row['requests']:,} requests, CPU {row['cpu_s']:.2f} s, "
                  f"{row['req_per_cpu_s']:,.0f} req/CPU-s, peak RSS {row['peak_rss_mb']:,.0f} MB, "
                  f"rejected {row['rejected']}, mean replicas {row['mean_replicas']}, "
                  f"p99 TTFT {row['p99_ttft_ms']:.0f} ms", flush=True)
    med = {c: {k: statistics.median(r[k] for r in rs) for k in ("cpu_s", "req_per_cpu_s",
                                                                 "peak_rss_mb")}
           for c, rs in rows.items()}
    load = Path("/proc/loadavg").read_text().split()[:3] if Path("/proc/loadavg").exists() \
        else ["?"]
    print(f"\nmedians of {args.repeats} ({os.cpu_count()} CPUs, load {' '.join(load)}):")
    for case, m in med.items():
        print(f"  {case:>3}: CPU {m['cpu_s']:.2f} s, {m['req_per_cpu_s']:,.0f} simulated "
              f"req/CPU-s, peak RSS {m['peak_rss_mb']:,.0f} MB")
    print(f"  on / off CPU time: {med['on']['cpu_s'] / med['off']['cpu_s']:.2f}x "
          "(target: within 2x)")


if __name__ == "__main__":
    main()
