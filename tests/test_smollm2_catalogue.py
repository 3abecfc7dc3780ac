"""SmolLM2-135M, the model ``servesim serve`` runs with trained weights, is also a model the
simulator knows: its catalogue entry, its names, and the cost source of a CPU run that has
no measured profile for it (simulator only, except the check against the engine's copy)."""

from __future__ import annotations

import json

import pytest

from simulator.deployment import resolve
from simulator.errors import ConfigError
from simulator.fingerprint import this_machine
from simulator.profile_cache import ENV_VAR, cached_profile_path
from simulator.specs.models import MODELS, catalogue_name, get_model, model_from_hf_config

SMOL = {"model": {"name": "smollm2-135m", "weight_dtype": "fp32"}, "hardware": {"gpu": "cpu"}}


def test_the_catalogue_entry_has_smollm2s_shapes_and_parameter_count():
    m = MODELS["smollm2-135m"]
    assert (m.num_layers, m.hidden_size, m.num_heads, m.num_kv_heads, m.head_dim) == (
        30,
        576,
        9,
        3,
        64,
    )
    assert (m.intermediate_size, m.vocab_size, m.max_context_tokens) == (1536, 49152, 8192)
    assert m.tie_embeddings and m.num_experts == 1
    # per layer: attention 2*576*576 + 2*576*192 = 884_736; MLP 3*576*1536 = 2_654_208;
    # norms 2*576 = 1_152 -> 3_540_096 x 30 = 106_202_880; embedding (tied) 49152*576 =
    # 28_311_552; final norm 576. 134_515_008: the count Hugging Face publishes.
    assert m.params_total == 106_202_880 + 28_311_552 + 576 == 134_515_008
    assert m.kv_bytes_per_token("bf16") == 2 * 30 * 3 * 64 * 2  # 23_040 bytes


@pytest.mark.parametrize(
    "name",
    [
        "smollm2-135m",
        "SmolLM2-135M",
        "HuggingFaceTB/SmolLM2-135M-Instruct",
        "smollm2-135m-instruct",
        "HuggingFaceTB/SmolLM2-135M",
    ],
)
def test_the_engines_names_for_it_are_one_catalogue_model(name):
    assert catalogue_name(name) == "smollm2-135m"
    assert get_model(name) is MODELS["smollm2-135m"]  # one spec, so one profile name


def test_unknown_names_still_list_the_catalogue():
    assert catalogue_name("smollm2-360m") is None
    with pytest.raises(ConfigError, match=r"'smollm2-360m' is not a known model.*smollm2-135m"):
        get_model("smollm2-360m")


def test_the_entry_matches_the_config_the_engine_loads():
    """The config.json transformers wrote from the GGUF metadata (engine/pretrained.py's
    cache); skipped where SmolLM2 was never converted on this machine."""
    pytest.importorskip("torch")
    from engine.pretrained import SMOLLM2, cache_root

    config = cache_root() / SMOLLM2 / "config.json"
    if not config.is_file():
        pytest.skip(f"{config} absent: SmolLM2 was not converted here")
    data = json.loads(config.read_text())
    assert model_from_hf_config(data, name=SMOLLM2) == MODELS[SMOLLM2]


def test_a_cpu_run_without_a_profile_says_its_prior_is_not_measured(tmp_path, monkeypatch):
    monkeypatch.setenv(ENV_VAR, str(tmp_path))  # an empty per-user cache
    dep = resolve(SMOL)
    assert dep.cost_source == (
        "roofline prior (built on the fly): NOT MEASURED: no cpu__smollm2-135m__fp32__tp1 "
        "profile ships and none was measured on this machine; "
        "`servesim calibrate --here --model smollm2-135m --threads 1` measures one"
    )
    assert (
        resolve(
            {
                **SMOL,
                "model": {"name": "HuggingFaceTB/SmolLM2-135M-Instruct", "weight_dtype": "fp32"},
            }
        ).cost_source
        == dep.cost_source
    )


def test_a_profile_calibrated_here_replaces_the_prior(tmp_path, monkeypatch):
    from smollm2_support import write_linear_profile

    monkeypatch.setenv(ENV_VAR, str(tmp_path))
    here = this_machine("cpu", 1)
    path = write_linear_profile(
        cached_profile_path(here, "cpu", "smollm2-135m", "fp32", 1), here, step_s=0.02
    )
    dep = resolve({**SMOL, "cost": {"jitter_cv": 0}})
    assert dep.cost_source.startswith(f"{path} (")
    assert "NOT MEASURED" not in dep.cost_source


def test_a_local_config_named_like_an_alias_is_that_config(tmp_path):
    """As in the engine (tests/test_smollm2_engine_names.py): a local model wins over an
    alias, so both sides mean the same model by the same words."""
    folder = tmp_path / "smollm2-135m-instruct"
    folder.mkdir()
    tiny = MODELS["tiny"]
    (folder / "config.json").write_text(
        json.dumps(
            {
                "num_hidden_layers": tiny.num_layers,
                "hidden_size": tiny.hidden_size,
                "num_attention_heads": tiny.num_heads,
                "num_key_value_heads": tiny.num_kv_heads,
                "intermediate_size": tiny.intermediate_size,
                "vocab_size": tiny.vocab_size,
                "max_position_embeddings": tiny.max_context_tokens,
            }
        )
    )
    spec = get_model("smollm2-135m-instruct", base_dir=tmp_path)
    assert (spec.name, spec.num_layers) == ("smollm2-135m-instruct", 4)
    assert get_model("smollm2-135m-instruct") is MODELS["smollm2-135m"]  # no such folder here
