"""Stand-in profiles: a measured profile of a model with the same layer shapes is used,
named in the cost source, and corrected for the vocabulary's logits GEMM."""

from __future__ import annotations

from pathlib import Path

import pytest

from simulator.costs import lookup
from simulator.costs.from_config import cost_model_from_config, profile_path_for
from simulator.costs.profile import PROFILES_DIR, load_profile, save_profile
from simulator.costs.shape_equivalent import logits_delta_s, shape_equivalents
from simulator.shapes import StepShape
from simulator.specs.hardware import get_hardware
from simulator.specs.models import MODELS

H100, H200, L40S = get_hardware("h100-sxm"), get_hardware("h200"), get_hardware("l40s")
MISTRAL3, LLAMA8B = MODELS["mistral-7b-v0.3"], MODELS["llama-3.1-8b"]
DECODE = StepShape(num_decode_seqs=1, decode_context_tokens=1024)


def test_shape_equivalents_match_layers_not_vocab() -> None:
    names = [m.name for m in shape_equivalents(MISTRAL3)]
    assert names == ["mistral-7b", "llama-3-8b", "llama-3.1-8b"]  # nearest vocab first
    names = [m.name for m in shape_equivalents(MODELS["llama-3-70b"])]
    assert names == ["llama-3.1-70b", "llama-2-70b"]  # Llama-2-70B: GQA-8, same MLP
    assert shape_equivalents(MODELS["qwen2.5-7b"]) == []


def test_logits_correction_by_hand() -> None:
    # (32,768 - 128,256) rows x 4,096 x 2 bytes / (0.8 x 3,350 GB/s) = -0.29188 ms
    assert H100.bandwidth_gbps == 3350
    expected = (32768 - 128256) * 4096 * 2 / (0.8 * 3350e9)
    assert logits_delta_s(MISTRAL3, LLAMA8B, H100, 1) == pytest.approx(expected)
    assert expected == pytest.approx(-0.29188e-3, rel=1e-4)
    assert logits_delta_s(MISTRAL3, LLAMA8B, H100, 2) == pytest.approx(expected / 2)


def test_mistral_v03_uses_llama_profile_and_says_so() -> None:
    cost, used = cost_model_from_config({}, MISTRAL3, H100, 1, "bf16", "bf16")
    assert used.startswith("profile of llama-3.1-8b (same layer shapes; vocab 32,768 vs "
                           "128,256: logits GEMM -0.292 ms per step): "
                           "h100-sxm__llama-3.1-8b__bf16__tp1.json (measured")
    llama = load_profile(PROFILES_DIR / "h100-sxm__llama-3.1-8b__bf16__tp1.json")
    base = llama.build(LLAMA8B, H100).step_time(DECODE)
    delta = logits_delta_s(MISTRAL3, LLAMA8B, H100, 1)
    assert cost.step_time(DECODE) == pytest.approx(base + delta)
    assert -delta / base == pytest.approx(0.044, abs=0.005)  # docstring: 4.4% at batch 1


def test_same_vocab_stand_in_is_exact() -> None:
    model = MODELS["llama-3-70b"]
    cost, used = cost_model_from_config({}, model, H200, 2, "bf16", "bf16")
    assert used.startswith("profile of llama-3.1-70b (same layer shapes and vocab): "
                           "h200__llama-3.1-70b__bf16__tp2.json")
    own, _ = cost_model_from_config({}, MODELS["llama-3.1-70b"], H200, 2, "bf16", "bf16")
    assert cost.step_time(DECODE) == own.step_time(DECODE)


def test_a_prior_is_no_stand_in() -> None:
    # On an RTX 4090 llama-3.1-8b has only a prior: mistral-7b keeps its own prior.
    _, used = cost_model_from_config({}, MODELS["mistral-7b"], get_hardware("rtx4090"), 1,
                                     "bf16", "bf16")
    assert used == "rtx4090__mistral-7b__bf16__tp1.json (roofline prior, not measured)"
    # A model's own measured profile wins over a stand-in.
    path = profile_path_for({}, LLAMA8B, H100, 1, "bf16", "bf16")
    assert path == PROFILES_DIR / "h100-sxm__llama-3.1-8b__bf16__tp1.json"


def test_stack_folder_is_looked_in_first(tmp_path: Path, monkeypatch: pytest.MonkeyPatch
                                         ) -> None:
    monkeypatch.setattr(lookup, "STACKS_DIR", tmp_path)
    source = load_profile(PROFILES_DIR / "h200__llama-3.1-8b__bf16__tp1.json")
    mine = tmp_path / "vllm-v1" / "h100-sxm__llama-3.1-8b__bf16__tp1.json"
    save_profile(source, mine)  # an H200 table under an H100 name: easy to tell apart
    assert profile_path_for({}, LLAMA8B, H100, 1, "bf16", "bf16", stack="vllm-v1") == mine
    assert profile_path_for({}, LLAMA8B, H100, 1, "bf16", "bf16", stack="sglang") == (
        PROFILES_DIR / "h100-sxm__llama-3.1-8b__bf16__tp1.json")  # no folder: generic
    cost, _ = cost_model_from_config({}, LLAMA8B, H100, 1, "bf16", "bf16", stack="vllm-v1")
    assert cost.step_time(DECODE) == source.build(LLAMA8B, H200).step_time(DECODE)
    # A stand-in is looked up in the stack folder too.
    found = lookup.find_default_profile(MISTRAL3, H100, 1, "bf16", "bf16", stack="vllm-v1")
    assert found is not None and found[0] == mine and found[2] is LLAMA8B
