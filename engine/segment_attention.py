"""Packed prefill: several prompts or chunks in one row, attention computed per segment.

vLLM runs prefill chunks of different lengths as one ragged batch (varlen attention), so a
step costs what its tokens cost. A dense, left-padded batch would instead compute
``rows x longest`` tokens, and the simulator, which prices ``P = sum of chunk lengths``,
would be right about vLLM and wrong about the engine. So the engine packs the chunks of
a step into one row of ``P`` tokens and computes attention segment by segment: each
segment's queries against its own slot's cached keys (``0 .. position``), which the
slot cache has just written (engine/slot_cache.py, packed mode).

This is an attention implementation registered with transformers under ``NAME``. Without
``segments`` in the forward's keyword arguments it is plain SDPA (the batched decode path
and everything else), and its mask function is SDPA's.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
from transformers import AttentionInterface, PreTrainedModel
from transformers.integrations.sdpa_attention import sdpa_attention_forward
from transformers.masking_utils import AttentionMaskInterface, sdpa_mask

NAME = "servesim_segments"


@dataclass(slots=True, frozen=True)
class Segment:
    """One request's tokens in the packed row."""

    slot: int  # its row in the slot cache
    q0: int  # first index in the packed row
    q1: int  # one past the last
    start: int  # position of its first token (= tokens already cached)


def segment_attention(module: torch.nn.Module, query: torch.Tensor, key: torch.Tensor,
                      value: torch.Tensor, attention_mask: torch.Tensor | None,
                      scaling: float | None = None, dropout: float = 0.0,
                      segments: list[Segment] | None = None,
                      **kwargs: Any) -> tuple[torch.Tensor, None]:
    """Attention per segment (packed) or plain SDPA; returns ``(B, N, heads, head_dim)``.

    Packed: ``query`` is ``(1, Hq, N, D)``; ``key``/``value`` are the slot cache's whole
    buffers ``(slots, Hkv, capacity + 1, D)`` with this step's tokens already written.
    """
    if segments is None:
        out, weights = sdpa_attention_forward(module, query, key, value, attention_mask,
                                              scaling=scaling, dropout=dropout, **kwargs)
        return out, None
    gqa = query.shape[1] != key.shape[1]
    parts = []
    for seg in segments:
        n = seg.q1 - seg.q0
        length = seg.start + n
        q = query[:, :, seg.q0:seg.q1]  # (1, Hq, n, D)
        k = key[seg.slot:seg.slot + 1, :, :length]  # (1, Hkv, L, D)
        v = value[seg.slot:seg.slot + 1, :, :length]
        if seg.start == 0:
            o = F.scaled_dot_product_attention(q, k, v, is_causal=True, scale=scaling,
                                               enable_gqa=gqa)
        else:  # a chunk after cached context: query i (position start + i) sees keys <= it
            pos = torch.arange(seg.start, length, device=q.device)[:, None]  # (n, 1)
            mask = torch.arange(length, device=q.device)[None, :] <= pos  # (n, L)
            o = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, scale=scaling,
                                               enable_gqa=gqa)
        parts.append(o)
    return torch.cat(parts, dim=2).transpose(1, 2).contiguous(), None


def use_segment_attention(model: PreTrainedModel) -> None:
    """Register the implementation (idempotent) and switch ``model`` to it."""
    if NAME not in AttentionInterface._global_mapping:
        AttentionInterface.register(NAME, segment_attention)
        AttentionMaskInterface.register(NAME, sdpa_mask)
    if model.config._attn_implementation != NAME:
        model.set_attn_implementation(NAME)
