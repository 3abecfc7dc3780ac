"""Decode runs of one of several replicas: cut by a request reaching this replica only.

With several replicas in an open loop, the fleet's next arrival (or, with an
autoscaler, its next evaluation, whichever is first) is known ahead (simulator/driver.py),
and a replica's steps that end before it run at once on its own clock
(:mod:`simulator.replica_clock`). A decode run need not stop there, though: an arrival
routed elsewhere changes nothing here, and what a router, the front door or an autoscaler
reads of this replica (requests waiting and running) does not change inside a run
(nobody finishes before its last step, nobody is admitted); a token count or KV reading
counts the run's steps that ended so far (simulator/fleet/tokens.py). So the run waits on
one SimPy event for its last step and an arrival here cuts it at the step in progress, as
:meth:`~simulator.replica_clock.ReplicaClock._run_interruptible` does, with every time
exact (``_until``). tests/test_speed_paths_replica.py and tests/test_speed_paths_fleet.py
check the records, step logs and fleet timelines against replicas told nothing ahead.
Not behind a router that reads the replicas' prefix caches, which a run changes as it
ends: there no run goes on past an arrival (``Replica.exact_reads``).
"""

from __future__ import annotations

import math
from bisect import bisect_left
from collections.abc import Callable, Generator
from typing import Any

import numpy as np
import simpy

from simulator.costs.base import CostModel
from simulator.fastforward import (
    DecodeRun,
    apply_decode_run,
    log_short_run,
    plan_decode_run,
    plan_short_run,
)
from simulator.policies import Batch, ContinuousPolicy, Sequence, ServerState
from simulator.policies.chunk_runs import ChunkRun, chunk_run
from simulator.policies.state import DecodeCohort
from simulator.replica_clock import ReplicaClock
from simulator.shapes import filled
from simulator.steplog import AnyStepLog
from simulator.token_stream import TokenStream


class OwnArrivalRuns(ReplicaClock):
    """Decode runs that only this replica's own arrivals cut (a mixin of Replica)."""

    state: ServerState
    cost: CostModel
    log: AnyStepLog
    _price_decode: Callable[[int, int, int], float] | None
    stream: TokenStream | None  # the API server's token stream, if it is priced
    _cutting = False  # waiting on a decode run that a request reaching here cuts (_cut_run)
    _run_wait: simpy.Timeout  # that wait, while it lasts
    _cut_ends: list[float]  # the run's step ends
    _ran = 0  # steps of that run that will have run when the wait ends

    def _check_log_size(self) -> None:  # Replica's: stops a run whose step log grew too long
        raise NotImplementedError

    def clock_s(self) -> float:
        """The replica's own clock: ahead of SimPy's while it runs steps ahead, else at or
        behind it (the start of the step or run it waits on)."""
        return self._now

    def _run_to_own_arrival(self, batch: Batch, k: int, short_run: int
                            ) -> Generator[simpy.Event, Any, list[Sequence]]:
        """One of several replicas: a decode run of ``k`` steps that only a request reaching
        this replica cuts (at the step in progress), as :meth:`_run_interruptible` does,
        with steps priced one by one when the run has at most ``short_run`` steps
        and every time exact."""
        state = self.state
        if self._price_decode is not None and state.group is None and k <= short_run:
            run = plan_short_run(state, batch, k, self._now, math.inf, self._price_decode)
            n = yield from self._steps_cut_by_arrival(run.ends)
            del run.ends[n:]
            finished = apply_decode_run(state, batch, run.ends)
            if self.stream is not None:
                self.stream.run(run.ends, len(batch.decode), batch.decode, finished)
            log_short_run(self.log, run, batch, state, finished)
            self._check_log_size()
            return finished
        plan = plan_decode_run(state, batch, k)
        start = self._now
        ends = np.add.accumulate(np.concatenate(([start], self.cost.step_times(plan.shapes))))[1:]
        queue_len = len(state.waiting)
        k = yield from self._steps_cut_by_arrival(ends.tolist())
        ends = ends[:k]
        return self._finish_run(batch, plan, start, ends, queue_len)

    def _finish_run(self, batch: Batch, run: DecodeRun, start: float, ends: np.ndarray,
                    queue_len: int) -> list[Sequence]:
        """Apply the first ``len(ends)`` steps of the planned decode ``run`` (started at
        ``start``) and log them; ``queue_len``: the queue their rows show, but the last."""
        state = self.state
        k = len(ends)
        finished = apply_decode_run(state, batch, ends)
        if self.stream is not None:
            self.stream.run(ends, run.emitted[:k], batch.decode, finished)
        queue = filled(k, queue_len)
        queue[-1] = len(state.waiting)
        running, kv_used = run.running_after[:k], run.kv_after[:k]  # the plan is done with
        running[-1], kv_used[-1] = len(state.running), state.kv.used
        starts = np.concatenate(([start], ends[:-1]))
        shapes = run.shapes if k == len(run.shapes) else run.shapes.head(k)
        self.log.extend(starts, ends, shapes, run.emitted[:k], running, queue, kv_used, finished)
        self._check_log_size()
        return finished

    def _steps_cut_by_arrival(self, ends: list[float]) -> Generator[simpy.Event, Any, int]:
        """Run steps ending at ``ends`` up to the one in progress when a request reaches this
        replica (:meth:`_run_interruptible`'s cut, with exact times); how many ran.

        Steps ending before the fleet's next arrival need no SimPy event. Otherwise the run
        waits on one event for its last step; a request reaching this replica meanwhile
        moves that wait to the end of the step in progress (:meth:`_cut_run`, called by
        ``Replica._wake``) rather than interrupting the process."""
        n = len(ends)
        if ends[-1] < self._inline_before():
            self._now = ends[-1]
            return n
        self._interruptible = self._cutting = True
        self._run_wait, self._cut_ends, self._ran = self._until(ends[-1]), ends, n
        yield self._run_wait
        self._interruptible = self._cutting = False
        n = self._ran
        self._now = ends[n - 1]
        return n

    def _cut_run(self) -> None:
        """A request reached this replica during a run's wait: the run ends with the step
        in progress (one ending now has not ended: the arrival is handled first, as when
        stepping), so the process waits for that step's end instead of the run's last.

        What an interrupt did, without its event: the process's callback moves from the
        run's wait to a wait ending at the cut (none when the cut is the last step)."""
        self._cutting = False
        ends = self._cut_ends
        n = min(bisect_left(ends, self.env.now), len(ends) - 1) + 1
        self._ran = n
        if n < len(ends):
            wait = self._run_wait
            cut = self._until(ends[n - 1])
            cut.callbacks, wait.callbacks = wait.callbacks, []


