"""The 2024 TensorRT engines' all-reduce handshake: a fixed time per all-reduce and step.

The model: ``LinearCost(step_s=0.01)`` (10 ms a step) and a handshake of 10 us per
all-reduce over 32 layers: 2 x 32 x 10 us = 0.64 ms more per step, 10.64 ms, for any
decode batch and for a prefill whose activations fit the plugin's workspace. Llama-3-8B
(hidden 4,096) at TP 2: 16,000,000 bytes / (4,096 x 2) = 1,953 tokens fit; a 2,000-token
prefill step goes to NCCL and keeps its 10 ms.
"""

from __future__ import annotations

import pickle

import numpy as np
import pytest

from simulator.costs.allreduce_sync import (
    AllReduceSyncCost,
    with_allreduce_sync,
    workspace_tokens,
)
from simulator.costs.base import decode_pricer
from simulator.costs.collectives import allreduce_curve
from simulator.costs.from_config import cost_model_from_config
from simulator.costs.linear import LinearCost
from simulator.deployment import resolve
from simulator.shapes import StepShape, StepShapes
from simulator.specs.hardware import get_hardware
from simulator.specs.models import get_model
from simulator.stack_presets import TRTLLM_ALLREDUCE_SYNC

BASE = LinearCost(step_s=0.01)


def test_every_step_within_the_workspace_pays_two_handshakes_a_layer() -> None:
    assert workspace_tokens(2, 4096) == 1953
    assert workspace_tokens(8, 8192) == 488  # 8,000,000 bytes beyond TP 2
    cost = with_allreduce_sync(BASE, 10e-6, 2 * 32, 2, 4096)  # 32 layers, two each
    assert isinstance(cost, AllReduceSyncCost) and cost.max_tokens == 1953
    assert cost.step_time(StepShape(num_decode_seqs=1)) == pytest.approx(0.01064, abs=1e-12)
    assert cost.step_time(StepShape(num_decode_seqs=256)) == pytest.approx(0.01064, abs=1e-12)
    assert cost.step_time(StepShape(num_prefill_tokens=1953)) == pytest.approx(0.01064,
                                                                               abs=1e-12)
    assert cost.step_time(StepShape(num_prefill_tokens=2000)) == 0.01


def test_one_gpu_or_no_handshake_leaves_the_cost_alone() -> None:
    assert with_allreduce_sync(BASE, 10e-6, 64, 1, 4096) is BASE
    assert with_allreduce_sync(BASE, 0.0, 64, 4, 4096) is BASE


def test_array_scalar_and_decode_pricer_agree() -> None:
    cost = with_allreduce_sync(BASE, 10e-6, 64, 2, 4096)
    shapes = StepShapes(num_prefill_tokens=np.array([0, 1953, 2000, 100]),
                        prefill_attn_work=np.zeros(4), num_decode_seqs=np.array([1, 0, 0, 50]),
                        decode_context_tokens=np.array([100, 0, 0, 5000]),
                        num_admitted=np.zeros(4, dtype=np.int64),
                        num_finished=np.zeros(4, dtype=np.int64))
    one = [cost.step_time(StepShape(num_prefill_tokens=int(p), num_decode_seqs=int(d),
                                    decode_context_tokens=int(c)))
           for p, d, c in zip(shapes.num_prefill_tokens, shapes.num_decode_seqs,
                              shapes.decode_context_tokens, strict=True)]
    assert list(cost.step_times(shapes)) == pytest.approx(one, abs=1e-15)
    pricer = decode_pricer(cost)
    assert pricer is not None
    assert pricer(7, 700, 0) == pytest.approx(cost.step_time(
        StepShape(num_decode_seqs=7, decode_context_tokens=700)), abs=1e-15)
    assert pricer(2000, 0, 0) == 0.01  # 2,000 decode rows: past the workspace too
    assert pickle.loads(pickle.dumps(cost)).max_tokens == 1953


def test_trtllm_0_10_and_0_11_pay_it_in_nccl_latencies_and_later_releases_do_not() -> None:
    t0 = allreduce_curve("a100-80gb", 2)
    assert t0 is not None
    handshake = TRTLLM_ALLREDUCE_SYNC * t0.latency_s
    point = {"model": {"name": "llama-3-8b"}, "hardware": {"gpu": "a100-80gb", "tp": 2}}
    for version, pays in (("0.10", True), ("0.11", True), ("0.12", False), ("1.0", False)):
        dep = resolve({**point, "stack": {"name": "trtllm", "version": version}})
        assert (f"handshake {handshake * 1e6:.3g} us" in dep.cost_source) == pays, version
    one_gpu = resolve({"model": {"name": "llama-3-8b"}, "hardware": {"gpu": "a100-80gb"},
                       "stack": {"name": "trtllm", "version": "0.10"}})
    assert "handshake" not in one_gpu.cost_source


def test_a_scenario_sets_its_own_or_turns_it_off() -> None:
    model, hw = get_model("llama-3.1-8b"), get_hardware("h100-sxm")
    cost, used = cost_model_from_config({"form": "linear", "step_s": 0.01,
                                         "allreduce_sync_s": 5e-6}, model, hw, 4, "bf16", "bf16")
    assert cost.step_time(StepShape(num_decode_seqs=8)) == pytest.approx(0.01032, abs=1e-12)
    assert "handshake 5 us" in used
    off = resolve({"model": {"name": "llama-3-8b"}, "hardware": {"gpu": "a100-80gb", "tp": 2},
                   "stack": {"name": "trtllm", "version": "0.10"},
                   "cost": {"allreduce_sync_s": 0}})
    assert "handshake" not in off.cost_source
