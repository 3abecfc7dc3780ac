"""How long a capacity plan takes: the issue-13 command, and many candidates over workers.

``--capacity`` runs the issue's target command in a fresh process, the way a user does,

    servesim plan scenarios/capacity.toml --rate 40 --slo ttft_p99_ms=500,tpot_p99_ms=50

and prints its wall time, the CPU time of it and its workers, the peak RSS of the
largest of them (the main process or one pool worker), the points it simulated (per
candidate, from ``plan.json``), how many of them stopped once their verdict was a fail
(capacity/early_stop.py), the requests they served, the CPU model and the load average
beside it; ``--repeat`` gives the median of several runs. ``--compare`` adds runs with
``--no-early-stop`` and with ``--full-search`` (no shortcut at all: bisect to 2%, every
point to its end) and checks the plan is the same. Target (issue 13): under 30 s on 2
cores.

``benchmarks/plan_schedule.py`` times the same command's points in CPU seconds and gives
the wall time the dispatcher's order would take on idle cores (a loaded machine cannot).

Without ``--capacity`` it plans a small chat-like workload over at least 200 candidates
(GPU x TP x policy x max_num_seqs x chunk size) on the local process pool, then on a Dask
LocalCluster with 1 and 2 worker processes, and checks every backend gives the same
plan. Step costs are a tiny inline linear model and points are 1,000 requests with >= 10
beyond the P99 (``--min-tail 10``), so the default run takes a few minutes on 2 cores;
raise ``--requests``/``--min-tail`` for the production rule (docs/capacity.md).

    python benchmarks/plan_speed.py --capacity [--repeat 3] [--workers 2] [--compare]
    python benchmarks/plan_speed.py [--candidates 200] [--workers 2] [--no-dask]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from simulator.capacity import SearchSettings, build_candidates, plan
from simulator.executors import DaskExecutor, Executor, default_workers, open_executor
from simulator.slo import parse_slo_string

BASE: dict[str, Any] = {
    "name": "plan-speed", "seed": 0,
    "model": {"name": "llama-3.1-8b"},
    "workload": {"arrival": "poisson", "rate": 100.0,
                 "prompt": {"dist": "uniform", "low": 32, "high": 256},
                 "output": {"dist": "uniform", "low": 8, "high": 64}},
    "cost": {"form": "linear", "step_s": 0.004, "decode_seq_s": 0.0002,
             "prefill_token_s": 0.00002},
}
GPUS = ["a100-40gb", "a100-80gb", "h100-pcie", "h100-sxm", "h200", "l40s", "b200"]


def candidates(at_least: int) -> list[Any]:
    """GPU x TP(1,2) x policy(continuous, chunked) x max_num_seqs x chunk: >= at_least."""
    seqs = [16, 32, 64, 128]
    chunks = [1024, 2048]
    while True:
        axes = {"gpus": GPUS, "tp": [1, 2], "policies": ["continuous", "chunked"],
                "max_num_seqs": seqs, "chunk": chunks}
        found = build_candidates(BASE, axes)
        if len(found) >= at_least:
            return found
        seqs.append(seqs[-1] * 2)


def timed(label: str, ex: Executor, cands: list[Any], settings: SearchSettings) -> Any:
    """Run one plan on ``ex``; print and return its wall time and result."""
    t0 = time.perf_counter()
    result = plan(cands, 300.0, parse_slo_string("ttft_p99_ms=100,tpot_p99_ms=20"),
                  settings=settings, executor=ex)
    wall = time.perf_counter() - t0
    sims = sum(r.simulations for r in result.ranked)
    print(f"{label:<28} {wall:8.1f} s  {sims} simulations  "
          f"{sims / wall:6.1f} sims/s  best: {result.best.name if result.best else None}")
    return wall, result.to_json()


ROOT = Path(__file__).resolve().parent.parent
TARGET = ["plan", "scenarios/capacity.toml", "--rate", "40",
          "--slo", "ttft_p99_ms=500,tpot_p99_ms=50", "--no-cache", "--json"]


def run_target(workers: int, extra: list[str]) -> dict[str, Any]:
    """The target command in a child process: wall s, CPU s, peak RSS MB, the plan."""
    with tempfile.TemporaryDirectory() as out:
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        t0 = time.perf_counter()
        done = subprocess.run(
            [sys.executable, "-m", "servesim.cli", *TARGET, "--workers", str(workers),
             "--out", out, *extra], cwd=ROOT, capture_output=True, text=True, check=True)
        wall = time.perf_counter() - t0
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    # ru_maxrss of children: the largest single process reaped so far, in KiB on Linux
    return {"wall_s": wall, "cpu_s": cpu, "peak_rss_mb": after.ru_maxrss / 1024,
            "plan": json.loads(done.stdout)}


def cpu_model() -> str:
    """The CPU's model name (Linux), for the figures' context."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "unknown CPU"


