"""A simulated deployment: arrivals, a router and replicas in one SimPy environment.

:func:`simulate` is the simulator's entry point: a request table (contract 1) in,
request records and the step log (contract 4) out. All state hangs off one call, so two
simulations in one process never interfere.
"""

from __future__ import annotations

import math
import time
from collections import deque
from collections.abc import Callable, Generator
from dataclasses import dataclass
from typing import Any

import pandas as pd
import simpy

from simulator.costs.base import CostModel
from simulator.kvcache import BlockManager
from simulator.metrics_steps import StepStats
from simulator.policies import Policy, Sequence
from simulator.record_columns import RecordColumns
from simulator.records import STEP_COLUMNS, empty_table
from simulator.replica import Replica
from simulator.router import make_router
from simulator.served_requests import read_arrivals


@dataclass(slots=True)
class SimResult:
    """What one simulation produced."""

    requests: pd.DataFrame  # request records, one row per request that arrived
    steps: pd.DataFrame  # step log of every replica
    kv_blocks_total: int  # KV blocks per replica
    num_replicas: int
    num_events: int  # SimPy events waited on (arrivals + replica steps and waits)
    wall_s: float  # wall-clock time the simulation took
    step_stats: StepStats | None = None  # the step log's figures when not kept ([run] step_log)


@dataclass(slots=True, frozen=True)
class ClusterSpec:
    """The deployment being simulated."""

    policy: Policy
    cost: CostModel
    kv_blocks: int  # per replica
    block_size: int = 16  # tokens per KV block
    num_replicas: int = 1
    router: str = "round_robin"
    # Seconds from a request's arrival to the engine seeing it (API server, tokenising,
    # HTTP): it occupies no replica; TTFT and E2E include it (costs/host.py).
    request_s: float = 0.0
    # Check the scheduler's invariants after every schedule() and step (policies/
    # invariants.py): O(requests) per step, so tests turn it on, runs leave it off.
    check_invariants: bool = False
    step_log: str = "full"  # what is kept of the step log (steplog.STEP_LOG_MODES)

    def __post_init__(self) -> None:
        if not (self.request_s >= 0.0 and math.isfinite(self.request_s)):
            raise ValueError(f"request_s={self.request_s!r} must be a finite number >= 0")


Progress = Callable[[int, int], None]
"""``progress(done, total)``: requests finished or refused so far, of those in the table."""


class ArrivalTimeout(simpy.Event):
    """A timeout at URGENT priority: an arrival at the same instant as a step's end is
    processed first, so the next schedule always sees it (the same in every code path:
    stepping, fast-forward cut by an interrupt, or stopped at a known arrival)."""

    def __init__(self, env: simpy.Environment, delay: float) -> None:
        super().__init__(env)
        self._ok = True
        self._value = None
        env.schedule(self, simpy.events.URGENT, delay)


