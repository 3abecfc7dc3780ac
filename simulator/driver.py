"""The arrival side of a simulation: open or closed loop clients, the front door and the
router, and bookkeeping of who is done (:class:`Driver`, used by simulator/cluster.py)."""

from __future__ import annotations

import heapq
import math
from collections import deque
from collections.abc import Generator
from typing import Any

import simpy

from simulator.cluster_spec import ClusterSpec, LeaveHook, Progress
from simulator.costs.host import intake_request_s
from simulator.fleet.autoscaler import Autoscaler
from simulator.fleet.disagg import DisaggFleet, ReplicaOptions
from simulator.fleet.fleet import Fleet
from simulator.fleet.tokens import TokenReplica
from simulator.fleet.urgent import UrgentTimeout
from simulator.policies import Sequence
from simulator.prefix_cache_run import block_manager
from simulator.record_columns import RecordColumns
from simulator.replica import Replica
from simulator.router import Router, needs_tokens, reads_cache
from simulator.workload.prefixes import PrefixIdentity


class ArrivalTimeout(UrgentTimeout):
    """A timeout at URGENT priority: an arrival at the same instant as a step's end is
    processed first, so the next schedule always sees it (the same in every code path:
    stepping, fast-forward cut by an interrupt, or stopped at a known arrival)."""


class OpenLoopArrivals(simpy.Event):
    """An uncapped open loop's arrivals as one URGENT event, rescheduled for each next
    arrival, whose callback delivers the request due (:class:`ArrivalTimeout`'s priority).

    What a process yielding one ``ArrivalTimeout`` per arrival did (the capped loop still
    does: ``Driver._open_loop``), in the same order: the first schedule plays the
    process's start (URGENT, at once), and each later one is made where the process made
    its timeout, so every SimPy event id, and with it the order of simultaneous events,
    is unchanged. What it saves per arrival is a new event and SimPy's interpreted
    process step (``Process._resume``, a generator send): the new event alone was 7.3k of
    the fleet's ~141k instructions a request in a callgrind profile (docs/architecture.md,
    "Fewer instructions per request").
    One difference, unobservable: the process's own end was an event with no callbacks.
    """

    def __init__(self, driver: Driver, seqs: list[Sequence]) -> None:
        super().__init__(driver.env)
        self._driver = driver
        self._pending = deque(seqs)
        seqs.clear()  # held only until sent: a request's memory lasts while it is served
        self._due: Sequence | None = None  # the request this event delivers when it fires
        self._ok = True
        self._value = None
        self.callbacks.append(self._fire)
        driver.env.schedule(self, simpy.events.URGENT, 0.0)

    def _fire(self, _event: simpy.Event) -> None:
        """Deliver the request due now, then those due at once, then wait for the next."""
        driver, env = self._driver, self.env
        seq = self._due
        if seq is not None:
            self._due = None
            driver._deliver(seq, seq.arrival_s)
        pending, request_s = self._pending, driver.request_s
        while pending:
            seq = pending.popleft()
            driver.next_arrival_s = seq.arrival_s + request_s
            delay = driver.next_arrival_s - env.now
            if delay > 0:
                driver.num_events += 1
                self._due = seq
                self.callbacks = [self._fire]  # SimPy cleared them when it processed this
                env.schedule(self, simpy.events.URGENT, delay)
                return
            driver._deliver(seq, seq.arrival_s)
        driver.next_arrival_s = math.inf


