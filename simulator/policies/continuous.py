"""Continuous (iteration-level) batching, as in Orca and vLLM, with optional chunked prefill.

Without chunked prefill (vLLM v0's default): when a waiting request can be admitted, the
step is a prefill-only step of as many whole prompts as fit; otherwise every running
request decodes one token. With chunked prefill (Sarathi, vLLM v1): decodes go first,
then running prefills continue and waiting requests are admitted in chunks that fill the
token budget, so prefills ride along with decodes instead of stalling them (unless
``mixed_chunks`` is false, SGLang's default: :mod:`~simulator.policies.unmixed`).

When a running request needs a KV block and none is free, the newest running request is
preempted by recompute: its blocks are freed and it returns to the head of the queue.

Each serving stack's scheduler semantics are knobs whose defaults keep the behaviour
above (docs/stacks.md, "Scheduler semantics per stack"): ``admission``
(:mod:`~simulator.policies.admission`), ``preemption``
(:mod:`~simulator.policies.preemption`), ``kv_watermark``, ``num_scheduler_steps``
(:mod:`~simulator.policies.multistep`), ``max_model_len``, ``padded_prefill``,
``mixed_chunks`` and ``long_prompt_alone``.

Between steps a running request holds exactly ``blocks_for(num_computed)`` KV blocks
(admission and growth allocate to the tokens computed). The common step, where every
running request decodes one token, uses that and the replica's decode clock
(:mod:`simulator.policies.lazy`) to cost O(1), not a walk over the running requests.
The general per-request loop first writes the clock's members back (``flush``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from simulator.errors import ConfigError
from simulator.frozen_pickle import reduce_frozen
from simulator.kvcache import blocks_opened, decode_steps_fitting
from simulator.policies import admission as rule
from simulator.policies.admit_fcfs import admit_fcfs
from simulator.policies.clock_chunks import clock_and_chunks
from simulator.policies.multistep import decode_chunk
from simulator.policies.preemption import PREEMPTIONS, requeues_at_tail, unschedule, victim
from simulator.policies.priority import SCHEDULINGS, check_scheduling, priority_first
from simulator.policies.speculative import MAX_SPECULATIVE_TOKENS, spec_step
from simulator.policies.state import Batch, DecodeCohort, Sequence, ServerState, Wait
from simulator.policies.step import decode_cohort, unpadded_shape
from simulator.policies.token_ratio import INIT_NEW_TOKEN_RATIO
from simulator.policies.unmixed import prefill_step
from simulator.scenario_fields import spec
from simulator.shapes import StepShape


@dataclass(slots=True, frozen=True)
class ContinuousPolicy:
    """Admit and retire requests at every step, within sequence, token and KV limits."""

    max_num_seqs: int = spec(256, unit="requests", low=1)  # running requests at most
    # tokens computed per step at most
    max_num_batched_tokens: int = spec(8192, unit="tokens", low=1)
    chunked_prefill: bool = spec(False)
    # (the string fields' choices are in spec, not a Literal annotation: compiled by mypyc
    # (simulator/accel.py), a class's annotations no longer read as Literal)
    # which waiting request may start: greedy (vLLM), no_evict (TensorRT-LLM
    # GUARANTEED_NO_EVICT), conservative (SGLang's new_token_ratio estimate)
    admission: str = spec("greedy", choices=rule.ADMISSIONS)
    # whom a full KV cache evicts: newest (vLLM, TensorRT-LLM), fewest_outputs (SGLang)
    preemption: str = spec("newest", choices=PREEMPTIONS)
    # share of the KV blocks admission leaves free (vLLM v0: 0.01)
    kv_watermark: float = spec(0.0, low=0, high=0.99)
    # decode steps per scheduling decision (vLLM v0 --num-scheduler-steps)
    num_scheduler_steps: int = spec(1, unit="steps", low=1)
    # longest prompt + output accepted (0: no limit here)
    max_model_len: int = spec(0, unit="tokens", low=0)
    # a prefill step counts rows x longest prompt against the budget (vLLM v0.2/0.3)
    padded_prefill: bool = spec(False)
    # chunked prefill: decodes join prefill steps (vLLM v1); false: a step prefills or decodes
    mixed_chunks: bool = spec(True)
    # draft tokens each decode row verifies per step (vLLM's num_speculative_tokens; 0: off;
    # policies/speculative.py)
    num_speculative_tokens: int = spec(0, unit="tokens", low=0, high=MAX_SPECULATIVE_TOKENS)
    # no chunked prefill: whole prompts join the running decodes' step, decodes first
    # (TensorRT-LLM in-flight batching); false: a prefill-only step (vLLM v0)
    mixed_prefill: bool = spec(False)
    # no chunked prefill: a prompt over max_num_batched_tokens runs alone in its own
    # prefill step (SGLang 0.2's max_prefill_tokens); false: it is refused (vLLM v0)
    long_prompt_alone: bool = spec(False)
    # the token budget of the one rank a request runs on (0: max_num_batched_tokens), which
    # refuses a prompt over it without chunked prefill: under attention data parallelism
    # the group's budget is its ranks' together (simulator/deployment.py rank_limits)
    request_budget: int = spec(0, unit="tokens", low=0)
    # waiting order and victims: fcfs (arrival), priority (class, then arrival; a less
    # urgent running request makes way: policies/priority.py)
    scheduling: str = spec("fcfs", choices=SCHEDULINGS)
    # the next step is formed while this one runs (SGLang's overlap scheduler): a request
    # that arrives during a step starts in the step after the next (simulator/replica.py)
    overlap_schedule: bool = spec(False)

    def __reduce__(self) -> tuple[Any, tuple[type, dict[str, Any]]]:
        return reduce_frozen(self)  # compiled, it could not be unpickled otherwise

    def __post_init__(self) -> None:
        for name in ("max_num_seqs", "max_num_batched_tokens", "num_scheduler_steps"):
            if getattr(self, name) < 1:
                raise ConfigError(f"policy.{name} = {getattr(self, name)}: must be >= 1")
        if not 0 <= self.kv_watermark <= 0.99:
            raise ConfigError(f"policy.kv_watermark = {self.kv_watermark}: must be in [0, 0.99]")
        k = self.num_speculative_tokens
        if not 0 <= k <= MAX_SPECULATIVE_TOKENS:
            raise ConfigError(f"policy.num_speculative_tokens = {k}: must be in "
                              f"[0, {MAX_SPECULATIVE_TOKENS}]")
        if k and self.num_scheduler_steps > 1:
            raise ConfigError(f"policy.num_speculative_tokens = {k}: not with "
                              f"num_scheduler_steps = {self.num_scheduler_steps} (vLLM v0 "
                              "refused multi-step with speculative decoding too)")
        if self.max_model_len < 0:
            raise ConfigError(f"policy.max_model_len = {self.max_model_len}: must be >= 0")
        if self.admission not in rule.ADMISSIONS:
            raise ConfigError(f"policy.admission = {self.admission!r}: must be one of "
                              f"{list(rule.ADMISSIONS)}")
        check_scheduling(self)
        if self.preemption not in PREEMPTIONS:
            raise ConfigError(f"policy.preemption = {self.preemption!r}: must be one of "
                              f"{list(PREEMPTIONS)}")

    def schedule(self, state: ServerState, now: float) -> Batch | Wait:
        """The next step's batch, or Wait() when there is nothing to do."""
        if not state.waiting and not state.running:
            state.token_ratio.set(INIT_NEW_TOKEN_RATIO, state.decode_steps)  # SGLang: idle
            return Wait()
        made_way = priority_first(self, state) if self.scheduling != "fcfs" else None
        batch: Batch | None = None
        if not self.chunked_prefill and not self.mixed_prefill and state.waiting:
            batch = self.admit(state, self.max_num_batched_tokens, [], [])
        elif self.chunked_prefill and not self.mixed_chunks:
            batch = prefill_step(self, state)
        if (batch is None or not batch.prefill) and self.num_scheduler_steps > 1:
            batch = decode_chunk(self, state) or batch
        if batch is None or not (batch.prefill or batch.num_steps > 1):
            evicted = batch.preempted if batch is not None else None
            # chunked, or nothing admissible: decode what runs
            batch = spec_step(self, state) if self.num_speculative_tokens else \
                self._mixed_step(state)
            if evicted:  # (a slice assignment of nothing still builds a slice)
                batch.preempted[:0] = evicted
        if made_way:
            batch.preempted[:0] = made_way
        if batch.preempted and self.admission == "conservative":
            state.token_ratio.set(rule.retract_estimate(state.running), state.decode_steps)
        if batch.prefill or batch.decode:
            return batch
        return Wait()  # everything waiting was rejected or preempted

    def _mixed_step(self, state: ServerState) -> Batch:
        """Running requests first (decode or next prefill chunk), then admissions."""
        budget = self.max_num_batched_tokens
        batch = self._decode_all(state)
        if batch is not None:
            if self._joins_decodes and state.waiting:
                return self.admit(state, budget - len(batch.decode), [], batch.decode, batch)
            return batch
        if self.chunked_prefill and self.mixed_chunks:
            found = self._clock_and_chunks(state)
            if found is not None:
                chunks, decode_all, left = found
                return self.admit(state, left, chunks, decode_all.decode, decode_all)
        state.clock.flush(state.running, state.kv)
        prefill: list[tuple[Sequence, int]] = []
        decode: list[Sequence] = []
        preempted: list[Sequence] = []
        i = 0
        while i < len(state.running) and budget > 0:
            seq = state.running[i]
            n = min(seq.pending, budget)
            i, budget, kept = self.make_room(state, seq.num_computed + n, i, preempted,
                                             (prefill, decode), budget)
            if not kept:
                continue  # it was the victim: the next request now stands at ``i``
            state.kv.allocate(seq.request_id, seq.num_computed + n)
            (decode.append(seq) if seq.decoding else prefill.append((seq, n)))
            budget -= n
            i += 1
        if preempted or not self._joins_decodes:
            return Batch(prefill, decode, unpadded_shape(prefill, decode, 0), preempted)
        return self.admit(state, budget, prefill, decode)

    @property
    def victim_rule(self) -> str:
        """Whom a full KV cache evicts (preemption.victim): the preemption rule, or the
        least urgent class under priority scheduling."""
        return self.preemption if self.scheduling == "fcfs" else "priority"

    @property
    def _joins_decodes(self) -> bool:
        """Whether admitted prompts share a step with the running decodes."""
        return (self.chunked_prefill and self.mixed_chunks) or (
            self.mixed_prefill and not self.chunked_prefill)

    def make_room(
        self, state: ServerState, num_tokens: int, i: int, preempted: list[Sequence],
        scheduled: tuple[list[tuple[Sequence, int]], list[Sequence]], budget: int,
    ) -> tuple[int, int, bool]:
        """Preempt until ``state.running[i]`` can hold ``num_tokens``: (its new index, the
        token budget, whether it is still running). A victim already in ``scheduled``
        (prefill, decode) this step is taken out of it and its tokens return to the budget."""
        seq = state.running[i]
        while not state.kv.can_allocate(seq.request_id, num_tokens):
            rule = self.victim_rule
            out = victim(rule, state.running)
            j = len(state.running) - 1 if rule == "newest" else state.running.index(out)
            state.preempt(out, to_tail=requeues_at_tail(self.preemption))
            preempted.append(out)
            if j < i:
                i -= 1
                budget += unschedule(out, *scheduled)
            if out is seq:
                return i, budget, False
        return i, budget, True

    def _clock_and_chunks(
        self, state: ServerState
    ) -> tuple[list[tuple[Sequence, int]], Batch, int] | None:
        """The general loop's decodes and chunks when it needs no walk (clock_chunks.py)."""
        return clock_and_chunks(state, self.max_num_batched_tokens)

    def _decode_all(self, state: ServerState) -> Batch | None:
        """The batch where every running request decodes one token, or None if that is not it.

        It is when every running request is on the decode clock (none is prefilling),
        the token budget covers them, and the free blocks cover those whose next token
        opens a block. The loop in :meth:`_mixed_step` would then allocate for all of
        them in order and preempt nobody, so this is the same batch, found in O(1).
        """
        running = state.running
        clock = state.clock
        n = len(running)
        if not n or clock.size != n or n > self.max_num_batched_tokens:
            return None
        opening_now, context, min_left, at_min = clock.next_step()
        kv = state.kv
        if opening_now > kv.num_free:
            return None
        kv.take(opening_now)
        shape = StepShape(num_decode_seqs=n, decode_context_tokens=context,
                          num_finished=at_min if min_left == 1 else 0)
        cohort = DecodeCohort(min_left, at_min, clock.openings_after())
        return Batch([], list(running), shape, cohort=cohort)

    def admit(
        self,
        state: ServerState,
        budget: int,
        prefill: list[tuple[Sequence, int]],
        decode: list[Sequence],
        decode_all: Batch | None = None,
    ) -> Batch:
        """Admit waiting requests FCFS while sequences, tokens and KV allow (admit_fcfs.py).

        ``decode_all``: the all-decode batch whose ``decode`` this is, when it is one.
        """
        return admit_fcfs(self, state, budget, prefill, decode, decode_all)

    def repeats(self, state: ServerState, batch: Batch) -> int:
        """Identical pure-decode steps ahead if nothing arrives (for the fast-forward).

        A pure-decode step over every running request repeats until the first request
        finishes or the KV cache cannot give the next block: admission stays blocked
        (nothing was admitted now, and budget and free blocks only shrink).
        """
        if batch.prefill or batch.preempted or len(batch.decode) != len(state.running):
            return 1
        if batch.num_steps > 1 or (self.admission == "conservative" and state.waiting):
            return 1  # the chunk is one decision; the decaying ratio may admit at any step
        if batch.spec_tokens:
            return 1  # how far each row gets is drawn step by step
        kv = state.kv
        cohort = batch.cohort or decode_cohort(batch.decode, kv.block_size)
        k = cohort.min_remaining
        if k <= 1:
            return 1
        if blocks_opened(cohort.block_openings, k - 1) <= kv.num_free:
            return k  # the usual case, found without walking the block cycle
        return 1 + decode_steps_fitting(cohort.block_openings, kv.num_free)


def overlaps(policy: object, speculating: bool) -> bool:
    """Whether ``policy`` forms the next step while the GPU runs this one (an overlap
    scheduler: SGLang's from 0.4, vLLM's async scheduling): the replica's hand-over of a
    request that arrives mid-step and the host work beside the step (simulator/deployment.py)
    both follow it. Never while speculating: vLLM 0.14 keeps it off for draft-model
    speculation, and servesim's drafts are a draft model's."""
    return bool(getattr(policy, "overlap_schedule", False)) and not speculating
