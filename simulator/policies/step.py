"""Applying a finished step to the server state: the third of schedule -> run -> complete.

``complete`` advances every sequence in the batch by the tokens it computed, stamps
first-token and finish times at the step's end, and frees the KV of what finished. The
decoding requests of continuous batching advance together on the replica's decode clock
(:mod:`simulator.policies.lazy`): a request joins it when it starts decoding.
"""

from __future__ import annotations

import math

from simulator.kvcache import new_block_counts
from simulator.policies.identity import index_same, remove_same
from simulator.policies.spec_accept import apply_accepted
from simulator.policies.state import Batch, DecodeCohort, Sequence, ServerState
from simulator.shapes import StepShape


def unpadded_shape(
    prefill: list[tuple[Sequence, int]], decode: list[Sequence], num_admitted: int,
    decode_shape: StepShape | None = None,
) -> StepShape:
    """The cost-model shape of a batch that is not padded (iteration-level batching).

    ``decode_shape``, when given, is the decode part already summed (``decode`` is then
    the decode clock's members and is not walked).
    """
    num_prefill = 0
    attn = 0.0
    finishing = 0
    for seq, n in prefill:
        num_prefill += n
        if seq.clock is None:  # the counters themselves (a prefilling request is off the clock)
            computed, generated = seq.computed_base, seq.generated_base
        else:
            computed, generated = seq.num_computed, seq.num_generated
        attn += n * (computed + n / 2)
        if computed + n == seq.prompt_tokens + generated and seq.output_tokens - generated == 1:
            finishing += 1
    context = 0
    if decode_shape is not None:
        context = decode_shape.decode_context_tokens
        finishing += decode_shape.num_finished
    else:
        for seq in decode:
            context += seq.num_computed + 1
            if seq.remaining == 1:
                finishing += 1
    return StepShape(
        num_prefill_tokens=num_prefill,
        prefill_attn_work=attn,
        num_decode_seqs=len(decode),
        decode_context_tokens=context,
        num_admitted=num_admitted,
        num_finished=finishing,
    )


def decode_cohort(decode: list[Sequence], block_size: int) -> DecodeCohort:
    """The fast-forward's summary of ``decode``, sequences that each decode one token now."""
    left = [s.output_tokens - s.num_generated for s in decode]
    min_left = min(left)
    openings = new_block_counts((s.num_computed + 1 for s in decode), block_size)
    return DecodeCohort(min_left, left.count(min_left), openings)


def _emit(seq: Sequence, end_s: float, finished: list[Sequence]) -> None:
    """``seq`` (off the clock: eager counters) emits a token at ``end_s``."""
    seq.generated_base += 1
    if seq.generated_base == 1:
        seq.first_token_s = end_s
    if seq.generated_base == seq.output_tokens:
        seq.finish_s = end_s
        finished.append(seq)


def complete(state: ServerState, batch: Batch, start_s: float, end_s: float,
             accepted: list[int] | None = None) -> list[Sequence]:
    """Apply ``batch``, which ran from ``start_s`` to ``end_s``; return what finished.

    ``accepted[i]``: the tokens ``batch.decode[i]`` emitted in a speculative step
    (``batch.spec_tokens > 0``; policies/speculative.py), required there, else ignored.
    """
    finished: list[Sequence] = []
    if batch.decode and not batch.prefill and not batch.preempted:
        state.decode_steps += 1  # what SGLang's new_token_ratio decays by
    for seq, n in batch.prefill:
        if math.isnan(seq.scheduled_s):
            seq.scheduled_s = start_s
        if seq.clock is not None:
            seq._check_eager()  # raises: a prefilling request is never on the clock
        seq.computed_base += n  # num_computed, read and written without the properties
        if seq.computed_base == seq.prompt_tokens + seq.generated_base:
            _emit(seq, end_s, finished)
    if batch.spec_tokens:
        apply_accepted(state, batch, accepted, end_s, finished)
    elif batch.cohort is None:
        for seq in batch.decode:
            seq.num_computed += 1
            _emit(seq, end_s, finished)
    group = state.group
    if group is not None:
        if group.prefilled:
            group.decode_steps_done += 1
        group.prefilled = True
        if group.decode_steps_left <= 0:  # the padded batch is over: release every row
            for row in group.rows:
                state.kv.free(row.request_id)
            state.running.clear()
            state.group = None
        return finished
    for seq in finished:
        state.kv.free(seq.request_id)
        remove_same(state.running, seq)
    if batch.cohort is not None:
        finish_members(state, state.clock.advance(1), end_s, finished)
    join_decoders(state, batch)
    return finished


def finish_members(
    state: ServerState, done: list[Sequence], end_s: float, finished: list[Sequence]
) -> None:
    """Retire the clock members in ``done`` (their last token ends at ``end_s``): write them
    back, free their KV, and append them to ``finished`` in running order."""
    if not done:
        return
    running = state.running
    if len(done) > 1:  # in running order, each found by identity (simulator/policies/identity.py)
        at = sorted([index_same(running, s) for s in done])
        done = [running[i] for i in at]
        for i in reversed(at):
            del running[i]
    else:
        done = list(done)
        remove_same(running, done[0])
    state.clock.release(done, state.kv)
    for seq in done:
        seq.finish_s = end_s
    finished.extend(done)


def join_decoders(state: ServerState, batch: Batch) -> None:
    """Put the sequences that start decoding after ``batch`` on the decode clock."""
    clock = state.clock
    if clock.rejoin:
        clock.rejoin_all(state.running)
        return
    for seq, _ in batch.prefill:
        # ``seq.decoding`` and ``num_generated < output_tokens`` of a request off the clock
        generated = seq.generated_base
        if (seq.clock is None and 0 < generated < seq.output_tokens
                and seq.computed_base == seq.prompt_tokens + generated - 1):
            clock.join(seq)


def decode_emitters(batch: Batch) -> int:
    """Output tokens the batch emits after a request's first (the step's ITL weight)."""
    n = len(batch.decode)
    for seq, k in batch.prefill:  # recompute after preemption re-emits a later token
        if seq.num_generated > 0 and seq.num_computed + k == seq.num_tokens:
            n += 1
    return n
