"""Timing the serving loop's own steps: what ``servesim profile`` measures.

The profile must price the steps the serving loop runs, so each shape is timed through
the same :class:`~engine.step_runner.BatchRunner` over the same :class:`SlotCache`
(4-D mask, in-place writes, left-padded inputs), not a bare ``model.forward`` with a
``DynamicCache``: on one CPU thread the two differ by up to ~15% on long prefills.

    prefill (b, p):        b rows compute p tokens each from position 0 (one forward)
    decode  (b, c):        b rows with c cached tokens compute one token each (one forward)
    mixed   (b, n | c):    b decode rows at context c plus one prefill chunk of n tokens:
                           two forwards, as the serving loop runs a mixed step

Every step writes the same cache columns each time, so repeats need no reset. Key and
value contents do not change the time, so the cache holds zeros.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from engine.models import TORCH_DTYPES, EngineModel
from engine.slot_cache import SlotCache
from engine.step_runner import BatchRunner, RowWork, forward_groups


def step_for_shape(em: EngineModel, phase: str, batch: int, length: int, *,
                   context: int = 0, generator: torch.Generator | None = None
                   ) -> Callable[[], object]:
    """A no-argument callable running one serving-loop step of the given shape.

    ``length`` is the prompt length (prefill), the context (decode) or the chunk (mixed,
    whose decode rows have ``context`` cached tokens).
    """
    if phase == "prefill":
        rows = [RowWork(i, 0, length) for i in range(batch)]
        need = length
    elif phase == "decode":
        rows = [RowWork(i, length, 1) for i in range(batch)]
        need = length + 1
    elif phase == "mixed":
        rows = [RowWork(i, context, 1) for i in range(batch)] + [RowWork(batch, 0, length)]
        need = max(context + 1, length)
    else:
        raise ValueError(f"phase={phase!r} must be prefill, decode or mixed")
    spec = em.spec
    cache = SlotCache(spec.num_layers, spec.num_kv_heads, spec.head_dim, slots=len(rows),
                      capacity=need, dtype=TORCH_DTYPES[em.dtype], device=em.device)
    runner = BatchRunner(em, cache)
    ids = torch.randint(1, em.vocab_size, (len(rows), need), generator=generator).tolist()
    tokens = [row[:w.start + w.count] for row, w in zip(ids, rows, strict=True)]
    groups = forward_groups(rows, None)

    def step() -> None:
        for forward in groups:
            runner.forward(forward, tokens)

    return step
