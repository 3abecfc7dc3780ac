"""Greedy speculative decoding of a step's decode rows: k draft passes, one verify pass.

For each decode row (its last known token at position ``n - 1`` not yet cached), one step:

1. **Draft**: the draft (the target's first ``L`` layers, engine/speculative_draft.py)
   runs ``k_i`` one-token batched passes, proposing ``d_1 .. d_k_i`` greedily. Pass ``j``
   feeds the token at position ``n - 1 + j`` (the last known token, then ``d_j``).
2. **Verify**: the target runs *one* batched pass over ``k_i + 1`` query tokens per row,
   ``[t_{n-1}, d_1 .. d_k_i]`` at positions ``n - 1 .. n - 1 + k_i`` (rows left-padded to the
   widest, engine/step_runner.py), and takes its greedy token ``g_j`` after each.
3. **Accept** the longest prefix with ``d_{j+1} == g_j``, ``a`` drafts, and emit
   ``g_0 .. g_a``: ``a + 1`` tokens, 1 .. k_i + 1. Each ``g_j`` is the target's greedy
   token given the tokens before it, all of which are the target's own greedy tokens, so
   the output is token for token plain greedy decoding of the target
   (tests/test_engine_speculative.py checks it).

The KV cache. The draft's layers are the target's first ``L`` layers fed the same tokens,
so their keys and values at a position are the target's: the draft reads and writes
layers ``0 .. L-1`` of the target's slot cache and keeps no cache of its own (no second
SlotCache, no draft prefill, no recompute). Its writes at positions ``n - 1 .. n + k_i -
2`` are all overwritten by the verify pass, which writes every layer at ``n - 1 .. n - 1
+ k_i``. Rollback is free: the cache is addressed by position and attention reads only
keys at or before each query's position (the step's mask), so the entries of rejected
drafts, at positions past the ``a + 1`` accepted, are simply overwritten by later steps.

This is greedy verification only (temperature 0, what the engine serves); sampled
verification (Leviathan et al. 2023, rejection sampling) is not implemented.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import torch

from engine.models import EngineModel
from engine.step_runner import BatchRunner, RowWork


@dataclass(slots=True)
class SpecStep:
    """What one speculative step of the decode rows produced, and what it took."""

    emitted: dict[int, list[int]]  # slot -> tokens emitted this step (1 .. drafts + 1)
    drafted: dict[int, int]  # slot -> draft tokens proposed (k_i)
    draft_s: float  # wall seconds of the draft passes (perf_counter)
    verify_s: float  # wall seconds of the target's verify pass
    draft_cpu_s: float = 0.0  # process CPU seconds of the draft passes (all threads)
    verify_cpu_s: float = 0.0  # and of the verify pass


def num_accepted(drafts: list[int], greedy: list[int]) -> int:
    """Drafts accepted: the longest prefix with ``drafts[j] == greedy[j]``, where
    ``greedy[j]`` is the target's token after the ``j``-th verified position."""
    a = 0
    while a < len(drafts) and drafts[a] == greedy[a]:
        a += 1
    return a


class SpecDecoder:
    """Runs decode rows speculatively with ``draft`` over ``runner``'s slot cache."""

    def __init__(self, runner: BatchRunner, draft: EngineModel) -> None:
        if draft.spec.num_layers > runner.cache.num_layers:
            raise ValueError(f"the draft has {draft.spec.num_layers} layers, the cache "
                             f"{runner.cache.num_layers}")
        self.runner = runner
        self.draft = draft

    def step(self, rows: list[RowWork], drafts: dict[int, int],
             tokens: list[list[int]]) -> SpecStep:
        """One step of decode ``rows`` (each computing its last known token), proposing
        ``drafts[slot]`` (>= 0) tokens for each row; see the module docstring."""
        for w in rows:
            if w.start != len(tokens[w.slot]) - 1:
                raise ValueError(f"slot {w.slot}: not a decode row ({w.start=}, "
                                 f"{len(tokens[w.slot])} tokens known)")
        rows = sorted(rows, key=lambda w: w.slot)
        if not rows:
            return SpecStep({}, {}, 0.0, 0.0)
        t0, c0 = time.perf_counter(), time.process_time()
        proposed = self._propose(rows, drafts, tokens)
        t1, c1 = time.perf_counter(), time.process_time()
        greedy = self._verify(rows, proposed, tokens)
        t2, c2 = time.perf_counter(), time.process_time()
        emitted = {}
        for w in rows:
            d, g = proposed[w.slot], greedy[w.slot]
            emitted[w.slot] = g[:num_accepted(d, g) + 1]
        return SpecStep(emitted, {w.slot: len(proposed[w.slot]) for w in rows}, t1 - t0, t2 - t1,
                        c1 - c0, c2 - c1)

    def _propose(self, rows: list[RowWork], drafts: dict[int, int],
                 tokens: list[list[int]]) -> dict[int, list[int]]:
        """The draft's greedy proposals, one batched pass per draft position."""
        proposed: dict[int, list[int]] = {w.slot: [] for w in rows}
        for j in range(max((drafts[w.slot] for w in rows), default=0)):
            active = [w for w in rows if drafts[w.slot] > j]
            spans = {w.slot: (w.start + j, [proposed[w.slot][-1] if j else tokens[w.slot][-1]])
                     for w in active}
            lo, hi = active[0].slot, active[-1].slot + 1
            nxt = self.runner.greedy(self.draft, lo, hi, spans)[:, 0].tolist()
            for w in active:
                proposed[w.slot].append(nxt[w.slot - lo])
        return proposed

    def _verify(self, rows: list[RowWork], proposed: dict[int, list[int]],
                tokens: list[list[int]]) -> dict[int, list[int]]:
        """The target's greedy token after each of a row's ``1 + drafts`` positions."""
        spans = {w.slot: (w.start, [tokens[w.slot][-1], *proposed[w.slot]]) for w in rows}
        width = max(len(ids) for _, ids in spans.values())
        lo, hi = rows[0].slot, rows[-1].slot + 1
        runner = self.runner
        greedy: torch.Tensor = runner.greedy(runner.em, lo, hi, spans, last=width)
        out = {}
        for slot, (_, ids) in spans.items():
            out[slot] = greedy[slot - lo, width - len(ids):].tolist()  # left padding dropped
        return out
