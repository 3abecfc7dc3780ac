"""A replica that counts the tokens its requests still need (``least_outstanding_tokens``).

The count is what a front door relaying the streams can know: a request adds ``prompt +
output`` when it reaches the replica; its first token takes ``prompt + 1`` off, each later
token 1, and a request that leaves without its tokens (refused) takes the rest off. The
count changes when a step ends, as the tokens reach the client, and costs O(1) per step
(O(batch) per fast-forwarded decode run), never a walk over the replica's requests.

A fast-forwarded decode run (simulator/fastforward.py) applies its steps at once when it
ends; :meth:`TokenReplica.tokens_now` subtracts the tokens of the run's steps that ended
before now, so a router sees the same count with or without fast-forward, and with a run
that goes on past arrivals routed elsewhere (one of several replicas told the next
arrival: simulator/replica_runs.py), read at any arrival or autoscaler evaluation. With
``track_kv`` (an autoscaler on KV usage) :meth:`TokenReplica.kv_used_now` likewise counts
the blocks a run on the decode clock has opened so far. With ``step_uneven_runs`` (an
autoscaler on KV usage or TTFT) a decode run that is not on the clock (a padded batch,
whose rows finish at different steps, or rows opening blocks off the clock) runs step by
step instead, as fast-forward off does: what such a run opened or finished before an
evaluation is then applied by it.
"""

from __future__ import annotations

from collections.abc import Callable, Generator
from itertools import accumulate, cycle, islice
from typing import Any

import numpy as np
import simpy

from simulator.costs.base import CostModel
from simulator.kvcache import BlockManager
from simulator.policies import Batch, Policy, Sequence
from simulator.replica import Replica
from simulator.speculative_acceptance import AcceptanceSampler


def streamed(seq: Sequence) -> int:
    """Tokens of ``seq`` already off its replica's count: ``prompt + generated`` once its
    first token is out, else 0."""
    n = seq.num_generated
    return seq.prompt_tokens + n if n else 0


