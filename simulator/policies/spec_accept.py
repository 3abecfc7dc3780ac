"""Applying a speculative step's outcome: each decode row's emitted tokens (step 3 of 3).

Kept apart from :mod:`~simulator.policies.speculative` (which builds the step) because
:func:`~simulator.policies.step.complete` calls it and that module imports ``step``.
"""

from __future__ import annotations

from simulator.policies.state import Batch, Sequence, ServerState


def apply_accepted(state: ServerState, batch: Batch, accepted: list[int] | None, end_s: float,
                   finished: list[Sequence]) -> None:
    """Advance each speculative decode row by the tokens it emitted (``accepted[i]`` for
    ``batch.decode[i]``), stamp what finished at ``end_s`` (appended to ``finished``) and
    give back the KV blocks of rejected positions."""
    rows = batch.decode
    if accepted is None or len(accepted) != len(rows):
        raise ValueError(f"a speculative step needs the tokens each of its {len(rows)} decode "
                         f"rows emitted; got {accepted!r}")
    kv = state.kv
    for seq, a, s in zip(rows, accepted, batch.spec_drafts, strict=True):
        if not 1 <= a <= 1 + s:
            raise ValueError(f"request {seq.request_id}: emitted {a} tokens, must be in "
                             f"1..{1 + s} (it verified {s} drafts)")
        seq.num_computed += a
        seq.num_generated += a
        if seq.num_generated == seq.output_tokens:
            seq.finish_s = end_s
            finished.append(seq)
        else:
            kv.trim(seq.request_id, seq.num_computed)