class _Driver:
    """Arrivals (open or closed loop), the router, and bookkeeping of who is done.

    With ``spec.request_s > 0`` a request sent at ``t`` reaches the router at
    ``t + request_s``; from then on its ``Sequence.arrival_s`` is that time (what the engine
    sees: a dynamic batch's wait starts there), and ``sent_s`` keeps the send time for the
    records. At 0 nothing is shifted, so runs without host latency are unchanged bit for bit.

    ``max_concurrency = C`` caps an open loop's requests in flight, as vLLM ``bench serve
    --max-concurrency`` does (an asyncio semaphore around each request,
    vllm/benchmarks/serve.py ``limited_request_func``, commit 009e6d4): a request due while
    C are outstanding (sent, not yet finished or refused) waits, first due first served,
    and is sent when a slot frees. Its send time is that release, and the records'
    ``arrival_s`` is the send, as the client's TTFT starts at the send.
    """

    def __init__(self, env: simpy.Environment, spec: ClusterSpec, seqs: list[Sequence],
                 closed_loop: bool, think_s: list[float], fast_forward: bool,
                 check_invariants: bool, progress: Progress | None = None,
                 max_step_rows: int | None = None, horizon_s: float | None = None,
                 max_concurrency: int | None = None) -> None:
        self.env = env
        self.num_done = 0  # requests finished or refused
        self.num_total = len(seqs)
        self._progress = progress
        self._every = max(1, len(seqs) // 1000)  # progress calls: about a thousand per run
        self.router = make_router(spec.router)
        self.request_s = spec.request_s
        # Open loop into one replica: the next arrival is known ahead, so a replica's
        # fast-forward can stop at it rather than be interrupted by it.
        # A capped open loop sends when a request ends: not known ahead, as a closed loop.
        known = not closed_loop and spec.num_replicas == 1 and max_concurrency is None
        self.next_arrival_s = seqs[0].arrival_s + self.request_s if seqs else math.inf
        self.replicas = [
            Replica(env, i, spec.policy, spec.cost, BlockManager(spec.kv_blocks, spec.block_size),
                    self._done, fast_forward=fast_forward, check_invariants=check_invariants,
                    next_arrival_s=(lambda: self.next_arrival_s) if known else None,
                    step_log=spec.step_log, horizon_s=horizon_s,
                    max_step_rows=None if max_step_rows is None else max(
                        1, max_step_rows // spec.num_replicas))
            for i in range(spec.num_replicas)
        ]
        self.states = [r.state for r in self.replicas]
        self.records = RecordColumns()  # a request's record, written as it leaves
        self.num_events = 0
        self._unsent = len(seqs)
        self._clients: dict[int, deque[tuple[Sequence, float]]] = {}
        self._cap = max_concurrency  # None: no cap on requests in flight
        self._in_flight = 0  # capped open loop: sent and not yet done
        self._waiting: deque[Sequence] = deque()  # capped open loop: due, waiting for a slot
        if closed_loop and max_concurrency is not None:
            raise ValueError(f"{max_concurrency=}: only for an open loop (arrival_s given)")
        if closed_loop:
            for seq, think in zip(seqs, think_s, strict=True):
                self._clients.setdefault(seq.client_id, deque()).append((seq, think))
            for queue in self._clients.values():  # a first request's think_s: its start
                first, start_s = queue.popleft()
                if start_s > 0:
                    self._send_later(first, start_s)
                else:
                    self._send(first)
        else:
            env.process(self._open_loop(seqs))

    def _send_later(self, seq: Sequence, delay_s: float) -> None:
        """A client sends ``seq`` ``delay_s`` from now (closed loop, or a freed slot)."""
        ArrivalTimeout(self.env, delay_s).callbacks.append(lambda _ev: self._send(seq))
        self.num_events += 1

    def _send(self, seq: Sequence) -> None:
        """A client sends ``seq`` now (closed loop, or a capped open loop's free slot); it
        reaches the router ``request_s`` later."""
        seq.arrival_s = self.env.now
        if self.request_s > 0:
            sent = seq.arrival_s
            self.num_events += 1
            ArrivalTimeout(self.env, self.request_s).callbacks.append(
                lambda _ev: self._deliver(seq, sent))
        else:
            self._deliver(seq, seq.arrival_s)

    def _deliver(self, seq: Sequence, sent_s: float) -> None:
        """``seq``, sent at ``sent_s``, reaches the router now."""
        self.records.arrive(seq, sent_s)
        if self.request_s > 0:
            seq.arrival_s = self.env.now
        self.replicas[self.router.pick(self.states)].submit(seq)
        self._unsent -= 1
        if self._unsent == 0:
            for r in self.replicas:
                r.close_arrivals()

    def _open_loop(self, seqs: list[Sequence]) -> Generator[simpy.Event, Any, None]:
        env = self.env
        pending = deque(seqs)
        seqs.clear()  # held only until sent: a request's memory lasts while it is served
        while pending:
            seq = pending.popleft()
            if self._cap is not None:  # due at arrival_s; sent then, or when a slot frees
                if seq.arrival_s > env.now:
                    self.num_events += 1
                    yield ArrivalTimeout(env, seq.arrival_s - env.now)
                self._due(seq)
                continue
            self.next_arrival_s = seq.arrival_s + self.request_s
            delay = self.next_arrival_s - env.now
            if delay > 0:
                self.num_events += 1
                yield ArrivalTimeout(env, delay)
            self._deliver(seq, seq.arrival_s)
        self.next_arrival_s = math.inf

    def _due(self, seq: Sequence) -> None:
        """A capped open loop's request is due now: sent if a slot is free, else queued."""
        if self._in_flight < int(self._cap or 0):
            self._in_flight += 1
            self._send(seq)
        else:
            self._waiting.append(seq)

    def _done(self, seq: Sequence) -> None:
        self.records.leave(seq)
        self.num_done += 1
        if self._progress is not None and (
                self.num_done % self._every == 0 or self.num_done == self.num_total):
            self._progress(self.num_done, self.num_total)
        if self._cap is not None:  # the slot passes to the longest-waiting request
            self._in_flight -= 1
            if self._waiting:  # sent through an event, as a closed-loop client's next
                self._in_flight += 1
                self._send_later(self._waiting.popleft(), 0.0)
        queue = self._clients.get(seq.client_id)
        if queue:
            nxt, think = queue.popleft()
            self._send_later(nxt, think)


def simulate(
    requests: pd.DataFrame,
    spec: ClusterSpec,
    *,
    horizon_s: float | None = None,
    fast_forward: bool = True,
    progress: Progress | None = None,
    max_step_rows: int | None = None,
    max_concurrency: int | None = None,
) -> SimResult:
    """Run ``requests`` through the deployment ``spec``; stop at ``horizon_s`` if given.

    Open loop when ``arrival_s`` holds times; closed loop when it is NaN and the table
    has ``client_id`` (each client sends its next request ``think_s`` after the last ends).
    ``max_concurrency`` caps an open loop's requests in flight (:class:`_Driver`);
    ``spec.check_invariants`` checks the scheduler's invariants at every step;
    ``progress(done, total)`` is called about a thousand times a run;
    a step log longer than ``max_step_rows`` (over all replicas) stops the run with
    ConfigError (memory_guard.step_log_full).
    """
    t0 = time.perf_counter()
    env = simpy.Environment()
    arrivals = read_arrivals(requests)
    driver = _Driver(env, spec, arrivals.seqs, arrivals.closed, arrivals.think_s, fast_forward,
                     spec.check_invariants, progress, max_step_rows, horizon_s,
                     max_concurrency)
    env.run(until=horizon_s)
    steps = []
    for r in driver.replicas:
        steps.append(r.log.table())
        r.log.clear()  # the table holds the steps now; one copy is enough
    step_table = (steps[0] if len(steps) == 1 else
                  pd.concat(steps, ignore_index=True) if steps else empty_table(STEP_COLUMNS))
    events = driver.num_events + sum(r.num_events for r in driver.replicas)
    kept = [r.log.stats() for r in driver.replicas]
    return SimResult(
        requests=driver.records.table(),
        steps=step_table,
        kv_blocks_total=spec.kv_blocks,
        num_replicas=spec.num_replicas,
        num_events=events,
        wall_s=time.perf_counter() - t0,
        step_stats=None if spec.step_log == "full" else StepStats.combine(
            [k for k in kept if k is not None]),
    )
