"""SGLang's default chunked prefill (``mixed_chunks = false``): a step prefills or decodes.

With chunked prefill on and mixed chunks off, SGLang never puts decodes into a prefill
batch (python/sglang/srt/managers/scheduler.py, late 2025 ``main``):

- ``get_next_batch_to_run`` builds a prefill batch first (``get_new_batch_prefill``) and
  runs it whenever it holds anything; only when no prefill work can start does it decode
  every running request (``update_running_batch``). Prefill has priority, so decodes
  stall while prompts are being prefilled.
- The prefill batch continues the chunked request first (``PrefillAdder.add_chunked_req``,
  python/sglang/srt/managers/schedule_policy.py), then admits waiting requests FCFS into
  what is left of ``rem_chunk_tokens`` (``chunked_prefill_size``; here
  ``max_num_batched_tokens``). A request that does not fit whole is cut to what is left and
  becomes the next chunked request, so one request at a time is mid-prompt.
- ``enable_mixed_chunk`` (server_args.py, false by default) is what mixes them: then the
  adder's budget is reduced by the running batch size and the decodes join the prefill
  batch (``mix_with_running``), which is ``mixed_chunks = true`` here (vLLM v1, Sarathi).

Here the requests mid-prompt (a chunked request, or one recomputing after a preemption)
are the running requests off the decode clock; they continue first, oldest first. If one
needs a KV block and none is free the preemption rule evicts as in a mixed step, and a
step that preempts admits nobody.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from simulator.policies.preemption import requeues_at_tail, victim
from simulator.policies.state import Batch, Sequence, ServerState
from simulator.policies.step import unpadded_shape

if TYPE_CHECKING:
    from simulator.policies.continuous import ContinuousPolicy


def prefill_step(policy: ContinuousPolicy, state: ServerState) -> Batch | None:
    """The prefill-only batch SGLang would run now, or None when no prefill work can start
    (the step is then a decode step of every running request).

    A returned batch may hold no prefill but list the requests preempted while trying.
    """
    budget = policy.max_num_batched_tokens
    prefill: list[tuple[Sequence, int]] = []
    preempted: list[Sequence] = []
    if state.clock.size != len(state.running):  # someone is mid-prompt
        budget = _continue_prompts(policy, state, budget, prefill, preempted)
        if preempted:
            return Batch(prefill, [], unpadded_shape(prefill, [], 0), preempted)
    if not state.waiting or budget == 0:
        return Batch(prefill, [], unpadded_shape(prefill, [], 0)) if prefill else None
    batch = policy.admit(state, budget, prefill, [])
    return batch if batch.prefill else None


def _continue_prompts(
    policy: ContinuousPolicy, state: ServerState, budget: int,
    prefill: list[tuple[Sequence, int]], preempted: list[Sequence],
) -> int:
    """Give the running requests that are mid-prompt their next chunk; the budget left.

    They are the running requests off the decode clock (between steps every running
    request that decodes is on it), so the decoders stay on the clock untouched.
    """
    kv = state.kv
    for seq in [s for s in state.running if s.clock is None]:
        if budget == 0:
            break
        if seq in preempted:
            continue  # evicted for an earlier one's chunk
        n = min(seq.pending, budget)
        while not kv.can_allocate(seq.request_id, seq.num_computed + n):
            out = victim(policy.victim_rule, state.running)
            state.preempt(out, to_tail=requeues_at_tail(policy.preemption))
            preempted.append(out)
            for k, (s, given) in enumerate(prefill):
                if s is out:  # its chunk goes back to the budget
                    del prefill[k]
                    budget += given
                    break
            if out is seq:
                break
        else:
            kv.allocate(seq.request_id, seq.num_computed + n)
            prefill.append((seq, n))
            budget -= n
    return budget
