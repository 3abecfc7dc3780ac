"""Cost models: linear arithmetic, the roofline formula by hand, and scalar == vector."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simulator.costs import CostModel, LinearCost, PiecewiseCost, RooflineCost, ScaledCost
from simulator.errors import ConfigError
from simulator.shapes import StepShape, StepShapes
from simulator.specs import get_hardware, get_model

LLAMA8B, H100 = get_model("llama-3.1-8b"), get_hardware("h100-sxm")
LINEAR = LinearCost(0.01, 1e-4, 1e-8, 2e-4, 1e-6, 5e-4)
PIECEWISE = PiecewiseCost(0.04, 0.03, 0.045, 0.029, 3e-5, 512, 6e-5, 2048, 2e-5, 3e-9, 2e-4,
                          7e-8, 1e-3, 2e-4)  # shaped like h100-sxm__llama-2-70b__fp16__tp4


def decode(batch: int, context_per_seq: int) -> StepShape:
    return StepShape(num_decode_seqs=batch, decode_context_tokens=batch * context_per_seq)


def test_linear_exact_arithmetic() -> None:
    shape = StepShape(100, 100 * (0 + 100 / 2), 8, 4000, num_admitted=1, num_finished=2)
    # 0.01 + 1e-4*100 + 1e-8*5000 + 2e-4*8 + 1e-6*4000 + 5e-4*(1+2)
    # = 0.01 + 0.01 + 0.00005 + 0.0016 + 0.004 + 0.0015 = 0.02715
    assert LINEAR.step_time(shape) == pytest.approx(0.02715, rel=1e-12)
    assert isinstance(LINEAR, CostModel)


def test_linear_validation_names_field() -> None:
    with pytest.raises(ConfigError, match=r"decode_seq_s=-1e-05 must be a number in \[0.0"):
        LinearCost(step_s=0.01, decode_seq_s=-1e-5)
    with pytest.raises(ConfigError, match=r"step_s=nan"):
        LinearCost(step_s=math.nan)
    with pytest.raises(ConfigError, match=r"step_s=True"):
        LinearCost(step_s=True)
    with pytest.raises(ConfigError, match="all coefficients are 0"):
        LinearCost()


COST_MODELS = {
    "linear": LINEAR,
    "piecewise": PIECEWISE,
    "roofline-dense": RooflineCost(LLAMA8B, H100),
    "roofline-moe-tp2": RooflineCost(get_model("mixtral-8x7b"), H100, tp=2, weight_dtype="fp8"),
    "roofline-cpu": RooflineCost(get_model("tiny"), get_hardware("cpu"), weight_dtype="fp32"),
    "scaled": ScaledCost(RooflineCost(get_model("llama-3.1-70b"), H100, tp=4), 0.8),
}


@st.composite
def step_shapes(draw: st.DrawFn) -> StepShape:
    p = draw(st.integers(0, 8192))
    ctx = draw(st.integers(0, 32768))
    d = draw(st.integers(0 if p else 1, 512))
    return StepShape(
        num_prefill_tokens=p,
        prefill_attn_work=p * (ctx + p / 2),  # one chunk of p tokens after ctx cached ones
        num_decode_seqs=d,
        decode_context_tokens=draw(st.integers(d, d * 32768)),
        num_admitted=draw(st.integers(0, 8)),
        num_finished=draw(st.integers(0, d)),
    )


@pytest.mark.parametrize("name", list(COST_MODELS))
@settings(max_examples=40, deadline=None)
@given(shapes=st.lists(step_shapes(), min_size=1, max_size=20))
def test_step_times_equal_step_time(name: str, shapes: list[StepShape]) -> None:
    cost = COST_MODELS[name]
    vector = cost.step_times(StepShapes.from_shapes(shapes))
    scalar = np.array([cost.step_time(s) for s in shapes])
    assert vector.dtype == np.float64 and vector.shape == (len(shapes),)
    worst = int(np.argmax(np.abs(vector - scalar) / scalar))
    assert np.allclose(vector, scalar, rtol=1e-12, atol=0), (shapes[worst], vector[worst])
    assert np.all(scalar > 0)


def test_roofline_decode_batch1_is_memory_bound() -> None:
    cost = RooflineCost(LLAMA8B, H100)
    terms = cost.terms(decode(1, 1000))
    assert terms.memory_s > 10 * terms.compute_s and terms.allreduce_s == 0
    # bytes = 2 B * (8_030_261_248 params - 525_336_576 input-embedding params, only gathered)
    #         + 131_072 B/token KV * (1000 read + 1 written)
    nbytes = 2 * (8_030_261_248 - 128256 * 4096) + 131072 * 1001
    assert terms.bytes == nbytes
    # t_step + sqrt(matmul compute^2 + weight reads^2) + KV reads: the matmuls' 15 GFLOP
    # (28.6 us) beside their 15.0 GB (5.60 ms) add 0.07 us to the reads = 5.94 ms
    weights = 2 * (8_030_261_248 - 128256 * 4096)
    mm_c = weights / (989e12 * 0.6)  # 2 FLOP a parameter a token, 2 B a parameter
    mm_m = weights / (3350e9 * 0.8)
    expected = 300e-6 + math.sqrt(mm_c**2 + mm_m**2) + 131072 * 1001 / (3350e9 * 0.8)
    assert cost.step_time(decode(1, 1000)) == pytest.approx(expected, rel=1e-9)
    # and within 10% of the back-of-envelope "whole model once per token"
    rough = 300e-6 + LLAMA8B.weight_bytes("bf16") / (3350e9 * 0.8)
    assert cost.step_time(decode(1, 1000)) == pytest.approx(rough, rel=0.1)


def test_roofline_prefill_is_compute_bound() -> None:
    p = 4096
    shape = StepShape(num_prefill_tokens=p, prefill_attn_work=p * p / 2, num_admitted=1)
    terms = RooflineCost(LLAMA8B, H100).terms(shape)
    assert terms.compute_s > terms.memory_s
    # F = 2 * 7_504_924_672 * 4096 + 4 * 32 * 32 * 128 * 4096^2/2; t = F / (989e12 * 0.6)
    flops = 2 * (8_030_261_248 - 128256 * 4096) * p + 4 * 32 * 32 * 128 * p * p / 2
    assert terms.compute_s == pytest.approx(flops / (989e12 * 0.6), rel=1e-12)
    assert terms.overhead_s == pytest.approx(300e-6 + 100e-6)


def test_roofline_large_decode_pays_matmuls_and_kv_reads_one_after_the_other() -> None:
    # 512 rows x 2,500 tokens: the matmuls are compute-bound, attention reads the KV cache
    # at memory speed, and the step is the two added (one max would hide the KV reads)
    shape = decode(512, 2500)
    cost = RooflineCost(LLAMA8B, H100)
    terms = cost.terms(shape)
    n_sh = 8_030_261_248 - 128256 * 4096
    matmuls = 2 * n_sh * 512 / (989e12 * 0.6)  # 6.48 ms; its weights: 4.5 ms
    kv_read = 131072 * (512 * 2500 + 512) / (3350e9 * 0.8)  # 62.6 ms
    attn_flops = 4 * 32 * 32 * 128 * 512 * 2500 / (989e12 * 0.6)  # 1.1 ms, under its bytes
    reads = 2 * n_sh / (3350e9 * 0.8)
    # near the ridge the matmuls pay part of both: sqrt(6.48^2 + 4.48^2) = 7.88 ms
    assert terms.matmul_s == pytest.approx(math.sqrt(matmuls**2 + reads**2), rel=1e-12)
    assert terms.attention_s == pytest.approx(kv_read, rel=1e-12) and attn_flops < kv_read
    expected = 300e-6 + terms.matmul_s + kv_read  # 70.8 ms; one max over the step: 67.4
    assert cost.step_time(shape) == pytest.approx(expected, rel=1e-12)
    one_max = 300e-6 + max(terms.compute_s, terms.memory_s)
    assert cost.step_time(shape) - one_max == pytest.approx(terms.matmul_s - reads, rel=1e-9)


def test_tensor_parallel_halves_bytes_and_adds_allreduce() -> None:
    shape = decode(8, 2000)
    # allreduce_kind="": the formula (the measured curve: tests/test_allreduce_table.py)
    one, two = (RooflineCost(LLAMA8B, H100, tp=tp, allreduce_kind="").terms(shape)
                for tp in (1, 2))
    assert two.bytes == pytest.approx(one.bytes / 2, rel=1e-12)
    assert two.flops == pytest.approx(one.flops / 2, rel=1e-12)
    # 2 * 32 layers * (10 us + 2*(2-1)/2 * 8 tokens * 4096 * 2 B / (900e9/2 * 0.8))
    expected_ar = 64 * (10e-6 + 8 * 4096 * 2 / (450e9 * 0.8))
    assert two.allreduce_s == pytest.approx(expected_ar, rel=1e-12) and two.allreduce_s > 0


def test_kv_heads_replicate_beyond_tp() -> None:
    tiny = get_model("tiny")  # 2 KV heads: at tp=4 each GPU holds 1 of them, not half of one
    one, four = (RooflineCost(tiny, H100, tp=tp) for tp in (1, 4))
    only_kv = decode(1, 10_000)
    kv1 = one.terms(only_kv).bytes - one.terms(decode(1, 0)).bytes
    kv4 = four.terms(only_kv).bytes - four.terms(decode(1, 0)).bytes
    assert kv4 == pytest.approx(kv1 / 2)


def test_h200_decodes_faster_than_h100() -> None:
    shape = decode(32, 4000)
    h200 = RooflineCost(LLAMA8B, get_hardware("h200")).step_time(shape)
    assert h200 < RooflineCost(LLAMA8B, H100).step_time(shape)


def test_moe_batch1_reads_two_of_eight_experts() -> None:
    m = get_model("mixtral-8x7b")
    assert m.params_active < m.params_total
    cost = RooflineCost(m, get_hardware("h200"))
    one = cost.terms(decode(1, 0)).bytes - 131072 * 1  # minus the KV written
    shared = m.params_shared - m.vocab_size * m.hidden_size
    # experts hit = 8 * (1 - (1 - 2/8)^1) = 2
    assert one == pytest.approx(2 * (shared + 2 * m.params_per_expert), rel=1e-12)
    many = cost.terms(decode(64, 0)).bytes - 131072 * 64  # 8*(1 - 0.75^64) ~ 8 experts
    assert many == pytest.approx(2 * (shared + 8 * m.params_per_expert), rel=1e-6)


def test_fp8_weights_without_fp8_math_fall_back_to_bf16() -> None:
    a100 = get_hardware("a100-80gb")
    prefill = StepShape(num_prefill_tokens=2048, prefill_attn_work=2048 * 1024)
    bf16, fp8 = (
        RooflineCost(LLAMA8B, a100, weight_dtype=w).terms(prefill) for w in ("bf16", "fp8")
    )
    assert fp8.compute_s == pytest.approx(bf16.compute_s)
    assert fp8.bytes < bf16.bytes


def test_fp8_weights_keep_a_16_bit_lm_head() -> None:
    # Llama-3.1-8B in FP8 on an H100: every shared weight at 1 byte but the lm_head's
    # 128,256 x 4,096 at 2 (the input embedding is gathered, not streamed)
    head = 128256 * 4096
    n_sh = 8_030_261_248 - head  # the weights a step streams, lm_head included
    cost = RooflineCost(LLAMA8B, H100, weight_dtype="fp8", kv_dtype="fp8")
    weights = cost.terms(decode(1, 0)).bytes - 65536  # minus the FP8 KV of one token
    assert weights == (n_sh - head) * 1 + head * 2  # 8.03 GB, not 7.50
    # the lm_head's GEMM runs at the bf16 peak (989 TFLOP/s), the rest at FP8's (1,979)
    p = 2048
    flops = 2 * (n_sh - head) * p / 1979e12 + 2 * head * p / 989e12
    terms = cost.terms(StepShape(num_prefill_tokens=p, num_admitted=1))  # no attention
    assert terms.compute_s == pytest.approx(flops / 0.6, rel=1e-12)


def test_roofline_validation() -> None:
    with pytest.raises(ConfigError, match=r"tp=2 needs a GPU link.*cpu"):
        RooflineCost(get_model("tiny"), get_hardware("cpu"), tp=2)
    with pytest.raises(ConfigError, match=r"tp=8 must divide qwen2.5-7b's num_heads=28"):
        RooflineCost(get_model("qwen2.5-7b"), H100, tp=8)
    with pytest.raises(
        ConfigError, match=r"memory_efficiency=1.5 must be a number in \(0.0, 1.0\]"
    ):
        RooflineCost(LLAMA8B, H100, memory_efficiency=1.5)
    with pytest.raises(ConfigError, match=r"kv_dtype='int8'"):
        RooflineCost(LLAMA8B, H100, kv_dtype="int8")


def test_scaled_cost() -> None:
    inner = RooflineCost(LLAMA8B, H100)
    shape = decode(16, 1000)
    assert ScaledCost(inner, 0.8).step_time(shape) == pytest.approx(0.8 * inner.step_time(shape))
    with pytest.raises(ConfigError, match="time_scale=0"):
        ScaledCost(inner, 0)
