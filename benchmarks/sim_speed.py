"""Simulator speed: simulated requests per second and SimPy events per request.

100,000 chat requests (Azure-conv-shaped lengths, Poisson arrivals) on continuous
batching near saturation, one replica, one core. Prints the median of ``--repeats``
runs. Usage: ``python benchmarks/sim_speed.py [--requests N] [--rate R] [--repeats K]``.
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

from simulator.cluster import simulate
from simulator.deployment import resolve
from simulator.workload.config import build_requests

SCENARIO = {
    "model": {"name": "llama-3.1-8b"},
    "hardware": {"gpu": "h100-sxm"},
    "policy": {"name": "continuous"},
    "workload": {"arrival": "poisson", "num_requests": 100_000},
}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--requests", type=int, default=100_000)
    ap.add_argument("--rate", type=float, default=14.0, help="req/s (capacity is ~15)")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--policy", default="continuous")
    ap.add_argument("--no-fast-forward", action="store_true")
    args = ap.parse_args()
    point = {**SCENARIO, "policy": {"name": args.policy},
             "workload": {"arrival": "poisson", "num_requests": args.requests, "rate": args.rate}}
    dep = resolve(point)
    table = build_requests(dep.workload, np.random.default_rng(0), None).table
    rates, events, walls = [], [], []
    for _ in range(args.repeats):
        t0 = time.perf_counter()
        res = simulate(table, dep.cluster(), fast_forward=not args.no_fast_forward)
        wall = time.perf_counter() - t0
        walls.append(wall)
        rates.append(len(res.requests) / wall)
        events.append(res.num_events / len(res.requests))
    util = float((res.steps.end_s - res.steps.start_s).sum() / res.requests.finish_s.max())
    print(f"policy {args.policy}, {args.requests} requests at {args.rate} req/s "
          f"(replica busy {util:.0%} of the time), {len(res.steps)} steps")
    print(f"wall s per run: {', '.join(f'{w:.2f}' for w in walls)}")
    print(f"simulated requests/s (median of {args.repeats}): {statistics.median(rates):,.0f}")
    print(f"SimPy events per request: {statistics.median(events):.2f}")
    print(f"steps per request: {len(res.steps) / len(res.requests):.2f}")


if __name__ == "__main__":
    main()
