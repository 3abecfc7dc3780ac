"""One serving replica as a SimPy process: schedule -> wait the step's cost -> complete.

The loop is the same three calls the real engine makes, with a cost model where the
engine runs a forward pass. Runs of identical pure-decode steps are fast-forwarded
(see :mod:`simulator.fastforward`); an arrival during such a run cuts it at the first
step boundary after the arrival, where a real engine would first see the request.
"""

from __future__ import annotations

from collections.abc import Callable, Generator
from typing import Any

import numpy as np
import simpy

from simulator.costs.base import CostModel
from simulator.fastforward import apply_decode_run, plan_decode_run
from simulator.kvcache import BlockManager
from simulator.memory_guard import step_log_full
from simulator.policies import Batch, Policy, Sequence, ServerState, Wait, complete
from simulator.policies.invariants import check_batch, check_state
from simulator.policies.multistep import chunk_shapes, complete_chunk
from simulator.policies.step import decode_emitters
from simulator.steplog import StepLog


class Replica:
    """A replica: a policy, a cost model, a KV cache, and the process that runs steps."""

    def __init__(
        self,
        env: simpy.Environment,
        index: int,
        policy: Policy,
        cost: CostModel,
        kv: BlockManager,
        on_done: Callable[[Sequence], None],
        *,
        fast_forward: bool = True,
        check_invariants: bool = False,
        next_arrival_s: Callable[[], float] | None = None,
        max_step_rows: int | None = None,
    ) -> None:
        self.env = env
        self.index = index
        self.policy = policy
        self.cost = cost
        self.state = ServerState(kv=kv)
        self.log = StepLog(index)
        self.on_done = on_done  # called once per request that finishes or is rejected here
        self.fast_forward = fast_forward
        self.check_invariants = check_invariants  # check_batch/check_state at every step
        self.max_step_rows = max_step_rows  # a longer step log stops the run (memory)
        self.num_accepted = 0  # requests queued here (not refused on arrival)
        self.num_refused = 0  # of those, refused later by the policy
        self.num_finished = 0
        self.num_events = 0  # SimPy events this replica waited on
        self._interruptible = False  # in an idle wait or a fast-forward the next arrival cuts
        self._arrived_in_run = 0
        # When the next request to reach this replica is known ahead (open loop, one
        # replica), a fast-forward stops at it instead of being interrupted by it.
        self.next_arrival_s = next_arrival_s
        self.process = env.process(self._loop())

    def submit(self, seq: Sequence) -> None:
        """A request arrives at this replica."""
        seq.replica = self.index
        if not self.state.arrive(seq):
            self.on_done(seq)
            return
        self.num_accepted += 1
        self._arrived_in_run += 1
        self._wake()

    def close_arrivals(self) -> None:
        """No more requests will come (a static batch may now run short)."""
        self.state.arrivals_done = True
        self._wake()

    def _wake(self) -> None:
        if self._interruptible:
            self._interruptible = False
            self.process.interrupt()

    def _loop(self) -> Generator[simpy.Event, Any, None]:
        env, state = self.env, self.state
        while True:
            decision = self.policy.schedule(state, env.now)
            self.num_refused += len(state.rejected)
            for seq in state.rejected:
                self.on_done(seq)
            state.rejected.clear()
            if isinstance(decision, Wait):
                if self.check_invariants:
                    self._check()
                yield from self._wait(decision)
                continue
            if self.check_invariants:
                check_batch(self.policy, state, decision)
            k = self.policy.repeats(state, decision) if self.fast_forward else 1
            if decision.num_steps > 1:
                finished = yield from self._chunk(decision)
            elif k > 1:
                finished = yield from self._decode_run(decision, k)
            else:
                finished = yield from self._step(decision)
            self.num_finished += len(finished)
            if self.check_invariants:
                self._check()
            for seq in finished:
                self.on_done(seq)

    def _check(self) -> None:
        check_state(self.state, accepted=self.num_accepted - self.num_refused,
                    finished=self.num_finished)

    def _wait(self, wait: Wait) -> Generator[simpy.Event, Any, None]:
        self._interruptible = True
        self.num_events += 1
        try:
            if wait.until is None:
                yield self.env.event()
            else:
                yield self.env.timeout(max(0.0, wait.until - self.env.now))
        except simpy.Interrupt:
            pass
        self._interruptible = False

    def _step(self, batch: Batch) -> Generator[simpy.Event, Any, list[Sequence]]:
        start = self.env.now
        emitted = decode_emitters(batch)
        self.num_events += 1
        yield self.env.timeout(self.cost.step_time(batch.shape))
        finished = complete(self.state, batch, start, self.env.now)
        s = self.state
        self.log.add(start, self.env.now, batch.shape, emitted, len(s.running), len(s.waiting),
                     s.kv.used)
        self._check_log_size()
        return finished

    def _chunk(self, batch: Batch) -> Generator[simpy.Event, Any, list[Sequence]]:
        """A multi-step decision: its passes back to back, one log row, tokens at the end.

        Arrivals during it only queue (nothing is admitted before the chunk is over)."""
        start = self.env.now
        self.num_events += 1
        yield self.env.timeout(float(self.cost.step_times(chunk_shapes(batch)).sum()))
        finished = complete_chunk(self.state, batch, self.env.now)
        s = self.state
        self.log.add(start, self.env.now, batch.shape, len(batch.decode), len(s.running),
                     len(s.waiting), s.kv.used)
        self._check_log_size()
        return finished

    def _check_log_size(self) -> None:
        if self.max_step_rows is not None and len(self.log) > self.max_step_rows:
            raise step_log_full(len(self.log), self.env.now)

    def _decode_run(self, batch: Batch, k: int) -> Generator[simpy.Event, Any, list[Sequence]]:
        env, state = self.env, self.state
        run = plan_decode_run(state, batch, k)
        start = env.now
        ends = np.add.accumulate(np.concatenate(([start], self.cost.step_times(run.shapes))))[1:]
        self._arrived_in_run = 0
        self.num_events += 1
        if self.next_arrival_s is not None:
            k, ends = yield from self._run_until_arrival(ends)
        else:
            k, ends = yield from self._run_interruptible(ends)
        finished = apply_decode_run(state, batch, ends)
        queue = np.full(k, len(state.waiting) - self._arrived_in_run)
        queue[-1] = len(state.waiting)
        running, kv_used = run.running_after[:k], run.kv_after[:k]  # the plan is done with
        running[-1], kv_used[-1] = len(state.running), state.kv.used
        starts = np.concatenate(([start], ends[:-1]))
        shapes = run.shapes if k == len(run.shapes) else run.shapes.head(k)
        self.log.extend(starts, ends, shapes, run.emitted[:k], running, queue, kv_used)
        self._check_log_size()
        return finished

    def _run_interruptible(
        self, ends: np.ndarray
    ) -> Generator[simpy.Event, Any, tuple[int, np.ndarray]]:
        """Run steps ending at ``ends``; an arrival cuts them at the step in progress."""
        env = self.env
        self._interruptible = True
        try:
            yield env.timeout(ends[-1] - env.now)
        except simpy.Interrupt:  # a request arrived: finish the step in progress, then stop
            j = min(int(np.searchsorted(ends, env.now)), len(ends) - 1)
            self.num_events += 1
            yield env.timeout(max(0.0, ends[j] - env.now))
            ends = ends[:j + 1]
        self._interruptible = False
        return len(ends), ends

    def _run_until_arrival(
        self, ends: np.ndarray
    ) -> Generator[simpy.Event, Any, tuple[int, np.ndarray]]:
        """Run steps ending at ``ends`` up to the one in progress when the next request arrives.

        The same cut as :meth:`_run_interruptible` without an interrupt. Arrivals run at
        URGENT priority, so one at exactly the cut is already queued when this wakes.
        """
        env = self.env
        assert self.next_arrival_s is not None
        j = int(np.searchsorted(ends, self.next_arrival_s()))
        if j < len(ends) - 1:
            ends = ends[:j + 1]
        yield env.timeout(ends[-1] - env.now)
        return len(ends), ends