class TokenReplica(Replica):
    """A :class:`~simulator.replica.Replica` keeping ``tokens_left`` (see the module docstring)."""

    def __init__(self, env: simpy.Environment, index: int, policy: Policy, cost: CostModel,
                 kv: BlockManager, on_done: Callable[[Sequence], None], *,
                 track_kv: bool = False, step_uneven_runs: bool = False,
                 fast_forward: bool = True, check_invariants: bool = False,
                 next_arrival_s: Callable[[], float] | None = None,
                 max_step_rows: int | None = None, step_log: str = "full",
                 horizon_s: float | None = None, acceptance: AcceptanceSampler | None = None,
                 own_arrivals_cut: bool = False, exact_reads: bool = False) -> None:
        # Replica's keywords by name, not **kwargs: mypyc (simulator/accel.py) mis-passes
        # **kwargs forwarded to a compiled __init__ with keyword-only parameters
        self.track_kv = track_kv  # keep each decode run's KV blocks per step
        self.step_uneven_runs = step_uneven_runs  # decode runs off the clock: step by step
        self.tokens_left = 0  # prompt + output tokens not yet emitted, as of the last step end
        self._run_ends: np.ndarray | list[float] | None = None  # ends of the decode run in flight
        self._run_seen: list[float] | None = None  # the same, as a list, once read
        self._run_done = 0  # steps of the run known to have ended (they only grow)
        self._run_rows = 0  # rows of the run (0: no run in flight)
        self._run_left: list[int] | None = None  # rows' tokens left, when some may end early
        self._run_min = 0  # the fewest of those: up to that many steps, every row emits
        self._run_kv: list[int] | None = None  # KV blocks used during each step of the run
        self._forward = on_done
        super().__init__(env, index, policy, cost, kv, self._leave, fast_forward=fast_forward,
                         check_invariants=check_invariants, next_arrival_s=next_arrival_s,
                         max_step_rows=max_step_rows, step_log=step_log, horizon_s=horizon_s,
                         acceptance=acceptance, own_arrivals_cut=own_arrivals_cut,
                         exact_reads=exact_reads)

    def _steps_done(self) -> int:
        """Steps of the decode run in flight that ended before now (a step ending now has
        not: an arrival at that instant is handled first, as when stepping)."""
        seen = self._run_seen
        if seen is None:
            ends = self._run_ends
            assert ends is not None
            seen = self._run_seen = ends if isinstance(ends, list) else ends.tolist()
        steps, now = self._run_done, self.env.now
        while steps < len(seen) and seen[steps] < now:
            steps += 1
        self._run_done = steps
        return steps

    def kv_used_now(self) -> int:
        """KV blocks in use now, counting those a decode run in flight has opened so far
        (what stepping would show: each step's blocks are taken when it is scheduled)."""
        kv = self._run_kv
        if self._run_ends is None or kv is None:
            return self.state.kv.used
        return kv[min(self._steps_done(), len(kv) - 1)]

    def tokens_now(self) -> int:
        """``tokens_left`` less the tokens of a decode run's steps that ended before now."""
        if self._run_ends is None or not self._run_rows:
            return self.tokens_left
        steps = self._steps_done()
        if steps <= self._run_min or self._run_left is None:  # every row emitted each step
            return self.tokens_left - steps * self._run_rows
        return self.tokens_left - sum(min(left, steps) for left in self._run_left)

    def submit(self, seq: Sequence) -> None:
        self.tokens_left += seq.prompt_tokens + seq.output_tokens
        super().submit(seq)

    def _leave(self, seq: Sequence) -> None:
        """A request leaves (finished: nothing left to take off; refused: all of it)."""
        self.tokens_left -= seq.prompt_tokens + seq.output_tokens - streamed(seq)
        self._forward(seq)

    def _step(self, batch: Batch) -> Generator[simpy.Event, Any, list[Sequence]]:
        out = len(batch.decode)  # every decode row emits one token
        for seq, n in batch.prefill:
            if seq.num_computed + n == seq.num_tokens:  # emits a token this step
                out += 1 if seq.num_generated else seq.prompt_tokens + 1
        finished = yield from super()._step(batch)
        self.tokens_left -= out
        return finished

    def _chunk(self, batch: Batch) -> Generator[simpy.Event, Any, list[Sequence]]:
        out = sum(min(batch.num_steps, s.remaining) for s in batch.decode)
        finished = yield from super()._chunk(batch)
        self.tokens_left -= out  # a chunk's tokens reach the client at its end
        return finished

    def _decode_run(self, batch: Batch, k: int) -> Generator[simpy.Event, Any, list[Sequence]]:
        state = self.state
        cohort = batch.cohort if state.group is None else None
        if (cohort is None and self.step_uneven_runs) or self._steps_alone():
            return (yield from self._step(batch))  # counted once, by _step
        self._run_rows = len(batch.decode)
        if cohort is not None:
            # every running request decodes on the clock and the run ends at the first
            # finish: each row emits one token per step, O(1) to count
            self._run_min = cohort.min_remaining
            # as simulator/fastforward.py plans it: the first step's blocks are taken
            if self.track_kv:
                self._run_kv = list(accumulate(islice(cycle(cohort.block_openings), k - 1),
                                               initial=state.kv.used))
            rows, steps = self._run_rows, state.clock.steps
            try:
                finished = yield from super()._decode_run(batch, k)
            finally:
                self._end_run()
            self.tokens_left -= (state.clock.steps - steps) * rows
            return finished
        seqs = list(batch.decode)  # a padded group's rows end at different steps
        before = sum(s.num_generated for s in seqs)
        self._run_left = [s.remaining for s in seqs]
        self._run_min = min(self._run_left, default=0)
        try:
            finished = yield from super()._decode_run(batch, k)
        finally:
            self._end_run()
        self.tokens_left -= sum(s.num_generated for s in seqs) - before
        return finished

    def _end_run(self) -> None:
        self._run_ends = self._run_seen = self._run_left = self._run_kv = None
        self._run_rows = self._run_done = 0

    def _run_interruptible(
        self, ends: np.ndarray
    ) -> Generator[simpy.Event, Any, tuple[int, np.ndarray]]:
        self._run_ends = ends
        return (yield from super()._run_interruptible(ends))

    def _steps_cut_by_arrival(self, ends: list[float]) -> Generator[simpy.Event, Any, int]:
        self._run_ends = ends  # a run that waits on SimPy is read lazily while it lasts
        return (yield from super()._steps_cut_by_arrival(ends))