class ChunkRuns(OwnArrivalRuns):
    """Chunked prefill's runs of mixed steps on the replica's own clock (a base of Replica;
    the bases form one line, not a diamond, so mypyc can compile them: simulator/accel.py).

    After a mixed step the policy decided (one prompt's chunk beside the decode clock's
    members), :func:`~simulator.policies.chunk_runs.chunk_run` lists the steps the policy
    would decide next if nothing arrives. Those ending before the next arrival (and the
    horizon) run here one after another without a ``schedule()`` each, exactly as
    ``Replica._step`` would run them: each priced once, in order (``cost.step_time`` of
    the same shape, so a model drawing a random factor per call draws the same), its KV
    taken when it would be scheduled, logged with the counts ``complete`` leaves. The
    run's last step, or the first that ends at or after the next arrival, is an ordinary
    step (``complete``: the prompt's first token, members finishing, the wait). Only with
    the next arrival known ahead (else every step ends "after" it) and fast-forward on.
    """

    def _completed(self, batch: Batch, start: float, end: float) -> list[Sequence]:
        raise NotImplementedError  # Replica's: apply and log a step that ran

    def _chunk_run(self, batch: Batch, policy: ContinuousPolicy
                   ) -> Generator[simpy.Event, Any, list[Sequence]]:
        """Run ``batch`` (a mixed step the policy decided) and the steps that follow it
        unchanged (:func:`chunk_run`) up to the next arrival; what finished."""
        stop = self._inline_before()
        start = self._now
        end = start + self.cost.step_time(batch.shape)
        if end < stop:
            run = chunk_run(policy, self.state, batch)
            if run is not None:
                batch, start, end = self._chunk_steps(batch, run, start, end, stop)
        if end >= stop:
            yield self._until(end)
        return self._completed(batch, start, end)

    def _chunk_steps(self, batch: Batch, run: ChunkRun, start: float, end: float,
                     stop: float) -> tuple[Batch, float, float]:
        """Run ``batch`` (from ``start`` to ``end``, before ``stop``) and the steps of
        ``run`` that follow it while each ends before ``stop``, all but the last; (the
        last: its batch, start and end). Not a generator, so compiled its locals are C's."""
        state, log, stream = self.state, self.log, self.stream
        step_time = self.cost.step_time
        clock, kv, running, waiting = state.clock, state.kv, state.running, state.waiting
        seq, n = batch.prefill[0]
        shape, members, ran = batch.shape, len(batch.decode), 0
        while True:
            shape_next = run.next_shape()
            if shape_next is None:
                break
            # the step of ``n`` ran and is not the run's last
            if not ran and math.isnan(seq.scheduled_s):
                seq.scheduled_s = start
            ran += 1
            seq.computed_base += n  # complete(): no first token, nobody finishes
            clock.tick()
            if stream is not None:
                stream.idle(end, members)
            log.add(start, end, shape, members, len(running), len(waiting), kv.used)
            self._check_log_size()
            n, shape = shape_next.num_prefill_tokens, shape_next  # schedule the next,
            kv.take(clock.openings_now())  # as clock_and_chunks does
            kv.allocate(seq.request_id, seq.computed_base + n)
            start, end = end, end + step_time(shape)
            if end >= stop:
                break
        if ran:
            min_left, at_min = clock.soonest_finish()  # (no star call: compiled, that is
            cohort = DecodeCohort(min_left, at_min, clock.openings_after())  # a generic one)
            batch = Batch([(seq, n)], batch.decode, shape, cohort=cohort)
        return batch, start, end
