"""Which model ``servesim serve --model NAME`` serves, and how its text is tokenized.

``engine.pretrained.load_engine_model`` decides the weights: SmolLM2-135M
(``smollm2-135m``), a local safetensors directory, else random weights for a catalogue
name or config.json (``engine.models.build_model``). ``load_tokenizer`` gives the
tokenizer that goes with them, or None for random weights: those are served with the
byte-level codec of :mod:`engine.server.text`. Chat prompts use the tokenizer's chat
template, else the fallback of :mod:`engine.server.chat`. An unknown name raises
:class:`~simulator.errors.ConfigError` listing what is known.
"""

from __future__ import annotations

import importlib
from types import ModuleType

from engine.models import EngineModel, build_model
from engine.server.app import ServedModel
from engine.server.chat import fallback_template, tokenizer_template
from engine.server.text import ByteCodec, HFCodec, TextCodec
from simulator.errors import ConfigError


def _pretrained() -> ModuleType | None:
    """``engine.pretrained``, or None where it is missing (random weights only)."""
    try:
        return importlib.import_module("engine.pretrained")
    except ModuleNotFoundError as e:
        if e.name != "engine.pretrained":
            raise
        return None


def load_served_model(source: str, *, dtype: str = "fp32", device: str = "cpu",
                      seed: int = 0) -> tuple[EngineModel, ServedModel]:
    """The model for ``source`` and what the HTTP layer needs to serve it."""
    pretrained = _pretrained()
    try:
        if pretrained is None:
            em, tokenizer = build_model(source, dtype=dtype, device=device, seed=seed), None
        else:
            em = pretrained.load_engine_model(source, dtype=dtype, device=device, seed=seed)
            tokenizer = pretrained.load_tokenizer(source)
    except ConfigError as e:
        raise ConfigError(f"--model {source!r}: {e}") from None
    codec: TextCodec = ByteCodec() if tokenizer is None else HFCodec(
        tokenizer, f"{source} tokenizer")
    served = ServedModel(name=source, codec=codec, vocab_size=em.vocab_size,
                         max_context=em.spec.max_context_tokens,
                         chat_template=tokenizer_template(tokenizer) or fallback_template)
    return em, served
