"""Admission rules of the continuous policy: may the head of the queue start now?

Every rule first needs the KV blocks for the tokens the request computes in this step
(``BlockManager.can_allocate``); the rules differ in what they keep back for later:

``greedy``        nothing (vLLM v0/v1, and today's default): running requests grow into
                  whatever is free and are preempted when it runs out.
``no_evict``      TensorRT-LLM's GUARANTEED_NO_EVICT capacity scheduler
                  (cpp/tensorrt_llm/batch_manager/capacityScheduler.cpp,
                  ``GuaranteedNoEvictScheduler::impl``): every running request keeps
                  the blocks it still needs to finish, and a new request is admitted
                  only if blocks for its whole prompt + output fit in what is left. The
                  blocks left are ``num_blocks - sum(request_blocks(prompt + output))`` over
                  the running requests (their free blocks minus their remaining needs),
                  so running requests never run out and nobody is preempted.
``conservative``  SGLang's ``PrefillAdder`` (python/sglang/srt/managers/schedule_policy.py):
                  in tokens, ``free - sum(min(remaining, 4096) * new_token_ratio)`` over
                  the running requests must exceed the request's pending tokens plus
                  ``min(remaining, 4096)``; an admitted request is then charged its
                  chunk plus its whole clipped output. The ratio starts at 0.7, falls
                  by (0.7 - 0.7 x 0.14) / 600 per decode step to 0.098, is set by a
                  retraction to ``(decoded + 20 x running) / (max_new_tokens + 1)``
                  (capped at 1) and returns to 0.7 when the replica is idle
                  (scheduler.py ``update_running_batch``, ``self_check_during_idle``;
                  schedule_batch.py ``retract_decode``; defaults of global_config.py /
                  environ.py ``SGLANG_*_NEW_TOKEN_RATIO*``, ``SGLANG_RETRACT_DECODE_STEPS``).

:func:`refusal` turns away, at the head of the queue, what can never run: prompt +
output over ``max_model_len`` (vLLM refuses it at the API), or over one step's budget
without chunked prefill (unless ``long_prompt_alone``: it then runs alone; the budget is
``request_budget`` where set: an attention data-parallel rank's).

``kv_watermark`` (vLLM v0 ``BlockSpaceManager.can_allocate``: ``free - needed >=
watermark x num_blocks``) is kept back from every rule's room.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from simulator.kvcache import BlockManager
from simulator.policies.state import REFUSED_BUDGET, REFUSED_MODEL_LEN, Sequence, ServerState
from simulator.policies.token_ratio import CLIP_MAX_NEW_TOKENS, RETRACT_DECODE_STEPS

if TYPE_CHECKING:
    from simulator.policies.continuous import ContinuousPolicy

ADMISSIONS = ("greedy", "no_evict", "conservative")


def retract_estimate(running: list[Sequence]) -> float:
    """SGLang's ratio after a retraction, from the requests still running."""
    decoded = sum(s.num_generated for s in running)
    max_new = sum(s.output_tokens for s in running)
    return min(1.0, (decoded + RETRACT_DECODE_STEPS * len(running)) / (max_new + 1))


def reserved_blocks(state: ServerState) -> int:
    """Blocks the running requests hold back under no_evict: their whole prompt + output."""
    kv = state.kv
    return sum(kv.request_blocks(s.prompt_tokens + s.output_tokens) for s in state.running)


def kv_room(admission: str, state: ServerState, watermark_blocks: int) -> float:
    """What the rule may still hand out this step: blocks (no_evict) or tokens (conservative)."""
    kv = state.kv
    if admission == "no_evict":
        return kv.num_blocks - watermark_blocks - reserved_blocks(state)
    ratio = state.token_ratio.value(state.decode_steps)
    future = sum(min(s.remaining, CLIP_MAX_NEW_TOKENS) * ratio for s in state.running)
    return (kv.num_free - watermark_blocks) * kv.block_size - future


def admits(admission: str, kv: BlockManager, seq: Sequence, room: float) -> bool:
    """Whether ``seq`` fits the rule's ``room`` (from :func:`kv_room`)."""
    if admission == "no_evict":
        return kv.request_blocks(seq.prompt_tokens + seq.output_tokens) <= room
    return seq.pending + min(seq.remaining, CLIP_MAX_NEW_TOKENS) < room  # SGLang: >= refuses


def charge(admission: str, kv: BlockManager, seq: Sequence, n: int) -> float:
    """What admitting ``seq`` for ``n`` tokens this step takes from the room."""
    if admission == "no_evict":
        return kv.request_blocks(seq.prompt_tokens + seq.output_tokens)
    # a chunk that does not end the prompt is charged alone (SGLang: max_new_tokens 0)
    return n + (min(seq.remaining, CLIP_MAX_NEW_TOKENS) if n == seq.pending else 0)


def refusal(policy: ContinuousPolicy, seq: Sequence) -> str:
    """Why ``seq`` (at the head of the queue) can never run here, or ""."""
    total = seq.prompt_tokens + seq.output_tokens
    if 0 < policy.max_model_len < total:  # vLLM refuses it at the API
        return (f"{REFUSED_MODEL_LEN}: prompt {seq.prompt_tokens} + output "
                f"{seq.output_tokens} = {total} tokens > max_model_len = {policy.max_model_len}")
    if policy.chunked_prefill or seq.num_generated > 0 or policy.long_prompt_alone:
        return ""  # (long_prompt_alone: over the budget, it runs alone: admit_fcfs.py)
    # Without chunks a step must hold what the request recomputes after a preemption;
    # no_evict never preempts, so its prompt alone must fit.
    need = seq.prompt_tokens if policy.admission == "no_evict" else total
    budget = policy.request_budget or policy.max_num_batched_tokens
    if need <= budget:
        return ""
    what = "prompt" if policy.admission == "no_evict" else "prompt + output"
    name = "request_budget" if policy.request_budget else "max_num_batched_tokens"
    return (f"{REFUSED_BUDGET}: {what} = {need} tokens > {name} = {budget}: without chunked "
            "prefill a preempted request is recomputed in one step (vLLM v0 likewise needs "
            "the budget >= max_model_len)")
