"""Simulator speed: simulated requests per second and SimPy events per request.

100,000 chat requests (Azure-conv-shaped lengths, Poisson arrivals) on continuous
batching near saturation, one replica, one core. Prints the median of ``--repeats``
runs, per wall-clock second and per CPU-second (``time.process_time`` around ``simulate``:
steadier than the wall clock on a shared machine). Usage:
``python benchmarks/sim_speed.py [--requests N] [--rate R] [--repeats K] [--long-prompts]
[--step-log full|summary|none] [--gpu G] [--tp N] [--stack NAME[@VERSION]]
[--cost KEY=VALUE ...]`` (``[run] step_log``: what the full step log costs is the
difference between ``full`` and ``none``).
``benchmarks/instructions.py`` counts the instructions of the same workloads
(:func:`point`, :func:`request_table`).
"""

from __future__ import annotations

import argparse
import math
import statistics
import time
from typing import Any

import numpy as np
import pandas as pd

from simulator.accel import active as accel_active
from simulator.cluster import simulate
from simulator.deployment import Deployment, resolve
from simulator.steplog import STEP_LOG_MODES
from simulator.workload.build import build_requests

SCENARIO = {
    "model": {"name": "llama-3.1-8b"},
    "hardware": {"gpu": "h100-sxm"},
    "policy": {"name": "continuous"},
    "workload": {"arrival": "poisson", "num_requests": 100_000},
}


def point(requests: int, rate: float, policy_name: str, long_prompts: bool,
          step_log: str = "full", gpu: str = "h100-sxm", stack: str = "", tp: int = 1,
          cost: dict[str, float] | None = None) -> dict[str, Any]:
    """The benchmark's scenario: chat lengths, or ~8k-token prompts with a 2,048-token
    budget (``long_prompts``: chunked prefill's slow case); ``step_log``: ``[run]
    step_log``; ``gpu``: the catalogue GPU (a100-40gb prices steps from its sibling's
    tables: simulator/costs/sibling.py); ``stack``: ``name`` or ``name@version``, a
    ``[stack]`` preset with its cost terms (``trtllm@0.11`` against ``trtllm@0.12``: what
    the decode walk costs, simulator/costs/decode_walk.py), none by default; ``tp``: GPUs
    in tensor parallel; ``cost``: ``[cost]`` keys (``allreduce_sync_s=0`` against the
    preset's: what the all-reduce handshake costs, simulator/costs/allreduce_sync.py)."""
    workload = {"arrival": "poisson", "num_requests": requests, "rate": rate}
    policy: dict[str, Any] = {"name": policy_name}
    if long_prompts:
        workload |= {"prompt": {"dist": "lognormal", "mean": 8000, "sigma": 0.3},
                     "output": {"dist": "lognormal", "mean": 256, "sigma": 0.7}}
        policy |= {"max_num_batched_tokens": 2048}
    out = {**SCENARIO, "hardware": {"gpu": gpu, "tp": tp}, "policy": policy,
           "workload": workload, "run": {"step_log": step_log}}
    if cost:
        out["cost"] = dict(cost)
    if stack:
        name, _, version = stack.partition("@")
        out["stack"] = {"name": name, "version": version}
    return out


def request_table(scenario: dict[str, Any]) -> tuple[Deployment, pd.DataFrame]:
    """The resolved deployment and its request table (seed 0)."""
    dep = resolve(scenario)
    return dep, build_requests(dep.workload, np.random.default_rng(0), None).table


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--requests", type=int, default=100_000)
    ap.add_argument("--rate", type=float, default=14.0, help="req/s (capacity is ~15)")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--policy", default="continuous")
    ap.add_argument("--no-fast-forward", action="store_true")
    ap.add_argument("--long-prompts", action="store_true",
                    help="prompts ~8k tokens (lognormal, sigma 0.3), outputs ~256, a 2,048-token "
                         "budget: chunked prefill's slow case (try --rate 1.6 --policy chunked)")
    ap.add_argument("--step-log", choices=STEP_LOG_MODES, default="full",
                    help="[run] step_log: every row (default), aggregated, or nothing")
    ap.add_argument("--gpu", default="h100-sxm", help="catalogue GPU (default h100-sxm)")
    ap.add_argument("--stack", default="", help="a [stack] preset, name or name@version "
                    "(default: none)")
    ap.add_argument("--tp", type=int, default=1, help="GPUs in tensor parallel (default 1)")
    ap.add_argument("--cost", action="append", default=[], metavar="KEY=VALUE",
                    help="a [cost] key with a number, e.g. allreduce_sync_s=0 (repeatable)")
    args = ap.parse_args()
    try:
        cost = {k: float(v) for k, _, v in (c.partition("=") for c in args.cost)}
    except ValueError:
        ap.error(f"--cost takes KEY=NUMBER, got {args.cost}")
    dep, table = request_table(point(args.requests, args.rate, args.policy, args.long_prompts,
                                     args.step_log, args.gpu, args.stack, args.tp, cost))
    rates, cpu_rates, events, walls = [], [], [], []
    for _ in range(args.repeats):
        t0, c0 = time.perf_counter(), time.process_time()
        res = simulate(table, dep.cluster(), fast_forward=not args.no_fast_forward)
        cpu = time.process_time() - c0
        wall = time.perf_counter() - t0
        walls.append(wall)
        rates.append(len(res.requests) / wall)
        cpu_rates.append(len(res.requests) / cpu)
        events.append(res.num_events / len(res.requests))
    stats = res.step_stats
    num_steps = len(res.steps) if stats is None else stats.num_steps
    busy_s = float((res.steps.end_s - res.steps.start_s).sum()) if stats is None else (
        stats.busy_s if stats.kept == "summary" else math.nan)
    busy = "unknown: no step log" if math.isnan(busy_s) else \
        f"{busy_s / res.requests.finish_s.max():.0%} of the time"
    print(f"{args.gpu} x{args.tp}{', stack ' + args.stack if args.stack else ''}"
          f"{', cost ' + ' '.join(args.cost) if args.cost else ''}, policy {args.policy}, "
          f"{args.requests} requests at {args.rate} req/s "
          f"(replica busy {busy}), "
          f"{num_steps} steps, step log {args.step_log}, "
          f"{'compiled' if accel_active() else 'Python'} core (simulator/accel.py)")
    print(f"wall s per run: {', '.join(f'{w:.2f}' for w in walls)}")
    with open("/proc/loadavg") as f:
        load = " ".join(f.read().split()[:3])
    print(f"simulated requests/s (median of {args.repeats}): {statistics.median(rates):,.0f}; "
          f"per CPU-second: {statistics.median(cpu_rates):,.0f} (load {load})")
    print(f"SimPy events per request: {statistics.median(events):.2f}")
    print(f"steps per request: {num_steps / len(res.requests):.2f}")


if __name__ == "__main__":
    main()
