"""vLLM's Marlin MXFP4 expert layers at gpt-oss's shapes (calibrate/moe_marlin.py): the
move to another shape by hand, the floor, a tiny table read end to end, the shipped curves,
and the vLLM presets that read them (before 0.12) or not (from 0.12)."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from calibrate.aiconfigurator import find_data_root
from calibrate.moe_marlin import (
    layer_fit,
    moved,
    moved_median,
    read_marlin,
    with_floor,
)
from simulator.costs.from_config import cost_model_from_config
from simulator.costs.moe_tables import MARLIN_KIND, MOE_FILE, moe_layer_curve
from simulator.shapes import StepShape
from simulator.specs import get_hardware, get_model
from simulator.stack_presets import STACKS
from simulator.stacks import StackSection

SRC = (3584, 3072, 896, 16)  # the only shape AIConfigurator's Marlin MXFP4 rows hold
OSS20 = (2880, 2880, 32, 4)  # gpt-oss-20b: hidden, expert inter, experts, top k
# expert weights, E h i: 32 x 2,880 x 2,880 against 896 x 3,584 x 3,072
SCALE = 265_420_800 / 9_865_003_008
H100 = get_hardware("h100-sxm")


def test_the_move_keeps_tokens_per_expert_and_scales_by_the_expert_weights() -> None:
    # 16 picks over 896 experts = 4 over 32 at 7x fewer tokens: 7,168 -> 1,024
    tokens, us = moved(np.array([7.0, 7168.0]), np.array([500.0, 10_000.0]), SRC, OSS20)
    assert tokens.tolist() == pytest.approx([1.0, 1024.0], rel=1e-12)
    assert us.tolist() == pytest.approx([500 * SCALE, 10_000 * SCALE], rel=1e-12)
    assert SCALE == pytest.approx(0.0269053, rel=1e-5)


def test_the_floor_is_the_larger_curve_at_both_curves_counts() -> None:
    curve = (np.array([0.5, 10.0, 20.0]), np.array([1.0, 40.0, 100.0]))
    floor = (np.array([1.0, 16.0]), np.array([20.0, 50.0]))
    tokens, us = with_floor(curve, floor)
    # counts below the floor's first (0.5) are dropped; at 1 the curve reads
    # 1 + 0.5 x 39/9.5 = 3.05 < 20; at 10, 40 against 20 + 9 x 2 = 38; at 16, 76 (its
    # 10-20 segment) against 50; at 20, 100 against 50 + 4 x 2 = 58 (the floor's last slope)
    assert tokens.tolist() == [1.0, 10.0, 16.0, 20.0]
    assert us.tolist() == pytest.approx([20.0, 40.0, 76.0, 100.0], rel=1e-12)


def _table(tmp_path, rows: list[dict]) -> None:
    folder = tmp_path / "data" / "h100_sxm" / "moe" / "vllm" / "0.24.0"
    folder.mkdir(parents=True)
    pd.DataFrame(rows).to_parquet(folder / "moe_perf.parquet")


def _rows(kernel: str, shape: tuple[int, ...], points: dict[int, float]) -> list[dict]:
    h, i, e, k = shape
    return [{"kernel_source": kernel, "moe_dtype": "w4a16_mxfp4", "num_tokens": t,
             "hidden_size": h, "inter_size": i, "num_experts": e, "topk": k,
             "moe_tp_size": 1, "moe_ep_size": 1, "distribution": "power_law_1.2",
             "latency": ms} for t, ms in points.items()]


def test_a_tiny_table_read_end_to_end(tmp_path) -> None:
    """Marlin at the source shape, 7 and 14,336 tokens (1 and 2,048 at gpt-oss-20b's), and
    the triton kernel at 20b's own shape; tables in ms, curves in us."""
    _table(tmp_path, [*_rows("vllm_x_marlin_marlinexperts", SRC, {7: 0.5, 14_336: 80.0}),
                      *_rows("vllm_gptossmxfp4moe_triton", OSS20, {1: 0.06, 4096: 1.6})])
    (row,) = list(read_marlin(tmp_path, "power_law_1.2", (1, 2)))  # no tp 2 rows: none
    assert (row["kind"], row["hardware"], row["model"], row["tp"]) == (
        MARLIN_KIND, "h100-sxm", "gpt-oss-20b", 1)
    # 1 token: moved 500 us x SCALE = 13.5 us, under the floor's 60; 2,048: 80,000 x SCALE
    # = 2,152 us against the floor's 60 + 2,047 x 1,540 / 4,095 = 829.8; 4,096: the moved
    # curve's one slope continues, 13.45 + 4,095 x (2,152.4 - 13.45) / 2,047 = 4,292.8
    slope = (80_000 - 500) * SCALE / 2047
    assert row["tokens"] == [1.0, 2048.0, 4096.0]
    assert row["latency_us"] == pytest.approx([60.0, 80_000 * SCALE, 500 * SCALE
                                               + 4095 * slope], abs=1e-4)
    assert "vllm_x_marlin_marlinexperts" in row["source"]
    assert "floored by vllm_gptossmxfp4moe_triton" in row["source"]


def test_a_second_marlin_shape_is_refused(tmp_path) -> None:
    _table(tmp_path, [*_rows("m_marlin", SRC, {1: 0.1, 8: 0.5}),
                      *_rows("m_marlin", (4096, 1536, 128, 8), {1: 0.1, 8: 0.5})])
    with pytest.raises(ValueError, match="at 2 shapes"):
        list(read_marlin(tmp_path, "power_law_1.2", (1,)))


def test_the_shipped_curve_at_a_moved_count_by_hand() -> None:
    """H100, tp 1: Marlin's 16,384-token row (83.044489 ms in vLLM 0.24.0's table) lands at
    16,384 / 7 tokens of gpt-oss-20b, far above the triton kernel there."""
    curve = moe_layer_curve(get_model("gpt-oss-20b"), "h100-sxm", "mxfp4", 1, MARLIN_KIND)
    triton = moe_layer_curve(get_model("gpt-oss-20b"), "h100-sxm", "mxfp4", 1, "vllm")
    assert curve is not None and triton is not None
    assert (curve.kind, triton.kind) == (MARLIN_KIND, "vllm")
    at = 16_384 / 7
    assert curve.time_s(at) == pytest.approx(83_044.489 * SCALE * 1e-6, rel=1e-6)
    assert curve.time_s(1.0) == triton.time_s(1.0)  # the floor at one token
    assert curve.time_s(8192.0) > 2 * triton.time_s(8192.0)
    rows = json.loads(MOE_FILE.read_text())["curves"]
    mine = [r for r in rows if r["kind"] == MARLIN_KIND]
    assert {(r["hardware"], r["model"]) for r in mine} == {
        (hw, m) for hw in ("h100-sxm", "h200") for m in ("gpt-oss-20b", "gpt-oss-120b")}


def test_other_layers_read_vllms_own_tables_under_the_marlin_kind() -> None:
    mixtral = get_model("mixtral-8x7b")
    got = moe_layer_curve(mixtral, "h100-sxm", "bf16", 2, MARLIN_KIND)
    assert got is not None and got == moe_layer_curve(mixtral, "h100-sxm", "bf16", 2, "vllm")


def _preset(version: str):
    preset = StackSection("vllm-v1", version).preset()
    assert preset is not None
    return preset


def test_vllm_before_0_12_prices_gpt_oss_experts_by_marlin() -> None:
    assert {p.version: p.moe_kind for p in STACKS["vllm-v1"]} == {
        "0.8": MARLIN_KIND, "0.8.4": MARLIN_KIND, "0.8.5": MARLIN_KIND, "0.9": MARLIN_KIND,
        "0.12": None, "0.14": None}
    assert _preset("0.11").version == "0.9" and _preset("0.13").version == "0.12"
    model = get_model("gpt-oss-20b")
    step = StepShape(num_prefill_tokens=8192, prefill_attn_work=8192 * 4096.0, num_admitted=1)
    out = {}
    for version in ("0.11", "0.12"):
        kind = _preset(version).moe_kind
        cost, used = cost_model_from_config({}, model, H100, 1, "mxfp4", "bf16", stack="vllm",
                                            stack_moe_kind=kind)
        out[version] = cost.step_time(step)
        assert f"experts: {kind or 'vllm'} MoE kernels" in used, used
    # 24 layers x (8,009 - 3,121 us) of one 8,192-token step: about 117 ms more on Marlin
    assert out["0.11"] - out["0.12"] == pytest.approx(24 * (8009.0 - 3121.1) * 1e-6, rel=0.01)


def test_marlins_padding_by_hand() -> None:
    """gpt-oss-120b at tp 1: hidden 2,880 -> 3,072 (256s), expert inter 2,880 -> 2,944
    (128s); at tp 2 each GPU's 1,440 -> 1,536. MXFP4: 4.25 bits a weight."""
    m = get_model("gpt-oss-120b")
    experts = 36 * 128 * 3 * 2880 * 2880
    assert m.params_experts == experts
    one = experts * (3072 * 2944 - 2880 * 2880) / (2880 * 2880) * 4.25 / 8
    two = experts * (3072 * 1536 * 2 - 2880 * 2880) / (2880 * 2880) * 4.25 / 8
    assert m.expert_pad_bytes("mxfp4", 1, 256, 128) == round(one)
    assert m.expert_pad_bytes("mxfp4", 2, 256, 128) == round(two)
    # 60.69 GiB of checkpoint + 5.13 GiB: vLLM 0.10.1 logged "Model loading took 65.9651
    # GiB" on an H100 with the Marlin backend (vllm-project/vllm#23278)
    assert (m.weight_bytes("mxfp4") + one) / 2**30 == pytest.approx(65.97, abs=0.2)
    assert get_model("llama-3.1-8b").expert_pad_bytes("bf16", 1, 256, 128) == 0


def test_vllm_counts_marlins_padding_where_it_runs_marlin() -> None:
    m = get_model("gpt-oss-120b")
    pad = m.expert_pad_bytes("mxfp4", 1, 256, 128)
    own = m.weight_bytes("mxfp4")
    a100, b200 = get_hardware("a100-80gb"), get_hardware("b200")
    cases = {("vllm-v1", "0.11", H100): own + pad, ("vllm-v1", "0.12", H100): own,
             ("vllm-v1", "0.14", a100): own + pad,  # below SM90: Marlin in every release
             ("vllm-v1", "0.11", b200): own,  # Blackwell: FlashInfer's kernels
             ("sglang", "0.5", H100): own}
    for (stack, version, hw), want in cases.items():
        preset = StackSection(stack, version).preset()
        assert preset is not None
        assert preset.weight_bytes(m, hw, 1, "mxfp4") == want, (stack, version, hw.name)
    assert _preset("0.11").weight_bytes(get_model("gpt-oss-20b"), H100, 1, "bf16") == \
        get_model("gpt-oss-20b").weight_bytes("bf16")


def test_a_deployment_sizes_its_cache_after_the_padding() -> None:
    from simulator.deployment import resolve
    point = {"model": {"name": "gpt-oss-120b", "weight_dtype": "mxfp4"},
             "hardware": {"gpu": "h100-sxm", "tp": 1}}
    blocks = {v: resolve({**point, "stack": {"name": "vllm-v1", "version": v}}).kv_blocks
              for v in ("0.11", "0.12")}
    pad = get_model("gpt-oss-120b").expert_pad_bytes("mxfp4", 1, 256, 128)
    block = 16 * 36_864  # 16 tokens x 18 full layers x K, V x 8 heads x 64 x 2 bytes
    # the pool is what 0.9 of the GPU leaves after the weights: the padding comes out whole
    assert blocks["0.12"] - blocks["0.11"] == pytest.approx(pad / block, abs=1)


@pytest.mark.skipif(find_data_root() is None, reason="needs the aiconfigurator extra: "
                    "pip install -e '.[aiconfigurator]'")
def test_the_move_reads_measured_marlin_shapes_within_15_percent(capsys) -> None:
    """benchmarks/moe_move_check.py: int4 Marlin moved between the ten shapes SGLang 0.5.10
    timed on the H100 reads within 15% of the measured curve for 80% of the 90 pairs at
    4,096-16,384 tokens, and the median within 2%."""
    import sys
    from pathlib import Path
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
    import moe_move_check
    assert moe_move_check.main() == 0
    rows = {line[:64].strip(): [float(v) for v in line[64:].split()]
            for line in capsys.readouterr().out.splitlines()[1:] if "one token" not in line}
    for name in ("median", "p10", "p90"):
        row = rows[f"h100_sxm int4, 90 pairs, {name}"]
        assert len(row) == 6
        want = (0.98, 1.02) if name == "median" else (0.85, 1.15)
        assert all(want[0] <= v <= want[1] for v in row[3:]), (name, row)


def test_the_layer_fit_is_the_one_token_line() -> None:
    """One-token latencies exactly 30 us + reads / 1,500 bytes a us (reads: k x 3 h i / tp
    at half a byte): the fit returns 30 us and 1,500 bytes a us."""
    shapes = [(1024, 512, 64, 8), (2048, 1024, 128, 8), (4096, 2048, 16, 2)]
    curves = {}
    for h, i, e, k in shapes:
        reads = k * 3 * h * i * 0.5
        curves[(h, i, e, k)] = (np.array([1.0, 64.0]), np.array([30.0 + reads / 1.5e3, 500.0]))
    c0, bytes_per_us = layer_fit(curves, 1)
    assert (c0, bytes_per_us) == (pytest.approx(30.0, abs=1e-6), pytest.approx(1500.0))
    # at tp 2 each GPU reads half, so the same latencies fit a line with twice the slope
    assert layer_fit(curves, 2) == (pytest.approx(30.0, abs=1e-6), pytest.approx(750.0))


def test_the_median_move_keeps_the_overhead_unscaled() -> None:
    """Three sources whose moves to gpt-oss-20b's shape read 2x, 3x and 5x the overhead-free
    part: the median is the 3x one, plus the 20 us kept out of the scaling."""
    grid = np.array([1.0, 2.0])
    dst = OSS20
    curves = {}
    for factor, src in zip((2.0, 3.0, 5.0), [(2880, 2880, 32, 4), (5760, 2880, 32, 4),
                                             (2880, 2880, 64, 8)], strict=True):
        # same tokens per expert; weight ratio dst/src: 1, 1/2, 1/2 -> sources at factor x
        # the weight ratio back
        ratio = (dst[2] * dst[0] * dst[1]) / (src[2] * src[0] * src[1])
        curves[src] = (np.array([1.0, 2.0]), 20.0 + np.array([10.0, 16.0]) * factor / ratio)
    out = moved_median(curves, dst, 20.0, grid)
    assert out.tolist() == pytest.approx([20.0 + 30.0, 20.0 + 48.0], rel=1e-12)


def test_the_a100_reads_vllms_marlin_in_every_release() -> None:
    """No MXFP4 Marlin or triton table on an A100: its ``vllm`` MXFP4 curves are SGLang's
    int4 Marlin moved (kind ``vllm``: on an A100 that is what vLLM runs), and the presets
    before 0.12 reach them through the fallback."""
    model = get_model("gpt-oss-20b")
    curve = moe_layer_curve(model, "a100-80gb", "mxfp4", 1, "vllm")
    assert curve is not None and curve.kind == "vllm"
    assert "Marlin int4 rows at 10 shapes" in curve.source and "a100_sxm/moe/sglang" in \
        curve.source
    assert moe_layer_curve(model, "a100-80gb", "mxfp4", 1, MARLIN_KIND) == curve
    # one token reads 4 experts of 3 x 2,880 x 2,880 MXFP4 weights (52.9 MB): more than the
    # fitted 30.5 us a layer plus those bytes at the A100's 2,039 GB/s peak
    assert curve.time_s(1.0) > (30.5 + 4 * 3 * 2880 * 2880 * 4.25 / 8 / 2.039e6) * 1e-6
