"""A draft model made of the target's first layers (self-speculative, "early exit").

:func:`layer_draft` builds a causal LM whose embedding, first ``L`` decoder layers, final
norm and LM head *are* the target's modules (shared, not copied: the draft costs no
memory). It is the early-exit draft of LayerSkip (Elhoushi et al. 2024, "LayerSkip:
Enabling Early Exit Inference and Self-Speculative Decoding", arXiv:2404.16710) without
LayerSkip's training: SmolLM2's final norm and head read layer ``L``'s hidden state as
they would read the last one's (docs/speculative.md measures what that accepts).

Because layer ``i < L`` of the draft is layer ``i`` of the target fed the same tokens, its
keys and values at a position are the target's. So the draft needs no KV cache and no
prefill of its own: it reads and writes layers ``0 .. L-1`` of the target's slot cache
(engine/speculative.py says why the positions it writes ahead are harmless).
"""

from __future__ import annotations

import copy
from dataclasses import replace
from typing import Any

import torch
from transformers import AutoModelForCausalLM

from engine.models import EngineModel
from engine.segment_attention import NAME, use_segment_attention


def layer_draft(em: EngineModel, num_layers: int) -> EngineModel:
    """The draft made of ``em``'s first ``num_layers`` layers (modules shared with ``em``).

    Raises ValueError unless ``1 <= num_layers <= `` the target's layers. ``em`` is switched
    to the engine's attention (engine/segment_attention.py), as the batch runner does.
    """
    target: Any = em.model
    total = target.config.num_hidden_layers
    if not 1 <= num_layers <= total:
        raise ValueError(f"{num_layers=} must be in 1..{total} (the target's layers)")
    use_segment_attention(target)
    config = copy.deepcopy(target.config)
    config.num_hidden_layers = num_layers
    with torch.device("meta"):  # no weights allocated: every module is replaced below
        draft: Any = AutoModelForCausalLM.from_config(config, attn_implementation=NAME)
    body, inner = draft.model, target.model
    body.embed_tokens = inner.embed_tokens
    body.layers = inner.layers[:num_layers]  # a new ModuleList holding the same layers
    body.norm = inner.norm
    body.rotary_emb = inner.rotary_emb
    draft.lm_head = target.lm_head
    spec = replace(em.spec, name=f"{em.spec.name}-first{num_layers}", num_layers=num_layers)
    return EngineModel(model=draft.eval(), spec=spec, dtype=em.dtype, device=em.device)
