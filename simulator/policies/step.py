"""Applying a finished step to the server state: the third of schedule -> run -> complete.

``complete`` advances every sequence in the batch by the tokens it computed, stamps
first-token and finish times at the step's end, and frees the KV of what finished.
"""

from __future__ import annotations

import math

from simulator.kvcache import new_block_counts
from simulator.policies.state import Batch, DecodeCohort, Sequence, ServerState
from simulator.shapes import StepShape


def unpadded_shape(
    prefill: list[tuple[Sequence, int]], decode: list[Sequence], num_admitted: int
) -> StepShape:
    """The cost-model shape of a batch that is not padded (iteration-level batching)."""
    num_prefill = 0
    attn = 0.0
    finishing = 0
    for seq, n in prefill:
        num_prefill += n
        attn += n * (seq.num_computed + n / 2)
        if seq.num_computed + n == seq.num_tokens and seq.remaining == 1:
            finishing += 1
    context = 0
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
    seq.num_generated += 1
    if seq.num_generated == 1:
        seq.first_token_s = end_s
    if seq.num_generated == seq.output_tokens:
        seq.finish_s = end_s
        finished.append(seq)


def complete(state: ServerState, batch: Batch, start_s: float, end_s: float) -> list[Sequence]:
    """Apply ``batch``, which ran from ``start_s`` to ``end_s``; return what finished."""
    finished: list[Sequence] = []
    for seq, n in batch.prefill:
        if math.isnan(seq.scheduled_s):
            seq.scheduled_s = start_s
        seq.num_computed += n
        if seq.num_computed == seq.num_tokens:
            _emit(seq, end_s, finished)
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
    elif finished:
        for seq in finished:
            state.kv.free(seq.request_id)
        state.running = [s for s in state.running if s.num_generated < s.output_tokens]
    return finished


def decode_emitters(batch: Batch) -> int:
    """Output tokens the batch emits after a request's first (the step's ITL weight)."""
    n = len(batch.decode)
    for seq, k in batch.prefill:  # recompute after preemption re-emits a later token
        if seq.num_generated > 0 and seq.num_computed + k == seq.num_tokens:
            n += 1
    return n