class Driver:
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

    on_leave: LeaveHook | None = None  # simulate(on_leave=), set once built
    _tick: Autoscaler  # the fleet's autoscaler, when it has one

    def __init__(self, env: simpy.Environment, spec: ClusterSpec, seqs: list[Sequence],
                 closed_loop: bool, think_s: list[float], fast_forward: bool,
                 check_invariants: bool, progress: Progress | None = None,
                 max_step_rows: int | None = None, horizon_s: float | None = None,
                 max_concurrency: int | None = None,
                 identity: PrefixIdentity | None = None) -> None:
        self.env = env
        self.num_done = 0  # requests finished or refused
        self.num_total = len(seqs)
        self._progress = progress
        self._every = max(1, len(seqs) // 1000)  # progress calls: about a thousand per run
        self.request_s = spec.request_s
        # the replicas' API servers take each request in, one at a time ([cost] overhead
        # intake_s; simulator/token_stream.py): a request reaches an engine when taken in
        intake_s = intake_request_s(spec.cost) if spec.disaggregated is None else 0.0
        self._intake = intake_s > 0
        # a request that reaches the router at t reaches an engine no sooner than t +
        # intake_s: the replicas' runs need stop only there (a token emitted in between is
        # handed out as emitted, not behind that request's intake: at most intake_s early),
        # unless the router reads the replicas' prefix caches at t (exact_reads below)
        self._intake_s = 0.0 if reads_cache(spec.router) and spec.prefix_caching \
            else intake_s
        self._handing: list[float] = []  # heap: when requests taken in reach their engine
        # Open loop into one replica: the next arrival is known ahead, so a replica's
        # fast-forward can stop at it rather than be interrupted by it.
        # A capped open loop sends when a request ends: not known ahead, as a closed loop.
        # Several replicas too (issue 13): they interact only through arrivals (and an
        # autoscaler's evaluations), so none can be affected before the next one, whoever
        # it goes to. What a router, the front door or an autoscaler reads of a replica is
        # as of that instant even inside a decode run that goes on past it: waiting and
        # running do not change within a run, and a token-counting replica counts the
        # run's steps that ended so far (simulator/fleet/tokens.py). A router reading the
        # prefix caches is the exception: a run changes them as it ends, so its replicas
        # run nothing past an arrival (Replica exact_reads).
        scaling = spec.autoscale is not None and spec.autoscale.enabled
        known = not closed_loop and max_concurrency is None
        self.next_arrival_s = seqs[0].arrival_s + self.request_s if seqs else math.inf
        most = spec.autoscale.max_replicas if spec.autoscale is not None and scaling \
            else spec.num_replicas
        # a replica that counts tokens (and, for an autoscaler on KV, blocks) inside its
        # fast-forwarded decode runs: what the router or autoscaler reads is then exact
        signal = spec.autoscale.signal if spec.autoscale is not None and scaling else None
        track_kv = signal == "kv"
        kind = TokenReplica if needs_tokens(spec.router) or signal in ("kv", "ttft") \
            else Replica
        extra = {"track_kv": True} if track_kv else {}
        if signal in ("kv", "ttft"):  # blocks opened, requests finished inside any run
            extra["step_uneven_runs"] = True
        # a router reading prefix caches: none may lag behind stepping (replica.py)
        exact = reads_cache(spec.router) and spec.prefix_caching
        if exact:
            extra["exact_reads"] = True
        elif known and (spec.num_replicas > 1 or scaling):  # a decode run goes on past
            extra["own_arrivals_cut"] = True  # others' arrivals (and autoscaler evaluations)
        # replicas' steps stop short of the next arrival, or evaluation when scaling
        cut = None if not known else self._next_event_s if scaling else self._next_arrival
        self._unsent = len(seqs)

        def make(i: int) -> Replica:
            r = kind(env, i, spec.policy, spec.cost,
                     block_manager(spec.kv_blocks, spec.block_size, identity,
                                   window_blocks=spec.window_blocks),
                     on_done=self._done, fast_forward=fast_forward,
                     check_invariants=check_invariants,
                     next_arrival_s=cut,
                     step_log=spec.step_log, horizon_s=horizon_s,
                     acceptance=None if spec.speculative is None else spec.speculative.sampler(i),
                     max_step_rows=None if max_step_rows is None else max(
                         1, max_step_rows // most), **extra)
            if self._unsent == 0:  # started after the last arrival
                r.close_arrivals()
            return r

        self.fleet: Fleet | DisaggFleet
        if spec.disaggregated is not None:  # prefill and decode pools (fleet/disagg.py)
            self.fleet = DisaggFleet(env, spec.disaggregated, self._done, ReplicaOptions(
                fast_forward, check_invariants, spec.step_log, horizon_s, max_step_rows),
                spec.block_size)
        else:
            self.fleet = Fleet(env, spec.router, make, spec.num_replicas, spec.admission,
                               spec.autoscale, lambda: self.num_done < self.num_total,
                               self.request_s)
        self.replicas = self.fleet.replicas  # grows as an autoscaler starts replicas
        # no front door: a request goes where the router says, read here (compiled) rather
        # than through Fleet.route, an interpreted call per request
        fleet = self.fleet if isinstance(self.fleet, Fleet) else None
        self._router: Router | None = fleet.router if fleet is not None \
            and fleet.door is None else None
        self._serving: list[Replica] = fleet.serving if fleet is not None else []
        self._scaling = self.fleet.scaler is not None
        if isinstance(self.fleet, Fleet) and self.fleet.scaler is not None:
            self._tick = self.fleet.scaler  # read by _next_event_s (replicas start later)
        self.records = RecordColumns()  # a request's record, written as it leaves
        self.num_events = 0
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
        elif max_concurrency is None:
            OpenLoopArrivals(self, seqs)
        else:
            env.process(self._open_loop(seqs))

    def _next_arrival(self) -> float:
        """When the next request reaches the router or, taken in by an API server, an
        engine (inf: none left)."""
        arrival = self.next_arrival_s + self._intake_s
        handing = self._handing
        return handing[0] if handing and handing[0] < arrival else arrival

    def _next_event_s(self) -> float:
        """The next arrival or autoscaler evaluation, whichever is first."""
        arrival, tick = self._next_arrival(), self._tick.next_s
        return arrival if arrival < tick else tick

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
        router = self._router
        replica = (self._serving[router.pick(self._serving, seq)] if router is not None
                   else self.fleet.route(seq))
        if replica is None:  # refused at the front door (seq.reason says why)
            self._done(seq)
            self._submitted()
            return
        if self._intake and isinstance(replica, Replica):
            now = float(self.env.now)  # (a numpy float where a closed loop's think time is)
            taken = replica.intake_until(now)
            if taken > now:  # the replica's API server takes it in first
                self.num_events += 1
                heapq.heappush(self._handing, taken)  # replicas' runs stop short of it
                ArrivalTimeout(self.env, taken - now).callbacks.append(
                    lambda _ev: self._submit(replica, seq))
                return
        replica.submit(seq)
        self._submitted()

    def _submit(self, replica: Replica, seq: Sequence) -> None:
        """``seq`` reaches ``replica``'s engine now, its API server done taking it in."""
        heapq.heappop(self._handing)  # the earliest: this one (timeouts fire in time order)
        seq.arrival_s = self.env.now
        replica.submit(seq)
        self._submitted()

    def _submitted(self) -> None:
        """One more request reached an engine (or was refused): after the last, none
        will come."""
        self._unsent -= 1
        if self._unsent == 0:
            for r in self.replicas:
                r.close_arrivals()

    def _open_loop(self, seqs: list[Sequence]) -> Generator[simpy.Event, Any, None]:
        """A capped open loop: each request is due at its arrival_s, and sent then or when
        a slot frees (an uncapped one: :class:`OpenLoopArrivals`)."""
        env = self.env
        pending = deque(seqs)
        seqs.clear()  # held only until sent: a request's memory lasts while it is served
        while pending:
            seq = pending.popleft()
            if seq.arrival_s > env.now:
                self.num_events += 1
                yield ArrivalTimeout(env, seq.arrival_s - env.now)
            self._due(seq)
        self.next_arrival_s = math.inf

    def _due(self, seq: Sequence) -> None:
        """A capped open loop's request is due now: sent if a slot is free, else queued."""
        if self._in_flight < int(self._cap or 0):
            self._in_flight += 1
            self._send(seq)
        else:
            self._waiting.append(seq)

    def _done(self, seq: Sequence) -> None:
        sent_s = self.records.leave(seq)
        if self.on_leave is not None:
            self.on_leave(seq, sent_s)
        self.num_done += 1
        if self._progress is not None and (
                self.num_done % self._every == 0 or self.num_done == self.num_total):
            self._progress(self.num_done, self.num_total)
        # its last token may reach the client after the engine is done with it (the API
        # server's token stream, simulator/token_stream.py): the client acts then
        late = seq.finish_s - self.env.now
        late = late if late > 0.0 else 0.0  # (NaN, for a refused request: none)
        if self._cap is not None:  # the slot passes to the longest-waiting request
            self._in_flight -= 1
            if self._waiting:  # sent through an event, as a closed-loop client's next
                self._in_flight += 1
                self._send_later(self._waiting.popleft(), late)
        queue = self._clients.get(seq.client_id)
        if queue:
            nxt, think = queue.popleft()
            self._send_later(nxt, think + late)
        if self._scaling:
            self.fleet.done(seq)
