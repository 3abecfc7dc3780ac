"""Continuous batching's admission: waiting requests join the running batch FCFS.

:meth:`~simulator.policies.continuous.ContinuousPolicy.admit` (the prefill-only and
mixed steps, and :mod:`~simulator.policies.unmixed`'s prefill step) runs this: the head
of the queue joins while the sequence limit, the token budget and the KV cache allow;
the stack's admission rule (:mod:`~simulator.policies.admission`) may hold KV room back,
``kv_watermark`` keeps a share of the blocks free, ``padded_prefill`` charges rows x
the longest prompt against the budget, and ``long_prompt_alone`` lets a prompt over the
budget run alone as a step's only prefill. A request the rule refuses even on an empty
replica is rejected rather than left at the head forever.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from simulator.policies import admission as rule
from simulator.policies.state import REFUSED_KV, Batch, Sequence, ServerState
from simulator.policies.step import unpadded_shape

if TYPE_CHECKING:
    from simulator.policies.continuous import ContinuousPolicy


def admit_fcfs(
    policy: ContinuousPolicy,
    state: ServerState,
    budget: int,
    prefill: list[tuple[Sequence, int]],
    decode: list[Sequence],
    decode_all: Batch | None = None,
) -> Batch:
    """Admit waiting requests FCFS while sequences, tokens and KV allow: the step's batch
    of ``prefill`` (extended in place) and ``decode``.

    ``decode_all``: the all-decode batch whose ``decode`` this is, when it is one.
    """
    admitted = 0
    kv = state.kv
    watermark = int(policy.kv_watermark * kv.num_blocks)  # vLLM v0: int(watermark x blocks)
    room = None if policy.admission == "greedy" else rule.kv_room(policy.admission, state,
                                                                  watermark)
    longest = 0  # padded_prefill: the longest prompt admitted in this step
    while state.waiting and budget > 0 and len(state.running) < policy.max_num_seqs:
        seq = state.waiting[0]
        refusal = rule.refusal(policy, seq)
        if refusal:
            state.waiting.popleft()
            state.reject(seq, refusal)
            continue
        # prefix caching: the cached leading blocks are not computed again (prefix_cache.py)
        hit = kv.match(seq.request_id, seq.num_tokens,
                       seq.prompt_tokens + seq.output_tokens) if kv.caches_prefixes else 0
        # a waiting request is off the decode clock: its counters are the bases (the
        # properties would say the same, slower)
        generated = seq.generated_base if seq.clock is None else seq.num_generated
        computed = seq.computed_base if seq.clock is None else seq.num_computed
        pending = seq.prompt_tokens + generated - computed - hit
        n = pending if not policy.chunked_prefill else min(pending, budget)
        cost = n
        if policy.padded_prefill and not policy.chunked_prefill:  # rows x longest prompt
            cost = max(longest, n) * (len(prefill) + 1) - longest * len(prefill)
        if cost > budget and (prefill or decode or not policy.long_prompt_alone):
            break  # (long_prompt_alone: a step's first prompt may run over the budget alone)
        fits = kv.can_allocate(seq.request_id, hit + n, watermark)
        if fits and room is not None:
            fits = rule.admits(policy.admission, kv, seq, room)
        if not fits:
            # the rule refuses it even on an empty replica (no block held, none lent out)
            if kv.num_free == kv.num_blocks and not prefill:
                state.waiting.popleft()
                state.reject(seq, f"{REFUSED_KV}: {seq.prompt_tokens}+{seq.output_tokens} "
                             f"tokens do not fit {kv.num_blocks} KV blocks under admission "
                             f"{policy.admission!r} with kv_watermark {policy.kv_watermark}")
                continue
            break
        if hit:
            seq.num_computed = hit
        if room is not None:
            room -= rule.charge(policy.admission, kv, seq, n)
        state.waiting.popleft()
        kv.allocate(seq.request_id, hit + n)
        state.running.append(seq)
        prefill.append((seq, n))
        budget -= cost
        longest = max(longest, n)
        if seq.preemptions == 0 and generated == 0:
            admitted += 1
    if decode_all is None:
        return Batch(prefill, decode, unpadded_shape(prefill, decode, admitted))
    if not prefill:
        return decode_all  # nothing admitted
    shape = unpadded_shape(prefill, decode, admitted, decode_all.shape)
    return Batch(prefill, decode, shape, cohort=decode_all.cohort)
