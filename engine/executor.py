"""Running one scheduled batch as real forward passes over the slot cache.

A batch (from the shared policies) says which sequences compute how many tokens. Each
row's new tokens are left-padded to the widest row; explicit position ids and a 4-D
attention mask (a query at position ``p`` sees its own row's keys ``0 .. p``) let rows
of different context lengths share one forward. Padding tokens write to the cache's
scratch column and attend key 0 only; their outputs are discarded.

Rows that compute one token (decodes) and rows that compute many (prefill chunks) run
as two forwards, so decode rows are not padded to a chunk's width (vLLM packs the two
into one ragged batch; with dense tensors padding would cost ``rows x chunk`` tokens).
A padded static/dynamic batch runs as one forward over all its rows, finished rows
included, as HF ``generate`` does.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from engine.models import EngineModel
from engine.profiler import _forward
from engine.slot_cache import SlotCache
from simulator.policies import Batch, Sequence


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


def forward_groups(work: list[RowWork], padded_rows: int | None) -> list[tuple[int, int,
                                                                               list[RowWork]]]:
    """(lo, hi, rows) slot ranges to run as separate forwards.

    ``padded_rows``: the padded batch's row count (all of its slots run together).
    """
    if padded_rows is not None:
        return [(0, padded_rows, work)]
    groups = []
    for part in ([w for w in work if w.count == 1], [w for w in work if w.count > 1]):
        if part:
            groups.append((part[0].slot, part[-1].slot + 1, part))
    return groups


class BatchRunner:
    """Turns a batch into forward passes on ``model`` and returns the tokens they emit."""

    def __init__(self, em: EngineModel, cache: SlotCache) -> None:
        self.em = em
        self.cache = cache

    @torch.inference_mode()
    def run(self, lo: int, hi: int, rows: list[RowWork],
            tokens: list[list[int]]) -> dict[int, int]:
        """Run the rows of slots ``lo .. hi - 1`` (slots without work are padding).

        ``tokens[slot]`` holds the slot's known tokens (prompt, then outputs). Returns
        ``{slot: greedy next token}`` for every row whose step computes its last known token.
        """
        width = max(w.count for w in rows)
        num = hi - lo
        by_slot = {w.slot: w for w in rows}
        scratch = self.cache.capacity
        ids = torch.zeros(num, width, dtype=torch.long)
        pos = torch.zeros(num, width, dtype=torch.long)
        cols = torch.full((num, width), scratch, dtype=torch.long)
        length = 1
        for slot, w in by_slot.items():
            b, pad = slot - lo, width - w.count
            ids[b, pad:] = torch.tensor(tokens[slot][w.start:w.start + w.count])
            span = torch.arange(w.start, w.start + w.count)
            pos[b, pad:] = span
            cols[b, pad:] = span
            length = max(length, w.start + w.count)
        # (B, 1, W, L): a query at position p attends its row's keys 0..p (padding: key 0).
        mask = (torch.arange(length)[None, None, :] <= pos[:, :, None])[:, None]
        self.cache.prepare(lo, cols, length)
        dev = self.em.device
        logits = _forward(self.em.model, ids.to(dev), mask.to(dev), pos.to(dev), self.cache)
        nxt = logits[:, -1, :].argmax(-1).tolist()  # (B,) last column: real for every row
        return {slot: nxt[slot - lo] for slot, w in by_slot.items()
                if w.start + w.count == len(tokens[slot])}


def needed_capacity(seqs: list[Sequence]) -> int:
    """Cache positions the longest of ``seqs`` will ever use."""
    return max((s.prompt_tokens + s.output_tokens for s in seqs), default=1)
