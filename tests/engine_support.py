"""Helpers for tests that run the engine (torch imported): a cache-free greedy reference."""

from __future__ import annotations

import torch


@torch.inference_mode()
def greedy(em, ids: list[int], n: int) -> list[int]:  # noqa: ANN001 (an EngineModel)
    """Greedy tokens by full forward passes (no cache): what the server must return."""
    seq, out = list(ids), []
    for _ in range(n):
        out.append(int(em.model(input_ids=torch.tensor([seq])).logits[0, -1].argmax()))
        seq.append(out[-1])
    return out
