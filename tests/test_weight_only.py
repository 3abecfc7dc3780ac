"""Weights stored narrower than the math (simulator/costs/weight_only.py): an FP8 checkpoint
on an A100 (no FP8 tensor cores: FP8 Marlin, W8A16) and int4 anywhere (W4A16) are priced
by the measured bf16 profile plus the weight reads the narrow weights save."""

from __future__ import annotations

import numpy as np
import pytest

from simulator.costs.weight_only import NarrowWeightsCost, weight_only
from simulator.deployment import resolve
from simulator.shapes import StepShape, StepShapes
from simulator.specs.hardware import get_hardware

# Llama-3.1-8B streams every weight but the input embedding each step: 32 layers x (q, o
# 4096 x 4096; k, v 4096 x 1024; the MLP's 3 x 4096 x 14336; 2 norms of 4096) + the
# lm_head 128,256 x 4096 + the final norm = 7,504,924,672 weights. The A100-80GB's
# bf16-fitted memory efficiency is 0.859 (simulator/costs/prior_efficiency.json) of
# 2,039 GB/s.
WEIGHTS = 7_504_924_672
HEAD = 128_256 * 4_096  # the lm_head, which a quantised checkpoint keeps in 16 bits
A100_READ_S = 0.859 * 2039e9


def deployment(weight_dtype: str, gpu: str = "a100-80gb", stack: str = "vllm-v0"):  # noqa: ANN201
    return resolve({"model": {"name": "llama-3.1-8b", "weight_dtype": weight_dtype,
                              "kv_dtype": "bf16"},
                    "hardware": {"gpu": gpu}, "stack": {"name": stack}})


def decode(rows: int, context: int = 1000) -> StepShape:
    return StepShape(num_decode_seqs=rows, decode_context_tokens=rows * context)


@pytest.mark.parametrize(("dtype", "width"), [("fp8", 1.0), ("int4", 0.5)])
def test_a_batch_1_decode_saves_the_weight_bytes_at_the_fitted_bandwidth(
        dtype: str, width: float) -> None:
    # memory-bound at one row: the step is the bf16 table's less (2 - width) bytes a weight
    # but the 16-bit lm_head's at eff_m x bandwidth: fp8 saves 6.980 GB / 1.752 TB/s =
    # 3.985 ms, int4 5.977 ms
    bf16, narrow = deployment("bf16"), deployment(dtype)
    saved = bf16.cost.step_time(decode(1)) - narrow.cost.step_time(decode(1))
    assert saved == pytest.approx((WEIGHTS - HEAD) * (2 - width) / A100_READ_S, rel=1e-9)
    assert narrow.cost_source.startswith(f"{dtype} weights, weight-only kernels on a100-80gb")
    assert "stacks/vllm/a100-80gb__llama-3.1-8b__bf16__tp1.json" in narrow.cost_source


def test_a_compute_bound_step_costs_what_the_bf16_profile_says() -> None:
    # 256 rows: the matmuls' 2 x 7.505e9 x 256 FLOPs at 0.706 x 312 TFLOPS (17.4 ms)
    # outlast the bf16 weight reads (8.6 ms): the math is bf16 either way, nothing saved
    # (the repricing keeps the hard maximum, though the prior's own step takes the smooth
    # one); so is a 2,048-token prefill
    bf16, fp8 = deployment("bf16"), deployment("fp8")
    prefill = StepShape(num_prefill_tokens=2048, prefill_attn_work=2048 * 1024.5,
                        num_admitted=1)
    for shape in (decode(256), prefill):
        assert fp8.cost.step_time(shape) == bf16.cost.step_time(shape)


def test_array_scalar_and_decode_pricer_agree() -> None:
    cost = deployment("fp8").cost
    shapes = [decode(rows) for rows in (1, 7, 60, 61, 62, 63, 64, 130, 256)]
    one_by_one = np.array([cost.step_time(s) for s in shapes])
    assert np.array_equal(cost.step_times(StepShapes.from_shapes(shapes)), one_by_one)
    price = cost.decode_pricer()
    assert [price(s.num_decode_seqs, s.decode_context_tokens, 0) for s in shapes] == \
        one_by_one.tolist()


def test_which_gpus_multiply_narrow_weights_in_bf16() -> None:
    a100, h100 = get_hardware("a100-80gb"), get_hardware("h100-sxm")
    assert weight_only("fp8", a100) and weight_only("int4", a100) and weight_only("int4", h100)
    assert not weight_only("fp8", h100)  # FP8 tensor cores: W8A8, its own tables
    assert not weight_only("int8", a100)  # INT8 tensor cores (SmoothQuant W8A8)
    assert not weight_only("bf16", a100)
    assert not weight_only("int4", get_hardware("cpu"))  # its profiles are measured there


def test_a_gpu_with_fp8_math_keeps_its_fp8_tables() -> None:
    dep = deployment("fp8", gpu="h100-sxm")
    assert dep.cost_source.startswith("stacks/vllm/h100-sxm__llama-3.1-8b__fp8-kvbf16__tp1.json")


def test_int4_without_a_stack_reprices_the_generic_profile() -> None:
    dep = deployment("int4", gpu="h100-sxm", stack="none")
    assert dep.cost_source.startswith("int4 weights, weight-only kernels on h100-sxm")
    assert "h100-sxm__llama-3.1-8b__bf16__tp1.json" in dep.cost_source
    kernel = dep.cost
    while not isinstance(kernel, NarrowWeightsCost):
        kernel = kernel.inner  # type: ignore[attr-defined]
    assert kernel.delta_s(1.0) < 0.0
