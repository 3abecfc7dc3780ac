"""A factor on every step with decode rows (simulator/costs/prefill_pass.py, decode_scale).

The model: ``LinearCost(step_s=0.01)`` (10 ms a step) at ``decode_scale = 1.2``: a decode
step or a step that mixes a prompt with decode rows takes 12 ms; a step that only prefills
keeps its 10 ms. Under ``prefill_scale = 1.5`` too, that step takes 15 ms.
"""

from __future__ import annotations

import pickle

import pytest
from helpers import step_shapes

from simulator.costs.base import decode_pricer
from simulator.costs.from_config import cost_model_from_config
from simulator.costs.linear import LinearCost
from simulator.costs.prefill_pass import PrefillPassCost, with_prefill_pass
from simulator.deployment import resolve
from simulator.errors import ConfigError
from simulator.shapes import StepShape
from simulator.specs.hardware import get_hardware
from simulator.specs.models import get_model

BASE = LinearCost(step_s=0.01)


def test_steps_with_decode_rows_are_scaled_and_prefill_alone_is_not() -> None:
    cost = with_prefill_pass(BASE, 0.0, 1.0, 1.2)
    assert isinstance(cost, PrefillPassCost)
    assert cost.step_time(StepShape(num_decode_seqs=64)) == pytest.approx(0.012, abs=1e-15)
    assert cost.step_time(StepShape(num_prefill_tokens=1, num_decode_seqs=3)) == pytest.approx(
        0.012, abs=1e-15)
    assert cost.step_time(StepShape(num_prefill_tokens=200)) == 0.01
    assert with_prefill_pass(BASE, 0.0, 1.0, 1.0) is BASE


def test_array_scalar_and_decode_pricer_agree() -> None:
    cost = with_prefill_pass(BASE, 0.0, 1.0, 1.2)
    shapes = step_shapes([0, 200, 7000, 0], [1, 0, 5, 50], [100, 0, 900, 5000])
    assert list(cost.step_times(shapes)) == pytest.approx([0.012, 0.01, 0.012, 0.012],
                                                          abs=1e-15)
    pricer, inner = decode_pricer(cost), decode_pricer(BASE)
    assert pricer is not None and inner is not None
    assert pricer(7, 700, 1) == pytest.approx(inner(7, 700, 1) * 1.2, rel=1e-15)
    assert pricer(7, 700, 1) == cost.step_time(
        StepShape(num_decode_seqs=7, decode_context_tokens=700, num_finished=1))
    assert pickle.loads(pickle.dumps(cost)).decode_scale == 1.2


def test_a_scenario_sets_it_beside_the_prefill_scale() -> None:
    model, hw = get_model("llama-3.1-8b"), get_hardware("h100-sxm")
    cost, used = cost_model_from_config(
        {"form": "linear", "step_s": 0.01, "decode_scale": 1.2, "prefill_scale": 1.5},
        model, hw, 1, "bf16", "bf16")
    assert cost.step_time(StepShape(num_prefill_tokens=100)) == pytest.approx(0.015, abs=1e-12)
    assert cost.step_time(StepShape(num_decode_seqs=8)) == pytest.approx(0.012, abs=1e-12)
    assert used.endswith("each prefill step x 1.5, each step with decode rows x 1.2")


@pytest.mark.parametrize("bad", [0.2, 5, "1.1", True])
def test_a_factor_out_of_range_is_refused_by_name(bad: object) -> None:
    model, hw = get_model("llama-3.1-8b"), get_hardware("h100-sxm")
    with pytest.raises(ConfigError, match=r"cost\.decode_scale="):
        cost_model_from_config({"form": "linear", "step_s": 0.01, "decode_scale": bad},
                               model, hw, 1, "bf16", "bf16")


def test_no_stack_sets_one_and_a_scenario_on_a_stack_does() -> None:
    point = {"model": {"name": "llama-3-8b"}, "hardware": {"gpu": "h100-sxm"},
             "stack": {"name": "trtllm", "version": "0.10"}}
    plain = resolve(point)
    assert "with decode rows" not in plain.cost_source
    scaled = resolve({**point, "cost": {"decode_scale": 1.12}})
    assert "each step with decode rows x 1.12 + host" in scaled.cost_source
    step = StepShape(num_decode_seqs=16, decode_context_tokens=16 * 400)
    # the host terms stay outside: the step's kernel time is scaled, its host time is not
    grown = scaled.cost.step_time(step) - plain.cost.step_time(step)
    assert 0.0 < grown < 0.12 * plain.cost.step_time(step)
    alone = StepShape(num_prefill_tokens=500, prefill_attn_work=500 * 250.0)
    assert scaled.cost.step_time(alone) == plain.cost.step_time(alone)
