"""A simulated deployment: arrivals, a router and replicas in one SimPy environment.

:func:`simulate` is the simulator's entry point: a request table (contract 1) in,
request records and the step log (contract 4) out. All state hangs off one call, so two
simulations in one process never interfere. The deployment (:class:`ClusterSpec`) and the
result (:class:`SimResult`) are in simulator/cluster_spec.py, the arrival side
(:class:`~simulator.driver.Driver`) in simulator/driver.py.
"""

from __future__ import annotations

import time

import pandas as pd
import simpy

from simulator.cluster_spec import ClusterSpec, LeaveHook, Progress, SimResult
from simulator.driver import Driver
from simulator.fleet.disagg import DisaggFleet
from simulator.metrics_steps import StepStats
from simulator.prefix_cache_run import combine, with_cached_tokens
from simulator.records import STEP_COLUMNS, empty_table
from simulator.replica import Replica
from simulator.served_requests import read_arrivals
from simulator.speculative_stats import SpecStats
from simulator.steplog import StepLog
from simulator.workload.prefixes import PrefixIdentity, PrefixSegments

__all__ = ["ClusterSpec", "LeaveHook", "Progress", "SimResult", "simulate"]


def simulate(
    requests: pd.DataFrame,
    spec: ClusterSpec,
    *,
    horizon_s: float | None = None,
    fast_forward: bool = True,
    progress: Progress | None = None,
    max_step_rows: int | None = None,
    max_concurrency: int | None = None,
    segments: PrefixSegments | None = None,
    on_leave: LeaveHook | None = None,
) -> SimResult:
    """Run ``requests`` through the deployment ``spec``; stop at ``horizon_s`` if given.

    Open loop when ``arrival_s`` holds times; closed loop when it is NaN and the table
    has ``client_id`` (each client sends its next request ``think_s`` after the last ends).
    ``max_concurrency`` caps an open loop's requests in flight (:class:`~simulator.driver.Driver`);
    ``spec.check_invariants`` checks the scheduler's invariants at every step;
    ``progress(done, total)`` is called about a thousand times a run; ``segments``: the
    prefix identity the table's segment columns slice (``spec.prefix_caching``);
    a step log longer than ``max_step_rows`` (over all replicas) stops the run with
    ConfigError (memory_guard.step_log_full); ``on_leave(seq, sent_s)`` hears of each
    request as its record is written (it may raise to end the run: capacity/early_stop.py).
    """
    t0 = time.perf_counter()
    env = simpy.Environment()
    arrivals = read_arrivals(requests)
    driver = Driver(env, spec, arrivals.seqs, arrivals.closed, arrivals.think_s, fast_forward,
                     spec.check_invariants, progress, max_step_rows, horizon_s,
                     max_concurrency,
                     PrefixIdentity(requests, segments) if spec.prefix_caching else None)
    driver.on_leave = on_leave
    env.run(until=horizon_s)
    step_table = _step_table(driver.replicas)
    events = (driver.num_events + driver.fleet.num_events
              + sum(r.num_events for r in driver.replicas))
    kept = [r.log.stats() for r in driver.replicas]
    prefix = combine([r.state.kv for r in driver.replicas])
    records = driver.records.table()
    transfers = None
    if isinstance(driver.fleet, DisaggFleet):  # the KV transfers' columns and figures
        records = driver.fleet.columns(records)
        transfers = driver.fleet.transfers
    return SimResult(
        requests=records if prefix is None else with_cached_tokens(records, prefix),
        steps=step_table,
        kv_blocks_total=spec.kv_blocks,
        num_replicas=len(driver.replicas),
        num_events=events,
        wall_s=time.perf_counter() - t0,
        step_stats=None if spec.step_log == "full" else StepStats.combine(
            [k for k in kept if k is not None]),
        prefix_stats=prefix,
        spec_stats=None if spec.speculative is None else SpecStats.combine(
            r.spec_stats for r in driver.replicas if r.spec_stats is not None),
        fleet=driver.fleet.usage(horizon_s, driver.num_done == driver.num_total),
        transfers=transfers,
    )


def _step_table(replicas: list[Replica]) -> pd.DataFrame:
    """The replicas' full step logs as one table (each log is cleared as it is read).

    A summary log or none keeps no rows: it is not asked for its empty table (building
    an empty pandas table a replica was a third of a 173-replica cluster check's cost at
    1,500 requests).
    """
    steps = []
    for r in replicas:
        if isinstance(r.log, StepLog):
            steps.append(r.log.table())
            r.log.clear()  # the table holds the steps now; one copy is enough
    return (steps[0] if len(steps) == 1 else
            pd.concat(steps, ignore_index=True) if steps else empty_table(STEP_COLUMNS))
