"""GPUs priced from a sibling's measured tables (simulator/costs/sibling.py)."""

from __future__ import annotations

import numpy as np
import pytest

from simulator.costs.base import decode_pricer
from simulator.costs.collectives import allreduce_curve
from simulator.costs.from_config import cost_model_from_config
from simulator.costs.prior_efficiency import fitted_prior, prior_knobs, sibling_scale
from simulator.shapes import StepShape, StepShapes
from simulator.specs.hardware import get_hardware, sibling_of
from simulator.specs.models import get_model

DECODE_1 = StepShape(num_decode_seqs=1, decode_context_tokens=500)
DECODE_64 = StepShape(num_decode_seqs=64, decode_context_tokens=64 * 500)
PREFILL = StepShape(num_prefill_tokens=8192, prefill_attn_work=8192 * 4096.0)


def _cost(gpu: str, model: str, tp: int, stack: str | None = None):
    return cost_model_from_config({}, get_model(model), get_hardware(gpu), tp, "bf16", "bf16",
                                  stack=stack)


def test_siblings_are_the_same_chip() -> None:
    for gpu, twin in (("a100-40gb", "a100-80gb"), ("h100-pcie", "h100-sxm")):
        a, b = get_hardware(gpu), sibling_of(gpu)
        assert b is not None and b.name == twin
        assert a.bf16_tflops <= b.bf16_tflops and a.bandwidth_gbps < b.bandwidth_gbps
    assert sibling_of("h200") is None and sibling_of("a100-80gb") is None


def test_a100_40gb_is_the_80gb_table_times_the_priors_ratio() -> None:
    """Step by step: measured(80 GB) x prior(40 GB) / prior(80 GB), both priors with the
    80 GB's fitted efficiencies, under vLLM's own kernel tables."""
    cost, used = _cost("a100-40gb", "llama-3.1-70b", 8, "vllm")
    measured, source = _cost("a100-80gb", "llama-3.1-70b", 8, "vllm")
    assert used.startswith("a100-80gb's measured profile scaled to a100-40gb")
    assert "stacks/vllm/a100-80gb__llama-3.1-70b__bf16__tp8.json" in used
    assert "stacks/vllm/a100-80gb" in source
    m = get_model("llama-3.1-70b")
    knobs = prior_knobs("a100-80gb", "bf16")
    assert knobs  # the 80 GB has fitted efficiencies; the 40 GB has none of its own
    assert prior_knobs("a100-40gb", "bf16") == {}
    p40 = fitted_prior(m, get_hardware("a100-40gb"), 8, "bf16", "bf16", **knobs)
    p80 = fitted_prior(m, get_hardware("a100-80gb"), 8, "bf16", "bf16")
    for shape in (DECODE_1, DECODE_64, PREFILL):
        want = measured.step_time(shape) * p40.step_time(shape) / p80.step_time(shape)
        assert cost.step_time(shape) == pytest.approx(want, rel=1e-12)
    # a weight-bound decode slows by less than the bandwidth ratio (2,039 / 1,555 = 1.31:
    # the per-layer floors and all-reduces do not), a compute-bound prefill not at all
    slow = cost.step_time(DECODE_1) / measured.step_time(DECODE_1)
    assert 1.1 < slow < 2039 / 1555
    assert cost.step_time(PREFILL) == pytest.approx(measured.step_time(PREFILL), rel=0.01)


def test_h100_pcie_prefill_slows_by_the_measured_matmul_ratio() -> None:
    cost, used = _cost("h100-pcie", "llama-3.1-8b", 1)
    measured, _ = _cost("h100-sxm", "llama-3.1-8b", 1)
    assert "h100-sxm's measured profile scaled to h100-pcie" in used
    # published bf16 torch.mm (simulator/costs/matmul_published.json): the PCIe board
    # 495.93 TFLOP/s, the SXM 789.24 (their medians): a compute-bound prefill slows by
    # their ratio, 1.591, not the datasheets' 989 / 756 = 1.308 (the PCIe's 350 W limit)
    assert sibling_scale("h100-pcie", "h100-sxm", "bf16") == pytest.approx(
        (495.93 / 756) / (789.24 / 989))
    assert "h100-pcie's eff_c x 0.822 for the two boards' measured bf16 matmul" in used
    assert cost.step_time(PREFILL) / measured.step_time(PREFILL) == pytest.approx(
        789.24 / 495.93, rel=0.01)
    # the A100s have no pair of measurements: their ratio stays the datasheets'
    assert sibling_scale("a100-40gb", "a100-80gb", "bf16") == 1.0
    # FP8 math was not measured: no scale
    assert sibling_scale("h100-pcie", "h100-sxm", "fp8") == 1.0
    # decode: weight reads at 2,000 instead of 3,350 GB/s, under the bandwidth ratio 1.675
    assert 1.3 < cost.step_time(DECODE_1) / measured.step_time(DECODE_1) < 3350 / 2000


def test_array_and_decode_pricer_paths_agree() -> None:
    cost, _ = _cost("a100-40gb", "llama-3.1-70b", 8, "vllm")
    shapes = [DECODE_1, DECODE_64, PREFILL]
    arrays = StepShapes.from_shapes(shapes)
    np.testing.assert_allclose(cost.step_times(arrays), [cost.step_time(s) for s in shapes],
                               rtol=1e-12)
    price = decode_pricer(cost)
    assert price is not None
    assert price(64, 64 * 500, 0) == pytest.approx(cost.step_time(DECODE_64), rel=1e-12)


def test_the_a100_40gb_prior_prices_all_reduces_with_the_80gb_nccl_curve() -> None:
    """Same NVLink fabric: the 80 GB's measured NCCL curve, not the formula; the H100 PCIe
    (PCIe, not the SXM's NVLink) keeps none of the SXM's."""
    curve = allreduce_curve("a100-40gb", 8)
    assert curve is not None and curve == allreduce_curve("a100-80gb", 8)
    assert allreduce_curve("h100-sxm", 2) is not None
    assert allreduce_curve("h100-pcie", 2) is None


def test_a_gpu_with_its_own_tables_is_not_repriced() -> None:
    _, used = _cost("h100-sxm", "llama-3.1-8b", 1)
    assert "scaled" not in used
    # the sibling's measured stand-in (same layer shapes) counts as its measurement
    _, used = _cost("a100-40gb", "mistral-7b", 1)
    assert used.startswith("a100-80gb's measured profile scaled") and "llama-3.1-8b" in used
    # nothing measured on the sibling either (Phi-2): the GPU's own prior
    _, used = _cost("a100-40gb", "phi-2", 1)
    assert "scaled" not in used and "roofline prior" in used
