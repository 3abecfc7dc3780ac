"""Measured MoE layers in the roofline prior (simulator/costs/moe_tables.py, written by
calibrate/moe_curves.py): the curve read by hand, the prior's experts priced by it, the
fallbacks, and the file against AIConfigurator's tables where they are installed."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from calibrate.aiconfigurator import find_data_root
from simulator.costs import RooflineCost
from simulator.costs.from_config import cost_model_from_config
from simulator.costs.moe_tables import MOE_FILE, moe_layer_curve
from simulator.costs.prior_efficiency import fitted_prior
from simulator.errors import ConfigError
from simulator.shapes import StepShape
from simulator.specs import get_hardware, get_model

QWEN, B200 = get_model("qwen3-235b-a22b"), get_hardware("b200")
ROOT = find_data_root()


def _row(kind: str, hw: str, dtype: str, tp: int, model: str) -> dict:
    rows = json.loads(MOE_FILE.read_text())["curves"]
    return next(r for r in rows if (r["kind"], r["hardware"], r["dtype"], r["tp"], r["model"])
                == (kind, hw, dtype, tp, model))


def test_b200_sglang_qwen3_tp8_curve_by_hand() -> None:
    row = _row("sglang", "b200", "bf16", 8, "qwen3-235b-a22b")
    curve = moe_layer_curve(QWEN, "b200", "bf16", 8, "sglang")
    assert curve is not None and curve.kind == "sglang"
    assert "b200_sxm/moe/sglang/0.5.14" in curve.source and "power_law_1.2" in curve.source
    tokens, us = row["tokens"], row["latency_us"]
    assert tokens[:6] == [1, 2, 4, 8, 16, 32]
    # one token: the first knot; 24 tokens: halfway between 16 and 32 tokens' latencies
    assert curve.time_s(1.0) == pytest.approx(us[0] * 1e-6, rel=1e-12)
    assert curve.time_s(24.0) == pytest.approx((us[4] + us[5]) / 2 * 1e-6, rel=1e-12)
    # past the last count: the last segment's slope continues
    slope = (us[-1] - us[-2]) / (tokens[-1] - tokens[-2])
    beyond = tokens[-1] + 1000.0
    assert curve.time_s(beyond) == pytest.approx((us[-1] + 1000 * slope) * 1e-6, rel=1e-12)
    # the fused kernel is far slower than the roofline's experts at one token: 8 experts
    # of 3 x 4,096 x 1,536 bf16 weights, an eighth each per GPU, at 8 TB/s
    expert_read_s = 8 * 3 * 4096 * 1536 * 2 / 8 / 8e12
    assert curve.time_s(1.0) > 3 * expert_read_s


def test_the_prior_prices_its_experts_by_the_curve() -> None:
    """t_mm = sqrt(shared compute^2 + shared reads^2) + L x MoE(T), by hand at one token
    and at 4,096 (compute-bound shared matmuls)."""
    cost = fitted_prior(QWEN, B200, 8, "bf16", "bf16", moe_kind="sglang")
    curve = cost.measured_moe
    assert curve is not None
    n_sh = QWEN.params_shared - QWEN.vocab_size * QWEN.hidden_size  # embedding gathered
    peak, bw = B200.peak_flops("bf16"), B200.bandwidth_gbps * 1e9
    for t in (1.0, 4096.0):
        compute = 2 * n_sh * t / (peak * 8 * cost.compute_efficiency)
        reads = 2 * n_sh / 8 / (bw * cost.memory_efficiency)
        want = math.sqrt(compute**2 + reads**2) + 94 * float(curve.time_s(t))
        assert cost.matmul_s(t) == pytest.approx(want, rel=1e-12)
        assert float(cost.matmul_s(np.array([t]))[0]) == cost.matmul_s(t)
    roofline = fitted_prior(QWEN, B200, 8, "bf16", "bf16", moe_kind="")
    assert roofline.measured_moe is None
    # one decode row: the curve's 94 layers x ~20 us against the roofline's 8 experts read
    assert cost.matmul_s(1.0) - roofline.matmul_s(1.0) > 1e-3


def test_a_kind_without_the_curve_falls_back_to_tensorrt_llms() -> None:
    vllm = moe_layer_curve(QWEN, "b200", "bf16", 8, "vllm")  # vLLM's table: no bf16 tp 8
    assert vllm is not None and vllm.kind == "trtllm"
    assert moe_layer_curve(QWEN, "b200", "bf16", 4, "vllm").kind == "vllm"  # type: ignore[union-attr]
    assert moe_layer_curve(get_model("llama-3.1-8b"), "b200", "bf16", 1, "trtllm") is None
    assert moe_layer_curve(QWEN, "h100-pcie", "bf16", 8, "trtllm") is None  # no table
    fp16_table = moe_layer_curve(QWEN, "b200", "fp16", 8, "sglang")  # costs as bf16
    assert fp16_table is not None and fp16_table == moe_layer_curve(QWEN, "b200", "bf16", 8,
                                                                    "sglang")
    fp16 = RooflineCost(QWEN, B200, tp=8, weight_dtype="fp16", moe_kind="sglang")
    assert fp16.measured_moe is not None and fp16.measured_moe.dtype == "bf16"


def test_unknown_kind_is_refused_and_dense_models_say_nothing() -> None:
    with pytest.raises(ConfigError, match="moe_kind='tgi'"):
        RooflineCost(QWEN, B200, tp=8, moe_kind="tgi")
    assert RooflineCost(get_model("llama-3.1-8b"), B200).moe_source() is None
    assert "roofline" in (RooflineCost(QWEN, get_hardware("a100-40gb"), tp=8).moe_source()
                          or "")


def test_a_sglang_deployment_names_its_experts_source() -> None:
    used = cost_model_from_config({}, QWEN, B200, 8, "bf16", "bf16", stack="sglang")[1]
    assert "experts: sglang MoE kernels measured by AIConfigurator 0.12.0" in used
    plain = cost_model_from_config({}, QWEN, B200, 8, "bf16", "bf16")[1]
    assert "experts: trtllm MoE kernels" in plain


@settings(max_examples=200, deadline=None)
@given(tokens=st.one_of(st.floats(0, 1e6), st.integers(0, 200_000).map(float)))
def test_curve_scalar_is_the_array_path(tokens: float) -> None:
    curve = moe_layer_curve(QWEN, "b200", "bf16", 8, "sglang")
    assert curve is not None
    knots = np.array(curve.tokens)
    for x in (tokens, *knots.tolist(), *(knots * 1.37).tolist()):
        vector = curve.time_s(np.array([x]))[0]
        assert curve.time_s_scalar(x) == vector
        assert curve.time_s(x) == vector


@pytest.mark.skipif(ROOT is None, reason="needs the aiconfigurator extra: "
                    "pip install -e '.[aiconfigurator]'")
def test_the_shipped_file_is_what_the_tables_give() -> None:
    from calibrate.moe_curves import main
    assert main(["--check"]) == 0


def test_a_shipped_prior_file_reads_the_stacks_moe_kernels_too() -> None:
    """b200__mixtral-8x7b__bf16__tp8.json is a shipped roofline prior: under an SGLang
    stack its experts read SGLang's table, as the on-the-fly prior's do."""
    mixtral = get_model("mixtral-8x7b")
    sglang = cost_model_from_config({}, mixtral, B200, 8, "bf16", "bf16", stack="sglang")[1]
    assert "b200__mixtral-8x7b__bf16__tp8.json" in sglang
    assert "experts: sglang MoE kernels" in sglang
    plain = cost_model_from_config({}, mixtral, B200, 8, "bf16", "bf16")[1]
    assert "b200__mixtral-8x7b__bf16__tp8.json" in plain
    assert "experts: trtllm MoE kernels" in plain


def test_the_check_script_prints_the_curve_against_the_roofline(capsys) -> None:
    import sys
    from pathlib import Path
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
    import moe_prior_check
    assert moe_prior_check.main([]) == 0
    out = capsys.readouterr().out
    row = next(line.split() for line in out.splitlines() if line.split()[:1] == ["8192"])
    # 8,192 tokens: the curve's knot, read from the file; the roofline's FLOPs
    # 2 x 8 x 3 x 4,096 x 1,536 x 8,192 / 8 at eff_c x 2,250 TFLOP/s (compute-bound there)
    knots = _row("sglang", "b200", "bf16", 8, "qwen3-235b-a22b")
    assert float(row[1]) == pytest.approx(
        knots["latency_us"][knots["tokens"].index(8192)], abs=0.05)
    eff_c = fitted_prior(QWEN, B200, 8, "bf16", "bf16").compute_efficiency
    flops = 2 * 8 * 3 * 4096 * 1536 * 8192 / 8
    peak = B200.peak_flops("bf16")  # 2,250 TFLOP/s dense
    assert float(row[2]) == pytest.approx(flops / (peak * eff_c) * 1e6, abs=0.05)
    assert moe_prior_check.main(["--gpu", "h100-pcie"]) == 1


def test_the_cost_section_chooses_the_experts_kernels() -> None:
    """``[cost] moe_kind``: another stack's table, or "" for the roofline experts; a name
    without tables is refused naming the field."""
    cases = {"trtllm": "experts: trtllm MoE kernels", "": 'experts: roofline (moe_kind = "")'}
    for kind, note in cases.items():
        used = cost_model_from_config({"moe_kind": kind}, QWEN, B200, 8, "bf16", "bf16",
                                      stack="sglang")[1]
        assert note in used, used
    roofline = cost_model_from_config({"moe_kind": ""}, QWEN, B200, 8, "bf16", "bf16",
                                      stack="sglang")[0]
    measured = cost_model_from_config({}, QWEN, B200, 8, "bf16", "bf16", stack="sglang")[0]
    step = StepShape(num_decode_seqs=1, decode_context_tokens=1000)
    # one decode row: 94 layers x (20.2 us measured - the roofline's experts), more than 1 ms
    assert measured.step_time(step) - roofline.step_time(step) > 1e-3
    inline = cost_model_from_config({"form": "roofline", "moe_kind": "sglang"}, QWEN, B200, 8,
                                    "bf16", "bf16")[1]
    assert "experts: sglang MoE kernels" in inline
    with pytest.raises(ConfigError, match=r"cost\.moe_kind='tgi' must be"):
        cost_model_from_config({"moe_kind": "tgi"}, QWEN, B200, 8, "bf16", "bf16")


def test_a_bad_curve_file_is_refused_naming_it(tmp_path) -> None:
    bad = tmp_path / "moe.json"
    bad.write_text("{not json")
    with pytest.raises(ConfigError, match=f"{bad}: cannot read the MoE layer curves"):
        moe_layer_curve(QWEN, "b200", "bf16", 8, "sglang", path=bad)
    bad.write_text('{"rows": []}')
    with pytest.raises(ConfigError, match="expected an object with a 'curves' list"):
        moe_layer_curve(QWEN, "b200", "bf16", 8, "sglang", path=bad)
    row = {"hardware": "b200", "kind": "sglang", "dtype": "bf16", "tp": 8,
           "hidden_size": 4096, "intermediate_size": 1536, "num_experts": 128,
           "experts_per_token": 8, "tokens": [4, 2], "latency_us": [1.0, 2.0], "source": "x"}
    bad.write_text(json.dumps({"curves": [row]}))
    with pytest.raises(ConfigError, match="tokens=.* must increase"):
        moe_layer_curve(QWEN, "b200", "bf16", 8, "sglang", path=bad)


@pytest.mark.skipif(ROOT is None, reason="needs the aiconfigurator extra: "
                    "pip install -e '.[aiconfigurator]'")
def test_the_check_script_reads_the_balanced_rows_beside_the_curve(capsys) -> None:
    """B200 SGLang Qwen3 at 16 tokens: the balanced rows spread 16 x 8 picks over all 128
    experts and read slower than the shipped power-law curve."""
    import sys
    from pathlib import Path
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
    import moe_prior_check
    assert moe_prior_check.main(["--routing", "balanced"]) == 0
    row = next(line.split() for line in capsys.readouterr().out.splitlines()
               if line.split()[:1] == ["16"])
    assert float(row[-1]) > 1.5 * float(row[1])


def test_vllms_fp8_experts_are_its_fp8moemethod_not_modelopts() -> None:
    # vLLM runs its own FP8 checkpoints (Qwen's block-wise FP8, llm-compressor's) with
    # Fp8MoEMethod; the table's per-tensor "fp8" rows time the ModelOpt path, slower than
    # vLLM's own bf16 kernel. The shipped vLLM FP8 curve is Fp8MoEMethod's Triton kernel,
    # faster than bf16 at a decode batch, as an 8-bit kernel reading half the bytes is
    mixtral = get_model("mixtral-8x7b")
    fp8 = moe_layer_curve(mixtral, "h100-sxm", "fp8", 2, "vllm")
    bf16 = moe_layer_curve(mixtral, "h100-sxm", "bf16", 2, "vllm")
    assert fp8 is not None and bf16 is not None
    assert "vllm_fp8moe_triton_tritonexperts, fp8_block" in fp8.source
    assert fp8.time_s(64.0) < bf16.time_s(64.0)
    # under expert parallelism the table times Fp8MoEMethod with FlashInfer's CUTLASS experts
    ep = moe_layer_curve(QWEN, "h200", "fp8", 1, "vllm", ep=4)
    assert ep is not None and "vllm_fp8moe_flashinfer_cutlass" in ep.source
    # a TP degree the Fp8MoEMethod rows lack has no vLLM curve: TensorRT-LLM's prices it
    assert moe_layer_curve(QWEN, "h200", "fp8", 8, "vllm").kind == "trtllm"


def test_the_dtype_compare_script_divides_the_curves_by_hand(tmp_path, capsys) -> None:
    from benchmarks.moe_dtype_compare import main
    base = {"kind": "vllm", "hardware": "h200", "model": "m", "tp": 2,
            "tokens": [1, 64, 256], "source": "T (kernel_a, bfloat16, moe_tp 2)"}
    rows = [{**base, "dtype": "bf16", "latency_us": [10.0, 20.0, 40.0]},
            {**base, "dtype": "fp8", "latency_us": [5.0, 30.0, 40.0], "tokens": [1, 64, 256],
             "source": "T (kernel_b, fp8_block, moe_tp 2)"}]
    tables = tmp_path / "moe.json"
    tables.write_text(json.dumps({"curves": rows}))
    assert main(["--tables", str(tables)]) == 0
    out = capsys.readouterr().out
    # ratios 0.5, 1.5, 1.0: min, median, max, and the fp8 curve's kernel
    assert "fp8/bf16  0.50  1.00  1.50  (3 counts; fp8: kernel_b)" in out
    assert "all: 3 counts, fp8/bf16 min 0.50, median 1.00, max 1.50" in out
    # two stacks at one dtype: sglang's over trtllm's, the bf16 rows left out
    kinds = [{**base, "kind": "trtllm", "dtype": "fp8", "latency_us": [10.0, 20.0, 40.0]},
             {**base, "kind": "sglang", "dtype": "fp8", "latency_us": [20.0, 20.0, 10.0],
              "source": "T (sglang_k, fp8_block, moe_tp 2)"},
             {**base, "kind": "sglang", "dtype": "bf16", "latency_us": [1.0, 1.0, 1.0]}]
    tables.write_text(json.dumps({"curves": kinds}))
    assert main(["--tables", str(tables), "--kinds", "trtllm,sglang", "--dtypes", "fp8"]) == 0
    out = capsys.readouterr().out
    assert "sglang/trtllm  0.25  1.00  2.00  (3 counts; sglang: sglang_k)" in out
