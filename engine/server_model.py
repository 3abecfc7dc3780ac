"""Which model ``servesim serve --model NAME`` serves, and how its text is tokenized.

- A pretrained model that ``engine.pretrained`` knows (e.g. ``smollm2-135m``): its real
  weights and tokenizer, via ``load_engine_model`` and ``load_tokenizer``.
- Otherwise a catalogue name (``tiny``, ``llama-3.1-8b``, ...) or a config.json path:
  random weights (``engine.models.build_model``) and the byte-level codec of
  :mod:`engine.server_text`, since such a model has no tokenizer.

An unknown name raises :class:`~simulator.errors.ConfigError` naming both lists.
"""

from __future__ import annotations

import importlib
from types import ModuleType

from engine.models import EngineModel, build_model
from engine.server import ServedModel
from engine.server_text import ByteCodec, HFCodec, TextCodec
from simulator.errors import ConfigError


def _pretrained() -> ModuleType | None:
    """``engine.pretrained`` if it is installed (it is being added alongside)."""
    try:
        return importlib.import_module("engine.pretrained")
    except ModuleNotFoundError as e:
        if e.name != "engine.pretrained":
            raise
        return None


def load_served_model(source: str, *, dtype: str = "fp32", device: str = "cpu",
                      seed: int = 0) -> tuple[EngineModel, ServedModel]:
    """The model for ``source`` and what the HTTP layer needs to serve it."""
    codec: TextCodec
    pretrained = _pretrained()
    why_not = "engine.pretrained is not installed"
    em: EngineModel | None = None
    if pretrained is not None:
        try:
            em = pretrained.load_engine_model(source, dtype, device)
            codec = HFCodec(pretrained.load_tokenizer(source), f"{source} tokenizer")
        except (ConfigError, KeyError, FileNotFoundError) as e:
            why_not = str(e)
    if em is None:
        try:
            em = build_model(source, dtype=dtype, device=device, seed=seed)
        except ConfigError as e:
            raise ConfigError(f"--model {source!r}: not a pretrained model ({why_not}), and "
                              f"not a catalogue name or config.json ({e})") from None
        codec = ByteCodec()
    served = ServedModel(name=source, codec=codec, vocab_size=em.vocab_size,
                         max_context=em.spec.max_context_tokens)
    return em, served
