"""Continuous (iteration-level) batching, as in Orca and vLLM, with optional chunked prefill.

Without chunked prefill (vLLM v0's default): when a waiting request can be admitted, the
step is a prefill-only step of as many whole prompts as fit; otherwise every running
request decodes one token. With chunked prefill (Sarathi, vLLM v1): decodes go first,
then running prefills continue and waiting requests are admitted in chunks that fill the
token budget, so prefills ride along with decodes instead of stalling them.

When a running request needs a KV block and none is free, the newest running request is
preempted by recompute: its blocks are freed and it returns to the head of the queue.

Between steps a running request holds exactly ``blocks_for(num_computed)`` KV blocks
(admission and growth allocate to the tokens computed). The common step, where every
running request decodes one token, uses that and the replica's decode clock
(:mod:`simulator.policies.lazy`) to cost O(1), not a walk over the running requests.
The general per-request loop first writes the clock's members back (``flush``).
"""

from __future__ import annotations

from dataclasses import dataclass

from simulator.errors import ConfigError
from simulator.kvcache import decode_steps_fitting
from simulator.policies.state import (
    REFUSED_BUDGET,
    Batch,
    DecodeCohort,
    Sequence,
    ServerState,
    Wait,
)
from simulator.policies.step import decode_cohort, unpadded_shape
from simulator.scenario_fields import spec
from simulator.shapes import StepShape


@dataclass(slots=True, frozen=True)
class ContinuousPolicy:
    """Admit and retire requests at every step, within sequence, token and KV limits."""

    max_num_seqs: int = spec(256, unit="requests", low=1)  # running requests at most
    # tokens computed per step at most
    max_num_batched_tokens: int = spec(8192, unit="tokens", low=1)
    chunked_prefill: bool = spec(False)

    def __post_init__(self) -> None:
        if self.max_num_seqs < 1:
            raise ConfigError(f"policy.max_num_seqs = {self.max_num_seqs}: must be >= 1")
        if self.max_num_batched_tokens < 1:
            raise ConfigError(
                f"policy.max_num_batched_tokens = {self.max_num_batched_tokens}: must be >= 1"
            )

    def schedule(self, state: ServerState, now: float) -> Batch | Wait:
        """The next step's batch, or Wait() when there is nothing to do."""
        if not state.waiting and not state.running:
            return Wait()
        batch: Batch | None = None
        if not self.chunked_prefill and state.waiting:
            batch = self._admit(state, self.max_num_batched_tokens, [], [])
        if batch is None or not batch.prefill:
            batch = self._mixed_step(state)  # chunked, or nothing admissible: decode what runs
        if batch.prefill or batch.decode:
            return batch
        return Wait()  # everything waiting was rejected or preempted

    def _mixed_step(self, state: ServerState) -> Batch:
        """Running requests first (decode or next prefill chunk), then admissions."""
        budget = self.max_num_batched_tokens
        batch = self._decode_all(state)
        if batch is not None:
            if self.chunked_prefill and state.waiting:
                return self._admit(state, budget - len(batch.decode), [], batch.decode, batch)
            return batch
        state.clock.flush(state.running, state.kv)
        prefill: list[tuple[Sequence, int]] = []
        decode: list[Sequence] = []
        preempted: list[Sequence] = []
        i = 0
        while i < len(state.running) and budget > 0:
            seq = state.running[i]
            n = min(seq.pending, budget)
            while not state.kv.can_allocate(seq.request_id, seq.num_computed + n):
                victim = state.running[-1]
                state.preempt(victim)
                preempted.append(victim)
                if victim is seq:
                    break
            else:
                state.kv.allocate(seq.request_id, seq.num_computed + n)
                (decode.append(seq) if seq.decoding else prefill.append((seq, n)))
                budget -= n
                i += 1
                continue
            break  # the sequence itself was preempted
        if preempted or not self.chunked_prefill:
            return Batch(prefill, decode, unpadded_shape(prefill, decode, 0), preempted)
        return self._admit(state, budget, prefill, decode)

    def _decode_all(self, state: ServerState) -> Batch | None:
        """The batch where every running request decodes one token, or None if that is not it.

        It is when every running request is on the decode clock (none is prefilling),
        the token budget covers them, and the free blocks cover those whose next token
        opens a block. The loop in :meth:`_mixed_step` would then allocate for all of
        them in order and preempt nobody, so this is the same batch, found in O(1).
        """
        running = state.running
        clock = state.clock
        if not running or clock.size != len(running) or len(running) > self.max_num_batched_tokens:
            return None
        opening_now = clock.openings_now()
        if opening_now > state.kv.num_free:
            return None
        state.kv.take(opening_now)
        min_left, at_min = clock.soonest_finish()
        shape = StepShape(num_decode_seqs=len(running),
                          decode_context_tokens=clock.context_tokens(),
                          num_finished=at_min if min_left == 1 else 0)
        cohort = DecodeCohort(min_left, at_min, clock.openings_after())
        return Batch([], list(running), shape, cohort=cohort)

    def _admit(
        self,
        state: ServerState,
        budget: int,
        prefill: list[tuple[Sequence, int]],
        decode: list[Sequence],
        decode_all: Batch | None = None,
    ) -> Batch:
        """Admit waiting requests FCFS while sequences, tokens and KV allow.

        ``decode_all``: the all-decode batch whose ``decode`` this is, when it is one.
        """
        admitted = 0
        kv = state.kv
        while state.waiting and budget > 0 and len(state.running) < self.max_num_seqs:
            seq = state.waiting[0]
            if not self.chunked_prefill and self._too_long(seq):
                state.waiting.popleft()
                state.reject(seq, f"{REFUSED_BUDGET}: prompt + output = "
                             f"{seq.prompt_tokens + seq.output_tokens} "
                             f"tokens > max_num_batched_tokens = {self.max_num_batched_tokens}: "
                             "without chunked prefill a preempted request is recomputed in one "
                             "step (vLLM v0 likewise needs the budget >= max_model_len)")
                continue
            n = seq.pending if not self.chunked_prefill else min(seq.pending, budget)
            if n > budget:
                break
            if not kv.can_allocate(seq.request_id, n):
                break
            state.waiting.popleft()
            kv.allocate(seq.request_id, n)
            state.running.append(seq)
            prefill.append((seq, n))
            budget -= n
            if seq.preemptions == 0 and seq.num_generated == 0:
                admitted += 1
        if decode_all is None:
            return Batch(prefill, decode, unpadded_shape(prefill, decode, admitted))
        if not prefill:
            return decode_all  # nothing admitted
        shape = unpadded_shape(prefill, decode, admitted, decode_all.shape)
        return Batch(prefill, decode, shape, cohort=decode_all.cohort)

    def _too_long(self, seq: Sequence) -> bool:
        """Whether ``seq`` (never started) could need more than one step's budget to recompute."""
        total = seq.prompt_tokens + seq.output_tokens
        return seq.num_generated == 0 and total > self.max_num_batched_tokens

    def repeats(self, state: ServerState, batch: Batch) -> int:
        """Identical pure-decode steps ahead if nothing arrives (for the fast-forward).

        A pure-decode step over every running request repeats until the first request
        finishes or the KV cache cannot give the next block: admission stays blocked
        (nothing was admitted now, and budget and free blocks only shrink).
        """
        if batch.prefill or batch.preempted or len(batch.decode) != len(state.running):
            return 1
        kv = state.kv
        cohort = batch.cohort or decode_cohort(batch.decode, kv.block_size)
        k = cohort.min_remaining
        if k <= 1:
            return 1
        return 1 + min(k - 1, decode_steps_fitting(cohort.block_openings, kv.num_free))
