"""How long the issue-13 plan would take on idle cores: its points timed, its order replayed.

    servesim plan scenarios/capacity.toml --rate 40 --slo ttft_p99_ms=500,tpot_p99_ms=50

on a 2-CPU machine that other work loads cannot be timed by its wall clock. This plans it
in one process, times each point in CPU seconds (``time.process_time``) and replays the
dispatcher's own choices (simulator/capacity/dispatch.py: which candidate's point goes to
a free worker) on a virtual clock with ``--workers`` workers: the makespan is the wall time
the plan's points take on that many idle cores (add the start-up: ~1 s CPU of imports per
process). It prints the CPU seconds by candidate, the makespan, and its lower bound
``max(total / workers, longest candidate chain)``.

``--save FILE`` keeps every point's outcome and CPU seconds (by point key, which holds
the simulator's code hash); ``--replay FILE`` takes them from there instead of
simulating, so another worker count or dispatch order is replayed on the same costs in
a second. It runs on an older checkout too (``PYTHONPATH=<checkout> python
benchmarks/plan_schedule.py``) for before/after figures.

    python benchmarks/plan_schedule.py [--workers 2] [--save FILE | --replay FILE]
"""

from __future__ import annotations

import argparse
import heapq
import json
import sys
import time
from pathlib import Path
from typing import Any

import simulator.capacity.dispatch as dispatch_module
from simulator.capacity import build_candidates, plan
from simulator.scenario import load_scenario
from simulator.slo import parse_slo_string

ROOT = Path(__file__).resolve().parent.parent
COMMAND = "servesim plan scenarios/capacity.toml --rate 40 --slo ttft_p99_ms=500,tpot_p99_ms=50"


def loadavg() -> str:
    """The 1/5/15-minute load averages."""
    return "/".join(Path("/proc/loadavg").read_text().split()[:3])


def replay_dispatch(workers: int, store: dict[str, Any]) -> Any:
    """A Dispatch class whose ``run`` executes points here one by one (or reads them from
    ``store``), timing each, and advances a virtual clock as ``workers`` would."""

    class Virtual(dispatch_module.Dispatch):  # type: ignore[misc]
        makespan = 0.0
        log: list[dict[str, Any]] = []

        def run(self) -> None:
            clock, seq = 0.0, 0
            flight: list[tuple[float, int, Any, Any, float]] = []
            Virtual.log = []
            while True:
                while len(flight) < workers and (job := self._next_job()):
                    i, key, point = job
                    sizer = self.sizers[i]
                    how = (sizer.stop_bound() if hasattr(sizer, "stop_bound")
                           else sizer.verdict_only())
                    if key in store:
                        summary, also, cpu = store[key]
                        outcome = (summary, {int(k): v for k, v in also.items()})
                    else:
                        t0 = time.process_time()
                        outcome = dispatch_module._run(point, sizer.replays(), how)
                        cpu = time.process_time() - t0
                        store[key] = [outcome[0], outcome[1], cpu]
                    self._busy.add(i)
                    heapq.heappush(flight, (clock + cpu, seq, job, outcome, cpu))
                    Virtual.log.append({
                        "candidate": i, "rate": point["workload"]["rate"],
                        "replicas": point["cluster"]["replicas"], "cpu_s": cpu,
                        "stopped": "decided_early" in outcome[0], "start_s": clock})
                    seq += 1
                if not flight:
                    Virtual.makespan = clock
                    return
                clock, _, (i, key, point), outcome, cpu = heapq.heappop(flight)
                self._busy.discard(i)
                self._finish(i, key, point, outcome)

    return Virtual


class VirtualWorkers:
    """What the dispatcher asks of an executor here: how many workers (it runs nothing)."""

    name = "virtual"

    def __init__(self, workers: int) -> None:
        self.workers = workers

    def close(self) -> None:
        pass


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--save", default=None, help="write every point's outcome and CPU s")
    ap.add_argument("--replay", default=None, help="read them instead of simulating")
    args = ap.parse_args()
    store: dict[str, Any] = json.loads(Path(args.replay).read_text()) if args.replay else {}
    virtual = replay_dispatch(args.workers, store)
    plan_module = sys.modules["simulator.capacity.plan"]  # the package's name is the function
    setattr(plan_module, "Dispatch", virtual)  # noqa: B010 (this process only)
    cands = build_candidates(load_scenario(str(ROOT / "scenarios" / "capacity.toml")))
    before = loadavg()
    t0, c0 = time.perf_counter(), time.process_time()
    result = plan(cands, 40.0, parse_slo_string("ttft_p99_ms=500,tpot_p99_ms=50"),
                  executor=VirtualWorkers(args.workers))  # type: ignore[arg-type]
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    log = virtual.log
    total = sum(p["cpu_s"] for p in log)
    chains: dict[int, float] = {}
    for p in log:
        chains[p["candidate"]] = chains.get(p["candidate"], 0.0) + p["cpu_s"]
    longest = max(chains, key=chains.__getitem__)
    print(f"{COMMAND}: {len(log)} points, {sum(p['stopped'] for p in log)} stopped early"
          + (f" (replayed from {args.replay})" if args.replay else ""))
    if not args.replay:
        print(f"CPU in points {total:.1f} s; the plan in one process: {cpu:.1f} s CPU, "
              f"{wall:.1f} s wall; loadavg before {before}, after {loadavg()}")
    print(f"makespan on {args.workers} idle worker(s), the dispatcher's order: "
          f"{virtual.makespan:.1f} s; lower bound max(total {total:.1f} s / {args.workers}, "
          f"longest chain {chains[longest]:.1f} s) = "
          f"{max(total / args.workers, chains[longest]):.1f} s")
    for i, c in enumerate(cands):
        mine = [p for p in log if p["candidate"] == i]
        print(f"  {c.name:<32} {len(mine):>3} points {chains.get(i, 0.0):6.1f} s CPU "
              f"({sum(p['stopped'] for p in mine)} stopped)")
    print(f"best: {result.best.name if result.best else None}")
    if args.save:
        Path(args.save).write_text(json.dumps(store))


if __name__ == "__main__":
    main()
