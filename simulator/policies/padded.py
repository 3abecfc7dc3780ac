"""Padded batches run to completion: the machinery static and dynamic batching share.

A padded batch (HF ``generate``-style, Triton request-level batching) pads every prompt
to the longest, holds KV for ``longest prompt + longest output`` tokens per row from the
start, and decodes until its longest output ends, paying for finished rows as it goes.
"""

from __future__ import annotations

from simulator.policies.state import Batch, PaddedGroup, Sequence, ServerState
from simulator.shapes import StepShape


def form_group(state: ServerState, max_rows: int) -> Batch | None:
    """Admit up to ``max_rows`` waiting requests (FCFS, as many as fit in KV) and prefill them."""
    kv = state.kv
    rows: list[Sequence] = []
    max_p = max_o = 0
    for seq in state.waiting:
        if len(rows) == max_rows:
            break
        p, o = max(max_p, seq.prompt_tokens), max(max_o, seq.output_tokens)
        if (len(rows) + 1) * kv.request_blocks(p + o) > kv.num_free:
            break
        rows.append(seq)
        max_p, max_o = p, o
    if not rows:
        return None
    for seq in rows:
        state.waiting.popleft()
        kv.allocate(seq.request_id, max_p + max_o)
        state.running.append(seq)
    state.group = PaddedGroup(rows=rows, max_prompt=max_p, max_output=max_o)
    n = len(rows)
    shape = StepShape(
        num_prefill_tokens=n * max_p,
        prefill_attn_work=n * max_p * (max_p / 2),
        num_admitted=n,
        num_finished=sum(1 for s in rows if s.output_tokens == 1),
    )
    return Batch(prefill=[(s, s.prompt_tokens) for s in rows], decode=[], shape=shape)


def group_step(state: ServerState) -> Batch:
    """The next decode step of the padded batch in flight."""
    group = state.group
    assert group is not None and group.prefilled
    live = [r for r in group.rows if r.remaining > 0]
    return Batch(prefill=[], decode=live, shape=group.decode_shape())


def group_repeats(state: ServerState) -> int:
    """Decode steps the padded batch will run if nothing else happens (>= 1)."""
    group = state.group
    return max(1, group.decode_steps_left) if group is not None else 1
