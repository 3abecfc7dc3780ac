"""TensorRT-LLM 0.10's extra time on a step that prefills (simulator/costs/prefill_pass.py).

The model: ``LinearCost(step_s=0.01)`` (10 ms a step) and 2.5 ms more on a step that only
prefills: 12.5 ms for a 200-token prefill; 10 ms for a decode-only step, or for a prefill
with 3 decode rows beside it. One weight pass of Llama-3-8B in 16 bits (8,030,261,248 parameters x 2
bytes) on one H100 SXM (3,350 GB/s): 4.794 ms; on two, half.
"""

from __future__ import annotations

import pickle

import numpy as np
import pytest
from helpers import step_shapes

from simulator.costs.base import decode_pricer
from simulator.costs.from_config import cost_model_from_config
from simulator.costs.linear import LinearCost
from simulator.costs.prefill_pass import PrefillPassCost, weight_pass_s, with_prefill_pass
from simulator.deployment import resolve
from simulator.errors import ConfigError
from simulator.shapes import StepShape, StepShapes
from simulator.specs.hardware import get_hardware
from simulator.specs.models import get_model
from simulator.stack_presets import STACKS, TRTLLM_010_PREFILL_PASSES, TRTLLM_010_PREFILL_SCALE

BASE = LinearCost(step_s=0.01)


def test_a_step_that_only_prefills_pays_it_and_others_do_not() -> None:
    cost = with_prefill_pass(BASE, 2.5e-3)
    assert isinstance(cost, PrefillPassCost)
    assert cost.step_time(StepShape(num_prefill_tokens=200)) == pytest.approx(0.0125, abs=1e-12)
    assert cost.step_time(StepShape(num_prefill_tokens=1, num_decode_seqs=3)) == 0.01
    assert cost.step_time(StepShape(num_decode_seqs=64)) == 0.01
    assert with_prefill_pass(BASE, 0.0) is BASE


def test_array_scalar_and_decode_pricer_agree() -> None:
    cost = with_prefill_pass(BASE, 2.5e-3)
    shapes = step_shapes([0, 200, 7000, 0], [1, 0, 5, 50], [100, 0, 900, 5000])
    assert list(cost.step_times(shapes)) == pytest.approx([0.01, 0.0125, 0.01, 0.01],
                                                          abs=1e-15)
    pricer, inner = decode_pricer(cost), decode_pricer(BASE)
    assert pricer is not None and inner is not None
    assert pricer(7, 700, 0) == inner(7, 700, 0)  # decode-only steps: nothing added
    assert pickle.loads(pickle.dumps(cost)).pass_s == 2.5e-3


def test_one_weight_pass_by_hand() -> None:
    model, h100 = get_model("llama-3-8b"), get_hardware("h100-sxm")
    one = model.weight_bytes("fp16") / 3350e9
    assert weight_pass_s(model, h100, 1, "bf16") == pytest.approx(one, rel=1e-12)
    assert weight_pass_s(model, h100, 2, "fp16") == pytest.approx(one / 2, rel=1e-12)
    # FP8: the embedding and lm_head (2 x 128,256 x 4,096 weights) stay 16-bit, so half
    # a pass plus half of their 16-bit bytes: 9,080,934,400 B / 3,350 GB/s = 2.711 ms
    assert weight_pass_s(model, h100, 1, "fp8") == pytest.approx(
        one / 2 + 2 * 128_256 * 4_096 / 3350e9, rel=1e-12)
    assert weight_pass_s(model, h100, 1, "fp8") == pytest.approx(9_080_934_400 / 3350e9)


def test_only_trtllm_0_10_pays_it() -> None:
    one = weight_pass_s(get_model("llama-3-8b"), get_hardware("h100-sxm"), 1, "bf16")
    want = (f"each prefill step x {TRTLLM_010_PREFILL_SCALE:.3g} and "
            f"{TRTLLM_010_PREFILL_PASSES * one * 1e3:.3g} ms more")
    point = {"model": {"name": "llama-3-8b"}, "hardware": {"gpu": "h100-sxm"}}
    for preset in STACKS["trtllm"]:
        dep = resolve({**point, "stack": {"name": "trtllm", "version": preset.version}})
        assert (want in dep.cost_source) == (preset.version == "0.10"), preset.version
        assert (preset.prefill_weight_passes > 0) == (preset.version == "0.10")
        assert (preset.prefill_scale != 1.0) == (preset.version == "0.10")


def test_a_scenario_sets_its_own_or_turns_it_off() -> None:
    model, hw = get_model("llama-3.1-8b"), get_hardware("h100-sxm")
    cost, used = cost_model_from_config({"form": "linear", "step_s": 0.01,
                                         "prefill_pass_s": 0.004}, model, hw, 1, "bf16", "bf16")
    assert cost.step_time(StepShape(num_prefill_tokens=100)) == pytest.approx(0.014, abs=1e-12)
    assert "each prefill step 4 ms more" in used
    point = {"model": {"name": "llama-3-8b"}, "hardware": {"gpu": "h100-sxm"},
             "stack": {"name": "trtllm", "version": "0.10"}}
    no_pass = resolve({**point, "cost": {"prefill_pass_s": 0}})  # the stack's scale stays
    assert f"each prefill step x {TRTLLM_010_PREFILL_SCALE:.3g} + host" in no_pass.cost_source
    off = resolve({**point, "cost": {"prefill_pass_s": 0, "prefill_scale": 1}})
    assert "each prefill step" not in off.cost_source


def test_a_scale_lengthens_only_the_steps_that_only_prefill() -> None:
    # 10 ms x 1.2 + 2.5 ms = 14.5 ms prefilling alone; beside decode rows, or decoding, 10
    cost = with_prefill_pass(BASE, 2.5e-3, 1.2)
    assert cost.step_time(StepShape(num_prefill_tokens=200)) == pytest.approx(0.0145, abs=1e-12)
    assert cost.step_time(StepShape(num_prefill_tokens=1, num_decode_seqs=3)) == 0.01
    assert cost.step_time(StepShape(num_decode_seqs=64)) == 0.01
    shapes = StepShapes(num_prefill_tokens=np.array([0, 200]), prefill_attn_work=np.zeros(2),
                        num_decode_seqs=np.array([4, 0]),
                        decode_context_tokens=np.array([400, 0]),
                        num_admitted=np.zeros(2, dtype=np.int64),
                        num_finished=np.zeros(2, dtype=np.int64))
    assert cost.step_times(shapes).tolist() == [
        cost.step_time(StepShape(num_decode_seqs=4, decode_context_tokens=400)),
        cost.step_time(StepShape(num_prefill_tokens=200))]
    only = with_prefill_pass(BASE, 0.0, 1.2)  # a scale alone: 12 ms
    assert only.step_time(StepShape(num_prefill_tokens=200)) == pytest.approx(0.012, abs=1e-12)
    assert with_prefill_pass(BASE, 0.0, 1.0) is BASE


def test_a_scenarios_scale_is_checked_and_named() -> None:
    model, hw = get_model("llama-3.1-8b"), get_hardware("h100-sxm")
    cost, used = cost_model_from_config({"form": "linear", "step_s": 0.01,
                                         "prefill_scale": 1.5}, model, hw, 1, "bf16", "bf16")
    assert cost.step_time(StepShape(num_prefill_tokens=100)) == pytest.approx(0.015, abs=1e-12)
    assert used.endswith("each prefill step x 1.5")
    with pytest.raises(ConfigError, match=r"cost\.prefill_scale"):
        cost_model_from_config({"form": "linear", "step_s": 0.01, "prefill_scale": 5},
                               model, hw, 1, "bf16", "bf16")
