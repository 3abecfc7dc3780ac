"""Chunked prefill's mixed step without writing the decode clock back (simulator speed).

With chunked prefill at or over saturation nearly every step is mixed: the running
requests that decode (the decode clock's members) plus one or two requests mid-prompt.
The general loop in :meth:`ContinuousPolicy._mixed_step` writes every member back
(``flush``) and walks them all, O(running) per step. When the requests mid-prompt are
the tail of ``running`` (they were admitted last, as they usually are) and the token
budget and the free KV blocks cover every decode and every next chunk, that loop would
give each decoder one token and each of those requests ``min(pending, budget left)``,
in running order, preempting nobody. :func:`clock_and_chunks` builds that same batch in
O(requests mid-prompt), the decoders staying on the clock (the batch's ``cohort``), and
returns None whenever any condition fails, so the general loop decides those steps.
"""

from __future__ import annotations

from simulator.policies.state import Batch, DecodeCohort, Sequence, ServerState
from simulator.shapes import StepShape


def clock_and_chunks(
    state: ServerState, max_num_batched_tokens: int
) -> tuple[list[tuple[Sequence, int]], Batch, int] | None:
    """(the next chunks of the requests mid-prompt, the decode batch of every clock member,
    the token budget left for admissions), with the KV for both allocated; or None (nothing
    changed) when the general loop must decide."""
    running, clock, kv = state.running, state.clock, state.kv
    members = clock.size
    tail = running[members:]
    if not members or not tail or any(s.clock is not None for s in tail):
        return None  # the tail holds every off-clock request only if none of it is a member
    budget = max_num_batched_tokens - members
    opening = clock.openings_now()
    free = kv.num_free - opening
    if budget < 0 or free < 0:
        return None
    prefill: list[tuple[Sequence, int]] = []
    for seq in tail:
        if budget <= 0:
            break
        n = min(seq.pending, budget)
        extra = kv.extra_for(seq.request_id, seq.num_computed + n)
        if extra > free:
            return None  # the general loop would preempt
        free -= extra
        prefill.append((seq, n))
        budget -= n
    kv.take(opening)
    for seq, n in prefill:
        kv.allocate(seq.request_id, seq.num_computed + n)
    min_left, at_min = clock.soonest_finish()
    shape = StepShape(num_decode_seqs=members, decode_context_tokens=clock.context_tokens(),
                      num_finished=at_min if min_left == 1 else 0)
    cohort = DecodeCohort(min_left, at_min, clock.openings_after())
    return prefill, Batch([], running[:members], shape, cohort=cohort), budget
