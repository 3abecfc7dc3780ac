"""vLLM v0 multi-step scheduling (``--num-scheduler-steps n``): one decision, n decode passes.

When every running request decodes (and, with chunked prefill, nobody waits), the
scheduler decides once for ``n`` passes: each request gets the KV blocks for its next
``min(n, remaining)`` tokens up front (vLLM reserves ``n - 1`` lookahead slots,
vllm/core/scheduler.py ``_get_num_lookahead_slots``; a full cache preempts as in a
single step), nothing is admitted until the passes are over, and every token of the
chunk reaches the client at the end of the last pass. A request that ends inside the
chunk stays in the batch (and in its cost) to the end, as on the GPU, and finishes
then. Prefill steps stay single passes.

The step log has one row per chunk: its start and end, the shape of its first pass, and
``num_decode_tokens`` = the requests served, so the ITL is one sample per request and
chunk, as vLLM's benchmark measures it (the gap between two streamed messages).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from simulator.policies.state import Batch, Sequence, ServerState
from simulator.policies.step import join_decoders
from simulator.shapes import StepShape, StepShapes

if TYPE_CHECKING:
    from simulator.policies.continuous import ContinuousPolicy


def decode_chunk(policy: ContinuousPolicy, state: ServerState) -> Batch | None:
    """The next ``policy.num_scheduler_steps`` decode passes as one batch, or None when the
    step is not a decode-only one (someone prefills, or the token budget is short)."""
    running = state.running
    steps = policy.num_scheduler_steps
    if (not running or state.clock.size != len(running)
            or len(running) > policy.max_num_batched_tokens
            or (policy.chunked_prefill and state.waiting)):
        return None
    state.clock.flush(running, state.kv)
    decode: list[Sequence] = []
    preempted: list[Sequence] = []
    i = 0
    while i < len(running):
        seq = running[i]
        tokens = seq.num_computed + min(steps, seq.remaining)
        i, _, kept = policy.make_room(state, tokens, i, preempted, ([], decode), 0)
        if not kept:
            continue  # it was the victim
        state.kv.allocate(seq.request_id, tokens)
        decode.append(seq)
        i += 1
    context = sum(s.num_computed + 1 for s in decode)
    finishing = sum(1 for s in decode if s.remaining <= steps)
    shape = StepShape(num_decode_seqs=len(decode), decode_context_tokens=context,
                      num_finished=finishing)
    return Batch([], decode, shape, preempted, num_steps=steps)


def chunk_shapes(batch: Batch) -> StepShapes:
    """The shapes of the chunk's passes: every row stays to the end, contexts grow by one."""
    d, n = len(batch.decode), batch.num_steps
    context = batch.shape.decode_context_tokens + d * np.arange(n, dtype=np.int64)
    finished = np.zeros(n, dtype=np.int64)
    finished[-1] = batch.shape.num_finished  # their outputs are processed after the chunk
    return StepShapes.decode_run(d, context, finished)


def complete_chunk(state: ServerState, batch: Batch, end_s: float) -> list[Sequence]:
    """Apply a chunk that ended at ``end_s``: each request advances ``min(n, remaining)``
    tokens, all stamped ``end_s``; return the requests that finished."""
    finished: list[Sequence] = []
    for seq in batch.decode:
        t = min(batch.num_steps, seq.remaining)
        seq.num_computed += t
        seq.num_generated += t
        if seq.num_generated == seq.output_tokens:
            seq.finish_s = end_s
            finished.append(seq)
            state.kv.free(seq.request_id)
    if finished:
        state.running = [s for s in state.running if s.num_generated < s.output_tokens]
    if not batch.preempted:
        state.decode_steps += batch.num_steps
    join_decoders(state, batch)
    return finished