def answer(p: dict[str, Any]) -> list[Any]:
    """What must not change with the shortcuts: every candidate's status, replicas, cost,
    reason and reported figures, the best and the Pareto front."""
    return [(c["name"], c["status"], c["replicas"], c["usd_per_hour"], c["reason"],
             c["at_target"], c["miss"]) for c in p["candidates"]] + [p["best"], p["pareto"]]


def capacity(args: argparse.Namespace) -> None:
    """Print the target command's figures (medians of ``--repeat`` runs)."""
    variants = [("default", [])] + ([("--no-early-stop", ["--no-early-stop"]),
                                     ("--full-search", ["--full-search"])]
                                    if args.compare else [])
    print(f"servesim {' '.join(TARGET)} --workers {args.workers}; "
          f"{default_workers()} local CPUs ({cpu_model()})")
    plans = {}
    for label, extra in variants:
        runs = []
        for _ in range(args.repeat):
            load = Path("/proc/loadavg").read_text().split()[:3] if Path(
                "/proc/loadavg").exists() else [f"{os.getloadavg()[0]:.2f}"]
            runs.append(run_target(args.workers, extra) | {"load": "/".join(load)})
        plan_json = runs[-1]["plan"]
        plans[label] = plan_json
        cands = plan_json["candidates"]
        sims = {c["name"]: c["simulations"] for c in cands}
        best = next((c for c in cands if c["name"] == plan_json["best"]), None)
        med = {k: statistics.median(r[k] for r in runs) for k in ("wall_s", "cpu_s")}
        print(f"{label:<16} wall {med['wall_s']:6.1f} s  CPU {med['cpu_s']:6.1f} s  "
              f"peak RSS {max(r['peak_rss_mb'] for r in runs):6.0f} MB  "
              f"{plan_json['points_computed']} points "
              f"({sum(c.get('decided_early', 0) for c in cands)} stopped early), "
              f"{sum(c.get('requests_simulated', 0) for c in cands):,} requests  "
              f"(target: < 30 s wall on 2 cores)")
        print(f"{'':<16} each run: wall {[round(r['wall_s'], 1) for r in runs]}  "
              f"CPU {[round(r['cpu_s'], 1) for r in runs]}  "
              f"loadavg before {[r['load'] for r in runs]}")
        if best is not None:
            print(f"{'':<16} best: {best['name']}, {best['replicas']} replicas, "
                  f"${best['usd_per_hour']:.2f}/hour")
        print(f"{'':<16} points per candidate: {sims}")
    for label in plans:
        if label != "default":
            same = answer(plans["default"]) == answer(plans[label])
            print(f"same plan and reported figures with {label}: {same}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--capacity", action="store_true",
                    help="time the issue-13 target command (servesim plan scenarios/capacity.toml)")
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--compare", action="store_true",
                    help="--capacity: also run with --no-early-stop and --full-search")
    ap.add_argument("--candidates", type=int, default=200)
    ap.add_argument("--workers", type=int, default=default_workers())
    ap.add_argument("--requests", type=int, default=1000)
    ap.add_argument("--min-tail", type=int, default=10)
    ap.add_argument("--no-dask", action="store_true")
    args = ap.parse_args()
    if args.capacity:
        capacity(args)
        return
    cands = candidates(args.candidates)
    settings = SearchSettings(min_requests=args.requests, min_tail=args.min_tail)
    print(f"{len(cands)} candidates, {args.requests}+ requests per point, "
          f"{default_workers()} local CPUs")
    with open_executor(args.workers) as ex:
        _, ref = timed(f"process pool x{ex.workers}", ex, cands, settings)
    if args.no_dask:
        return
    walls = {}
    for n in sorted({1, args.workers}):
        ex = DaskExecutor("local", workers=n)
        try:
            walls[n], got = timed(f"dask LocalCluster x{n}", ex, cands, settings)
        finally:
            ex.close()
        same = {k: v for k, v in got.items() if k != "points_computed"} == {
            k: v for k, v in ref.items() if k != "points_computed"}
        print(f"{'':<28} same plan as the process pool: {same}")
    if len(walls) == 2:
        n = max(walls)
        print(f"dask speed-up 1 -> {n} workers: {walls[1] / walls[n]:.2f}x")


if __name__ == "__main__":
    main()
