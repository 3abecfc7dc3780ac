"""One serving replica as a SimPy process: schedule -> wait the step's cost -> complete.

The loop is the same three calls the real engine makes, with a cost model where the
engine runs a forward pass. Runs of identical pure-decode steps are fast-forwarded
(see :mod:`simulator.fastforward`); an arrival during such a run cuts it at the first
step boundary after the arrival, where a real engine would first see the request.

Several steps run per SimPy event when the next arrival is known ahead (open loop, one
replica or several): the replica's clock runs ahead of SimPy's between waits
(:mod:`simulator.replica_clock`), and chunked prefill's mixed steps that follow one the
policy decided run without a decision each (:class:`~simulator.replica_runs.ChunkRuns`).
"""

from __future__ import annotations

import math
from bisect import bisect_left
from collections.abc import Callable, Generator
from typing import Any

import numpy as np
import simpy

from simulator.accel import compiled_module
from simulator.costs.base import CostModel, decode_pricer
from simulator.costs.host import intake_request_s, stream_token_s
from simulator.fastforward import (
    DecodeRun,
    apply_decode_run,
    log_short_run,
    plan_decode_run,
    plan_short_run,
    steps_reaching,
)
from simulator.kvcache import BlockManager
from simulator.memory_guard import step_log_full
from simulator.policies import Batch, Policy, Sequence, ServerState, Wait, complete
from simulator.policies.chunk_runs import chunking_policy, prompt_goes_on
from simulator.policies.continuous import ContinuousPolicy, overlaps
from simulator.policies.invariants import check_batch, check_state
from simulator.policies.multistep import chunk_shapes, complete_chunk
from simulator.policies.step import decode_emitters
from simulator.replica_runs import ChunkRuns
from simulator.speculative_acceptance import AcceptanceSampler
from simulator.speculative_stats import SpecStats
from simulator.steplog import make_step_log
from simulator.token_stream import TokenStream

# Decode runs expected to end within this many steps are priced one by one, longer ones
# planned with numpy (the answers are the same). Compiled (simulator/accel.py), a step
# costs far less than numpy's per-call overhead, so runs up to 128 steps go one by one;
# as Python, 32 (docs/architecture.md, "The compiled core": instructions per request).
_SHORT_RUN = 128 if compiled_module(__file__) else 32


