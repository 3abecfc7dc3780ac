"""Running one scheduled batch as real forward passes over the slot cache.

A batch (from the shared policies) says which sequences compute how many tokens. Each
row's new tokens are left-padded to the widest row; explicit position ids and a 4-D
attention mask (a query at position ``p`` sees its own row's keys ``0 .. p``) let rows
of different context lengths share one forward. Padding tokens write to the cache's
scratch column and attend key 0 only; their outputs are discarded.

Rows that compute one token (decodes) run as one batched forward. Rows that compute
many (prefill chunks) run as one *packed* forward: their tokens concatenated in a single
row, attention per segment (engine/segment_attention.py), so a step computes exactly its
``P`` tokens as vLLM's ragged batches do, not ``rows x longest``. A mixed step is those
two forwards. A padded static/dynamic batch runs as one batched forward over all its
rows, padding and finished rows included, as HF ``generate`` does.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from engine.models import EngineModel
from engine.profiler import forward_last, forward_names
from engine.segment_attention import Segment, use_segment_attention
from engine.slot_cache import SlotCache
from simulator.policies import Batch


@dataclass(slots=True)
class RowWork:
    """What one slot computes this step."""

    slot: int
    start: int  # position of its first new token (= tokens computed before the step)
    count: int  # new tokens


def batch_work(batch: Batch, slot_of: dict[int, int]) -> list[RowWork]:
    """The rows of ``batch`` in slot order (read before ``complete`` changes the counters)."""
    work = [RowWork(slot_of[s.request_id], s.num_computed, n) for s, n in batch.prefill]
    work += [RowWork(slot_of[s.request_id], s.num_computed, 1) for s in batch.decode]
    return sorted(work, key=lambda w: w.slot)


@dataclass(slots=True, frozen=True)
class Forward:
    """One forward pass of a step: a batched slot range, or packed rows."""

    rows: list[RowWork]
    lo: int = 0  # batched: slots lo .. hi - 1 (slots without work are padding rows)
    hi: int = 0
    packed: bool = False


def forward_groups(work: list[RowWork], padded_rows: int | None,
                   packed: set[int] | None = None) -> list[Forward]:
    """The forwards that run ``work``: decodes batched, prefill chunks packed.

    ``padded_rows``: the padded batch's row count (all of its slots run batched together).
    """
    if padded_rows is not None:
        return [Forward(work, 0, padded_rows)]
    out = []
    packed = packed or set()  # slots of one-token rows that must run packed (prefix_kv.py)
    ones = [w for w in work if w.count == 1 and w.slot not in packed]
    if ones:
        out.append(Forward(ones, ones[0].slot, ones[-1].slot + 1))
    many = [w for w in work if w.count > 1 or w.slot in packed]
    if many:
        out.append(Forward(many, packed=True))
    return out


class BatchRunner:
    """Turns a batch into forward passes on ``model`` and returns the tokens they emit."""

    def __init__(self, em: EngineModel, cache: SlotCache) -> None:
        self.em = em
        self.cache = cache
        use_segment_attention(em.model)

    def forward(self, f: Forward, tokens: list[list[int]]) -> dict[int, int]:
        """Run one forward of a step; ``{slot: greedy next token}`` as :meth:`run` says."""
        if f.packed:
            return self.run_packed(f.rows, tokens)
        return self.run(f.lo, f.hi, f.rows, tokens)

    @torch.inference_mode()
    def run_packed(self, rows: list[RowWork], tokens: list[list[int]]) -> dict[int, int]:
        """Run ``rows`` as one packed row (see the module docstring); emitted tokens by slot."""
        ids: list[int] = []
        positions: list[int] = []
        slots: list[int] = []
        segments = []
        for w in rows:
            q0 = len(ids)
            ids += tokens[w.slot][w.start:w.start + w.count]
            positions += range(w.start, w.start + w.count)
            slots += [w.slot] * w.count
            segments.append(Segment(w.slot, q0, len(ids), w.start))
        pos = torch.tensor([positions])
        self.cache.prepare_packed(torch.tensor(slots), pos[0])
        dev = self.em.device
        ends = torch.tensor([seg.q1 - 1 for seg in segments], device=dev)
        model: Any = self.em.model
        model_cls: Any = type(model)
        cache_kw, keep = forward_names(model_cls)
        # A 4-D mask is passed through untouched (segment attention ignores it), so
        # transformers builds no mask of its own from the cache.
        unused_mask = torch.ones(1, 1, 1, 1, dtype=torch.bool, device=dev)
        logits = model(input_ids=torch.tensor([ids], device=dev), position_ids=pos.to(dev),
                       attention_mask=unused_mask, use_cache=True, segments=segments,
                       **{cache_kw: self.cache, keep or "logits_to_keep": ends}).logits
        nxt = logits[0].argmax(-1).tolist()  # (segments,)
        return {w.slot: nxt[i] for i, w in enumerate(rows)
                if w.start + w.count == len(tokens[w.slot])}

    def run(self, lo: int, hi: int, rows: list[RowWork],
            tokens: list[list[int]]) -> dict[int, int]:
        """Run the rows of slots ``lo .. hi - 1`` (slots without work are padding).

        ``tokens[slot]`` holds the slot's known tokens (prompt, then outputs). Returns
        ``{slot: greedy next token}`` for every row whose step computes its last known token.
        """
        spans = {w.slot: (w.start, tokens[w.slot][w.start:w.start + w.count]) for w in rows}
        nxt = self.greedy(self.em, lo, hi, spans)[:, -1].tolist()  # last column: real
        return {w.slot: nxt[w.slot - lo] for w in rows
                if w.start + w.count == len(tokens[w.slot])}

    @torch.inference_mode()
    def greedy(self, em: EngineModel, lo: int, hi: int, spans: dict[int, tuple[int, list[int]]],
               last: int = 1) -> torch.Tensor:
        """One batched forward of ``em`` over slots ``lo .. hi - 1``: ``spans[slot] = (start,
        ids)`` puts ``ids`` at positions ``start ..`` (slots without a span are padding).

        Returns the greedy tokens of the last ``last`` input columns, ``(hi - lo, last)``.
        ``em`` may be a draft sharing the cache's first layers (engine/speculative.py).
        """
        ids, pos, mask = self.batched_inputs(lo, hi, spans)
        dev = em.device
        logits = forward_last(em.model, ids.to(dev), mask.to(dev), pos.to(dev), self.cache,
                              last)
        return logits.argmax(-1)

    def batched_inputs(self, lo: int, hi: int, spans: dict[int, tuple[int, list[int]]],
                       ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Left-padded ids and positions (B, W) and the (B, 1, W, L) mask of a batched
        forward, with the cache prepared to write each token at its position."""
        width = max(len(ids) for _, ids in spans.values())
        num = hi - lo
        scratch = self.cache.capacity
        ids = torch.zeros(num, width, dtype=torch.long)
        pos = torch.zeros(num, width, dtype=torch.long)
        cols = torch.full((num, width), scratch, dtype=torch.long)
        length = 1
        for slot, (start, row_ids) in spans.items():
            b, pad, count = slot - lo, width - len(row_ids), len(row_ids)
            ids[b, pad:] = torch.tensor(row_ids)
            span = torch.arange(start, start + count)
            pos[b, pad:] = span
            cols[b, pad:] = span
            length = max(length, start + count)
        # (B, 1, W, L): a query at position p attends its row's keys 0..p (padding: key 0).
        mask = (torch.arange(length)[None, None, :] <= pos[:, :, None])[:, None]
        self.cache.prepare(lo, cols, length)
        return ids, pos, mask
