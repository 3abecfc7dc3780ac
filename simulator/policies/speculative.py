"""Speculative decoding in the scheduling core: what each decode row verifies, and after.

With ``ContinuousPolicy.num_speculative_tokens = k > 0`` (vLLM's ``num_speculative_tokens``)
every decode row of a step is a speculative row: a draft proposes
``s = min(k, remaining - 1, budget - 1)`` tokens for it and the target verifies the row's
last token plus those ``s`` drafts, ``1 + s`` positions, in one pass. The ``1 + s`` tokens
count against ``max_num_batched_tokens`` (vLLM v1 schedules ``num_tokens_with_spec -
num_computed_tokens``, vllm/v1/core/sched/scheduler.py, and trims the drafts to the
budget). Prefill rows are unchanged.

KV: a row gets blocks for ``num_computed + 1 + s`` tokens before the step (vLLM's lookahead
slots), and after it keeps exactly ``blocks_for(num_computed)`` of the positions it
accepted; the rejected positions' blocks go back (:func:`apply_accepted`). vLLM v1 keeps
them allocated (``num_computed_tokens -= num_rejected``; the request grows back into
them), at most ``ceil(k / block_size)`` blocks a row; giving them back keeps the core's
invariant that a running request holds ``blocks_for(num_computed)`` blocks between steps.

A row that emits ``a`` tokens (``1 <= a <= 1 + s``: ``a - 1`` drafts accepted plus the
target's own token) advances ``num_computed`` and ``num_generated`` by ``a``; all ``a``
reach the client at the step's end, as a multi-step chunk's do (one ITL sample per row
per step). Who draws ``a``: the simulator's replica (simulator/speculative_acceptance.py)
or the engine (its real verify); :mod:`~simulator.policies.spec_accept` applies it.

Speculative steps bypass the lazy decode clock and the fast-forward: every such step runs
the general per-request loop (O(running) per step).
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from simulator.policies.state import Batch, Sequence, ServerState
from simulator.policies.step import unpadded_shape

if TYPE_CHECKING:
    from simulator.policies.continuous import ContinuousPolicy

MAX_SPECULATIVE_TOKENS = 16  # k at most (vLLM's proposers use a few; the range is ours)


def drafts_for(seq: Sequence, k: int, budget: int) -> int:
    """Drafts the decoding ``seq`` verifies this step when ``budget`` tokens are left."""
    return max(0, min(k, seq.remaining - 1, budget - 1))


def spec_step(policy: ContinuousPolicy, state: ServerState) -> Batch:
    """The continuous policy's mixed step (running requests first, then admissions) with
    every decode row verifying its drafts: ``ContinuousPolicy._mixed_step``'s general
    loop, without its clock fast paths."""
    k = policy.num_speculative_tokens
    budget = policy.max_num_batched_tokens
    state.clock.flush(state.running, state.kv)
    prefill: list[tuple[Sequence, int]] = []
    decode: list[Sequence] = []
    preempted: list[Sequence] = []
    drafts: dict[int, int] = {}  # request_id -> drafts verified, of the rows in ``decode``
    i = 0
    while i < len(state.running) and budget > 0:
        seq = state.running[i]
        decoding = seq.decoding
        n = 1 + drafts_for(seq, k, budget) if decoding else min(seq.pending, budget)
        before = len(preempted)
        i, budget, kept = policy.make_room(state, seq.num_computed + n, i, preempted,
                                           (prefill, decode), budget)
        for out in preempted[before:]:  # make_room gave back a decode row's first token only
            budget += drafts.pop(out.request_id, 0)
        if not kept:
            continue  # it was the victim: the next request now stands at ``i``
        state.kv.allocate(seq.request_id, seq.num_computed + n)
        if decoding:
            decode.append(seq)
            drafts[seq.request_id] = n - 1
        else:
            prefill.append((seq, n))
        budget -= n
        i += 1
    if preempted or not policy._joins_decodes:
        batch = Batch(prefill, decode, unpadded_shape(prefill, decode, 0), preempted)
    else:
        batch = policy.admit(state, budget, prefill, decode)
    return speculative(batch, k, drafts)


def speculative(batch: Batch, k: int, drafts: dict[int, int]) -> Batch:
    """``batch`` with its decode rows marked speculative and the verify priced in its shape:
    ``S`` drafts verified, their attention pairs ``W`` (draft ``j`` of a row whose first
    query attends ``c`` tokens attends ``c + j``), and ``max s`` draft passes."""
    if not batch.decode:
        return batch
    per_row = [drafts[s.request_id] for s in batch.decode]
    work = 0.0
    for seq, s in zip(batch.decode, per_row, strict=True):
        work += s * (seq.num_computed + 1) + s * (s + 1) / 2
    batch.spec_tokens = k
    batch.spec_drafts = per_row
    batch.shape = replace(batch.shape, num_spec_tokens=sum(per_row), spec_attn_work=work,
                          num_draft_passes=max(per_row))
    return batch
