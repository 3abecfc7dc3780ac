"""Decode attention without multi-block mode: the longest walk sets a small batch's step.

The model: ``LinearCost(step_s=0.01, decode_context_s=2e-8)`` (10 ms a step, 20 ns per
context token attended, the bandwidth bound); walks of 10 ns per context token and layer
over 32 layers, 320 ns per token of one sequence. One sequence at 1,000 tokens: the walk
takes 320 us where the table says 20 us, so the step is 10.02 + 0.30 = 10.32 ms. A hundred
sequences at 1,000 tokens each: the walk is still 320 us, the table's 2 ms: unchanged.
"""

from __future__ import annotations

import pickle

import numpy as np
import pytest

from simulator.costs.base import decode_pricer
from simulator.costs.decode_walk import DecodeWalkCost, with_decode_walk
from simulator.costs.from_config import cost_model_from_config
from simulator.costs.linear import LinearCost
from simulator.deployment import resolve
from simulator.errors import ConfigError
from simulator.shapes import StepShape, StepShapes
from simulator.specs.hardware import get_hardware
from simulator.specs.models import get_model

BASE = LinearCost(step_s=0.01, decode_context_s=2e-8)


def decode(rows: int, context: int) -> StepShape:
    return StepShape(num_decode_seqs=rows, decode_context_tokens=context)


def test_one_sequence_waits_for_its_walk() -> None:
    cost = with_decode_walk(BASE, 10e-9, 32)
    assert isinstance(cost, DecodeWalkCost) and cost.context_s == 2e-8
    assert cost.step_time(decode(1, 1000)) == pytest.approx(0.01032, abs=1e-12)
    assert cost.step_time(decode(100, 100_000)) == pytest.approx(0.012, abs=1e-12)
    assert cost.step_time(StepShape(num_prefill_tokens=512)) == BASE.step_time(
        StepShape(num_prefill_tokens=512))


def test_array_scalar_and_decode_pricer_agree() -> None:
    cost = with_decode_walk(BASE, 10e-9, 32)
    rows, context = np.array([1, 4, 100, 0]), np.array([1000, 8000, 100_000, 0])
    shapes = StepShapes.decode_run(1, np.array([1000]), np.array([0]))
    assert cost.step_times(shapes)[0] == cost.step_time(decode(1, 1000))
    pricer = decode_pricer(cost)
    assert pricer is not None
    for d, c in zip(rows, context, strict=True):
        assert pricer(int(d), int(c), 0) == pytest.approx(cost.step_time(decode(int(d), int(c))),
                                                         abs=1e-15)
    assert pickle.loads(pickle.dumps(cost)).step_time(decode(1, 1000)) == cost.step_time(
        decode(1, 1000))


def test_trtllm_0_10_and_0_11_walk_at_the_gpu_clock_and_1_0_does_not() -> None:
    point = {"model": {"name": "llama-3-8b"}, "hardware": {"gpu": "a100-80gb"}}
    for version, walks in (("0.10", True), ("0.11", True), ("0.12", False), ("0.17", False),
                           ("1.0", False)):
        dep = resolve({**point, "stack": {"name": "trtllm", "version": version}})
        assert ("walking each sequence alone (12.2 ns" in dep.cost_source) == walks, version
    h100 = resolve({"model": {"name": "llama-3-8b"}, "hardware": {"gpu": "h100-sxm"},
                    "stack": {"name": "trtllm", "version": "0.10"}})
    assert "(8.69 ns a token and layer)" in h100.cost_source  # 17.2 cycles / 1.98 GHz


def test_a_scenario_sets_its_own_walk_and_a_prior_refuses_one() -> None:
    model, hw = get_model("llama-3.1-8b"), get_hardware("h100-sxm")
    cost, used = cost_model_from_config({"form": "linear", "step_s": 0.01,
                                         "decode_context_s": 2e-8, "decode_walk_s": 1e-8},
                                        model, hw, 1, "bf16", "bf16")
    assert cost.step_time(decode(1, 1000)) == pytest.approx(0.01 + 2e-5 + 3.0e-4, abs=1e-12)
    assert "10 ns a token and layer" in used
    with pytest.raises(ConfigError, match=r"cost\.decode_walk_s=1e-08: applies to a fitted"):
        cost_model_from_config({"decode_walk_s": 1e-8}, model, get_hardware("cpu"), 1,
                               "bf16", "bf16")
