"""A stack preset's host costs: fixed, per layer, and the multi-GPU terms (vLLM 0.6 sends
every step's batch from its driver to the other workers: a cost per decode row that one
GPU does not pay)."""

from __future__ import annotations

import pytest

from simulator.deployment import resolve
from simulator.shapes import StepShape
from simulator.stack_presets import VLLM_06_MULTI_GPU
from simulator.stacks import STACKS

DECODE = StepShape(num_decode_seqs=100, decode_context_tokens=100 * 500)


def _step_s(stack: str, tp: int, seq_s: float | None = None) -> float:
    """A 100-row decode step of Llama-3.1-8B on ``tp`` H100s under ``stack``, with the
    scenario's own ``seq_s`` when given."""
    point = {"model": {"name": "llama-3.1-8b"}, "hardware": {"gpu": "h100-sxm", "tp": tp},
             "stack": {"name": stack}}
    if seq_s is not None:
        point["cost"] = {"overhead": {"seq_s": seq_s}}
    return resolve(point).cost.step_time(DECODE)


def test_vllm_v0_preset_adds_its_multi_gpu_terms_only_past_one_gpu() -> None:
    preset = STACKS["vllm-v0"][-1]
    one, two = preset.host_costs(32), preset.host_costs(32, 2)
    assert "seq_s" not in one
    assert two["seq_s"] == VLLM_06_MULTI_GPU["seq_s"] == pytest.approx(30.6e-6)
    assert {k: v for k, v in two.items() if k != "seq_s"} == one  # per layer: unchanged
    assert preset.host_costs(32, 8) == two  # one broadcast, however many workers read it


def test_a_multi_gpu_decode_step_pays_its_rows_once_each() -> None:
    # 100 rows x 30.6 us = 3.06 ms on two GPUs; nothing on one
    assert _step_s("vllm-v0", 2) - _step_s("vllm-v0", 2, seq_s=0.0) == pytest.approx(
        100 * 30.6e-6, rel=1e-9)
    assert _step_s("vllm-v0", 1) == _step_s("vllm-v0", 1, seq_s=0.0)


def test_v1_and_the_scenarios_own_term_are_left_alone() -> None:
    assert _step_s("vllm-v1", 2) == _step_s("vllm-v1", 2, seq_s=0.0)  # V1: no such term
    # the scenario's own seq_s wins over the preset's, term by term
    assert _step_s("vllm-v0", 2, seq_s=1e-3) - _step_s("vllm-v0", 2, seq_s=0.0) == \
        pytest.approx(100 * 1e-3, rel=1e-9)
