"""A named stack prices a model with its own kernel tables, through a shape-equivalent
model's profile when the model has none there, before another source's measurement of
the model itself; the cost source names the stand-in profile (simulator/costs/lookup.py)."""

from __future__ import annotations

import pytest

from simulator.costs.from_config import cost_model_from_config, profile_path_for
from simulator.costs.lookup import STACKS_DIR, tables_of
from simulator.costs.profile import PROFILES_DIR, load_profile
from simulator.shapes import StepShape
from simulator.specs.hardware import get_hardware
from simulator.specs.models import MODELS
from simulator.stack_presets import STACKS

H100 = get_hardware("h100-sxm")
LLAMA2, LLAMA31 = MODELS["llama-2-70b"], MODELS["llama-3.1-70b"]
DECODE = StepShape(num_decode_seqs=64, decode_context_tokens=64 * 1024)
SPLITWISE = PROFILES_DIR / "h100-sxm__llama-2-70b__fp16__tp4.json"
TRTLLM_70B = PROFILES_DIR / "h100-sxm__llama-3.1-70b__bf16__tp4.json"


def test_whose_tables_a_profile_holds() -> None:
    assert tables_of(TRTLLM_70B, load_profile(TRTLLM_70B)) == "trtllm"  # AIConfigurator
    vllm = STACKS_DIR / "vllm" / "h100-sxm__llama-3.1-70b__bf16__tp4.json"
    assert tables_of(vllm, load_profile(vllm)) == "vllm"  # the stack's folder
    assert tables_of(SPLITWISE, load_profile(SPLITWISE)) is None  # names no stack
    prior = PROFILES_DIR / "h100-sxm__llama-2-70b__bf16__tp4.json"
    assert tables_of(prior, load_profile(prior)) is None
    assert {p.profiles for p in STACKS["trtllm"]} == {"trtllm"}


def test_without_a_stack_the_models_own_measurement_wins() -> None:
    assert profile_path_for({}, LLAMA2, H100, 4, "fp16", "fp16") == SPLITWISE
    _, used = cost_model_from_config({}, LLAMA2, H100, 4, "fp16", "fp16")
    assert used.startswith("h100-sxm__llama-2-70b__fp16__tp4.json (measured: Mutinifni/")


def test_trtllm_prices_llama2_70b_with_its_own_llama31_table() -> None:
    assert profile_path_for({}, LLAMA2, H100, 4, "fp16", "fp16", stack="trtllm") == TRTLLM_70B
    cost, used = cost_model_from_config({}, LLAMA2, H100, 4, "fp16", "fp16", stack="trtllm")
    # logits GEMM: (32,000 - 128,256) x 8,192 x 2 bytes / 4 GPUs / (0.8 x 3,350 GB/s)
    delta = (32000 - 128256) * 8192 * 2 / 4 / (0.8 * 3350e9)
    assert delta == pytest.approx(-0.14712e-3, rel=1e-4)
    assert used.startswith(
        "profile of llama-3.1-70b (same layer shapes; vocab 32,000 vs 128,256: logits GEMM "
        "-0.147 ms per step), trtllm's kernel tables: h100-sxm__llama-3.1-70b__bf16__tp4.json "
        "(measured per operation by NVIDIA, composed by servesim: AIConfigurator 0.12.0")
    table = load_profile(TRTLLM_70B).build(LLAMA31, H100).step_time(DECODE)
    assert cost.step_time(DECODE) == pytest.approx(table + delta, rel=1e-12)
    # The model's own table under its own stack still comes first.
    assert profile_path_for({}, LLAMA31, H100, 4, "bf16", "bf16", stack="trtllm") == TRTLLM_70B


def test_sglang_prices_llama3_8b_tp2_with_its_composed_table() -> None:
    model = MODELS["llama-3-8b"]
    path = STACKS_DIR / "sglang" / "h100-sxm__llama-3.1-8b__bf16__tp2.json"
    cost, used = cost_model_from_config({}, model, H100, 2, "bf16", "bf16", stack="sglang")
    assert used.startswith("profile of llama-3.1-8b (same layer shapes and vocab), sglang's "
                           "kernel tables: stacks/sglang/h100-sxm__llama-3.1-8b__bf16__tp2.json")
    table = load_profile(path).build(MODELS["llama-3.1-8b"], H100).step_time(DECODE)
    assert cost.step_time(DECODE) == table  # same vocabulary: no correction