class Replica(ChunkRuns):
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
        step_log: str = "full",
        horizon_s: float | None = None,
        acceptance: AcceptanceSampler | None = None,
        own_arrivals_cut: bool = False,
        exact_reads: bool = False,
    ) -> None:
        self.env = env
        self.index = index
        self.policy = policy
        # the common policy, held typed: the compiled core calls it directly instead of
        # looking ``schedule`` up on a Protocol at every decision (docs/architecture.md)
        self._continuous = policy if isinstance(policy, ContinuousPolicy) else None
        self.cost = cost
        self.state = ServerState(kv=kv)
        self.log = make_step_log(index, step_log)  # [run] step_log: what is kept
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
        # One of several replicas told the fleet's next arrival: a decode run goes on past
        # it until a request reaches this replica (the others' arrivals cannot change it)
        self.own_arrivals_cut = own_arrivals_cut and next_arrival_s is not None
        # A router reads this replica's prefix cache at every arrival (prefix_affinity): no
        # decode run goes on past an arrival, so the cache then holds what stepping's does
        # (a run opens its later steps' blocks, evicting, only as it ends). Its steps ending
        # before the next arrival (or autoscaler evaluation) run at once; the one in
        # progress then (one ending at it has not ended: the arrival comes first, as when
        # stepping) runs alone, its blocks taken when it was scheduled. Arrivals not known
        # ahead: one step at a time.
        self.exact_reads = exact_reads
        if exact_reads and self.own_arrivals_cut:
            raise ValueError("exact_reads: decode runs stop at every arrival, "
                             "not only this replica's own (own_arrivals_cut)")
        self.horizon_s = math.inf if horizon_s is None else horizon_s  # the run stops there
        self._now = env.now  # the replica's clock: ahead of env.now after steps run inline
        self._price_decode = decode_pricer(cost)  # exact scalar decode pricing, if the model has it
        # chunked prefill's runs of mixed steps (replica_runs.ChunkRuns): the policy, when
        # it schedules them; not under a subclass that counts each step (fleet/tokens.py)
        own_steps = fast_forward and type(self)._step is Replica._step
        self._chunking = chunking_policy(policy) if own_steps else None
        # Speculative decoding: who says how many tokens each verified row emitted, and
        # the counts (None when the policy does not speculate)
        self.acceptance = acceptance
        self.spec_stats = SpecStats() if acceptance is not None else None
        # An overlap scheduler forms step N+1 while step N runs (policy.overlap_schedule:
        # SGLang's from 0.4, vLLM's async scheduling from 0.14). A request that reaches it
        # during a step misses the step already formed and starts in the one after (as
        # SGLang's event loop receives requests between launching a batch and processing
        # the previous one's results). It is held out of the policy's sight through one
        # decision: ``_held`` came since the last decision, ``_due`` was held at it and is
        # queued at the next; with nothing else to run both are queued at once, as by an
        # idle engine. Not while speculating (policies/continuous.py overlaps).
        self._overlap = overlaps(policy, acceptance is not None)
        self._held: list[Sequence] = []
        self._due: list[Sequence] = []
        # The API server in front, taking each request in and streaming every output token
        # ([cost] overhead intake_s, stream_s; simulator/token_stream.py): None when it
        # costs nothing
        token_s, intake_s = stream_token_s(cost), intake_request_s(cost)
        self.stream = TokenStream(token_s, intake_s) if token_s > 0 or intake_s > 0 else None
        self.process = env.process(self._loop())

    def intake_until(self, now_s: float) -> float:
        """A request reaches this replica's API server at ``now_s``: when the server has
        taken it in and it reaches the engine (``now_s`` without an intake cost)."""
        stream = self.stream
        return now_s if stream is None else stream.take(now_s)

    def submit(self, seq: Sequence) -> None:
        """A request arrives at this replica."""
        seq.replica = self.index
        if self._overlap:  # held: queued at once if nothing else runs (an idle engine)
            self._held.append(seq)
            self._wake()  # a decode run stops at the step in progress
            return
        self._queue(seq)

    def _queue(self, seq: Sequence) -> None:
        """``seq`` joins the policy's waiting queue (or is refused there)."""
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
            if self._cutting:  # a decode run of one of several replicas: cut, no interrupt
                self._cut_run()
            else:
                self.process.interrupt()

    def _loop(self) -> Generator[simpy.Event, Any, None]:
        state = self.state
        continuous = self._continuous
        while True:
            if self._held or self._due:
                self._release_held(everyone=False)
            if continuous is not None:
                decision = continuous.schedule(state, self._now)
            else:
                decision = self.policy.schedule(state, self._now)
            if state.rejected:
                self.num_refused += len(state.rejected)
                for seq in state.rejected:
                    self.on_done(seq)
                state.rejected.clear()
            if isinstance(decision, Wait):
                if self._held or self._due:  # nothing to run: an idle engine sees them now
                    self._release_held(everyone=True)
                    continue
                if self.check_invariants:
                    self._check()
                yield from self._wait(decision)
                continue
            if self.check_invariants:
                check_batch(self.policy, state, decision)
            if not self.fast_forward or self._due:  # held requests: one step, then see them
                k = 1
            elif continuous is not None:
                k = continuous.repeats(state, decision)
            else:
                k = self.policy.repeats(state, decision)
            if decision.num_steps > 1:
                finished = yield from self._chunk(decision)
            elif k > 1:
                finished = yield from self._decode_run(decision, k)
            elif (self._chunking is not None and not self._due and decision.cohort is not None
                  and prompt_goes_on(decision)):
                finished = yield from self._chunk_run(decision, self._chunking)
            else:
                finished = yield from self._step(decision)
            self.num_finished += len(finished)
            if self.check_invariants:
                self._check()
            for seq in finished:
                self.on_done(seq)

    def _release_held(self, everyone: bool) -> None:
        """At a decision: queue the requests held through the last one (``everyone``: all
        held), hold those that came since through this one, and queue them all when
        nothing else would run."""
        due, held = self._due, self._held
        self._held = []
        if everyone:
            due, held = due + held, []
        for seq in due:
            self._queue(seq)
        if held and not self.state.running and not self.state.waiting:
            for seq in held:
                self._queue(seq)
            held = []
        self._due = held

    def _check(self) -> None:
        check_state(self.state, accepted=self.num_accepted - self.num_refused,
                    finished=self.num_finished)

    def _step(self, batch: Batch) -> Generator[simpy.Event, Any, list[Sequence]]:
        start = self._now
        end = start + self.cost.step_time(batch.shape)
        if end >= self._inline_before():
            yield self._until(end)
        return self._completed(batch, start, end)

    def _completed(self, batch: Batch, start: float, end: float) -> list[Sequence]:
        """Apply ``batch``, run from ``start`` to ``end``, and log it; what finished."""
        self._now = end
        emitted = decode_emitters(batch)
        accepted = self._accepted(batch) if batch.spec_tokens else None
        if self.stream is None:
            finished = complete(self.state, batch, start, end, accepted)
        else:
            finished = self._streamed(batch, start, end, accepted, emitted)
        s = self.state
        self.log.add(start, end, batch.shape, emitted, len(s.running), len(s.waiting),
                     s.kv.used, finished)
        self._check_log_size()
        return finished

    def _streamed(self, batch: Batch, start: float, end: float, accepted: list[int] | None,
                  emitted: int) -> list[Sequence]:
        """:func:`complete`, then the step's tokens reach their clients through the API
        server (``self.stream``): the rows' tokens, then the prompts' first."""
        assert self.stream is not None
        finished = complete(self.state, batch, start, end, accepted)
        self.stream.step(end, batch.decode, sum(accepted) if accepted else emitted,
                         batch.prefill, finished)
        return finished

    def _accepted(self, batch: Batch) -> list[int]:
        """Tokens each row of a speculative step emitted, drawn (or replayed) and counted."""
        if self.acceptance is None or self.spec_stats is None:
            raise ValueError("a speculative step, but the replica has no acceptance model "
                             "(ClusterSpec.speculative)")
        accepted = self.acceptance.draw(batch.spec_drafts)
        self.spec_stats.add(batch.spec_drafts, accepted)
        return accepted

    def _chunk(self, batch: Batch) -> Generator[simpy.Event, Any, list[Sequence]]:
        """A multi-step decision: its passes back to back, one log row, tokens at the end.

        Arrivals during it only queue (nothing is admitted before the chunk is over)."""
        start = self._now
        end = start + float(self.cost.step_times(chunk_shapes(batch)).sum())
        if end >= self._inline_before():
            yield self._until(end)
        self._now = end
        stream = self.stream
        if stream is not None:  # a chunk's tokens all come at its end (it only decodes)
            tokens = sum(min(batch.num_steps, seq.remaining) for seq in batch.decode)
        finished = complete_chunk(self.state, batch, end)
        if stream is not None:
            stream.step(end, batch.decode, tokens, (), finished)
        s = self.state
        self.log.add(start, end, batch.shape, len(batch.decode), len(s.running),
                     len(s.waiting), s.kv.used, finished)
        self._check_log_size()
        return finished

    def _check_log_size(self) -> None:
        if self.max_step_rows is not None and len(self.log) > self.max_step_rows:
            raise step_log_full(len(self.log), self._now)

    def _steps_alone(self) -> bool:
        """Exact reads with no next arrival known (read now: a draining replica is told
        none): every decode step runs on its own."""
        return self.exact_reads and self.next_arrival_s is None

    def _decode_run(self, batch: Batch, k: int) -> Generator[simpy.Event, Any, list[Sequence]]:
        state = self.state
        price = self._price_decode
        if self.own_arrivals_cut:
            return (yield from self._run_to_own_arrival(batch, k, _SHORT_RUN))
        if self._steps_alone():
            return (yield from self._step(batch))
        start = self._now
        planned, stop_s = k, math.inf
        if price is not None and state.group is None and self.next_arrival_s is not None:
            stop_s = self.next_arrival_s()
            first_s = price(batch.shape.num_decode_seqs, batch.shape.decode_context_tokens, 0)
            if k <= _SHORT_RUN or start + _SHORT_RUN * first_s >= stop_s:
                return (yield from self._short_run(batch, k, stop_s, first_s))
            planned = steps_reaching(k, start, stop_s, first_s)
        run, ends = self._plan_run(batch, planned)
        while planned < k and ends[-1] < stop_s:  # the estimate fell short: plan further
            planned = min(k, 2 * planned)
            run, ends = self._plan_run(batch, planned)
        self._arrived_in_run = 0
        if self.exact_reads and self.next_arrival_s is not None:  # those ending before it
            ends = ends[:max(1, int(np.searchsorted(ends, self.next_arrival_s())))]
        if self.next_arrival_s is not None:
            k, ends = yield from self._run_until_arrival(ends)
        else:
            self.num_events += 1
            k, ends = yield from self._run_interruptible(ends)
        return self._finish_run(batch, run, start, ends[:k],
                                len(state.waiting) - self._arrived_in_run)

    def _plan_run(self, batch: Batch, k: int) -> tuple[DecodeRun, np.ndarray]:
        """The first ``k`` steps of the decode run starting with ``batch``, and their ends
        (the replica's clock plus the step times, summed in order)."""
        run = plan_decode_run(self.state, batch, k)
        step_s = self.cost.step_times(run.shapes)
        return run, np.add.accumulate(np.concatenate(([self._now], step_s)))[1:]

    def _short_run(self, batch: Batch, k: int, stop_s: float, first_s: float
                   ) -> Generator[simpy.Event, Any, list[Sequence]]:
        """A decode run priced step by step in plain Python, up to the step in progress at
        ``stop_s`` (the next arrival): what :meth:`_decode_run` gives, without numpy's
        per-call overhead, which dominates a run of a few steps."""
        assert self._price_decode is not None
        state = self.state
        run = plan_short_run(state, batch, k, self._now, stop_s, self._price_decode, first_s)
        if self.exact_reads:  # the steps ending before the next arrival, or the first
            del run.ends[max(1, bisect_left(run.ends, stop_s)):]
        # blocks steps 2..k open: read by apply_decode_run for a clock batch only
        opened = run.opened() if batch.cohort is not None else None
        end = run.ends[-1]
        if end >= self._inline_limit(stop_s):  # stop_s: the next arrival, read just now
            yield self._until(end)
        self._now = end
        finished = apply_decode_run(state, batch, run.ends, opened)
        if self.stream is not None:
            self.stream.run(run.ends, len(batch.decode), batch.decode, finished)
        log_short_run(self.log, run, batch, state, finished)
        self._check_log_size()
        return finished

