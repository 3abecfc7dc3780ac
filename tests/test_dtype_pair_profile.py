"""fp8 weights with a bf16 KV cache (vLLM's FP8 default): file names, lookup, and the
composition that prices its GEMMs as fp8 and its attention as bf16."""

from __future__ import annotations

import pytest

from simulator.costs.from_config import cost_model_from_config
from simulator.costs.prior_efficiency import prior_note
from simulator.costs.profile import PROFILES_DIR, load_profile, profile_file_name
from simulator.costs.roofline import RooflineCost
from simulator.shapes import StepShape
from simulator.specs.dtypes import dtype_label
from simulator.specs.hardware import get_hardware
from simulator.specs.models import MODELS

H100, L40S = get_hardware("h100-sxm"), get_hardware("l40s")
LLAMA8B = MODELS["llama-3.1-8b"]


@pytest.mark.parametrize("weight, kv, label", [
    ("fp8", "bf16", "fp8-kvbf16"), ("fp8", "fp16", "fp8-kvfp16"), ("fp8", "fp8", "fp8"),
    ("bf16", "bf16", "bf16"), ("fp16", "bf16", "fp16"), ("bf16", "fp8", "bf16-kvfp8"),
    ("int4", "fp8", "int4"), ("FP8", "BF16", "fp8-kvbf16"),
])
def test_dtype_label(weight: str, kv: str, label: str) -> None:
    assert dtype_label(weight, kv) == label


def test_pair_files_say_what_they_price() -> None:
    paths = sorted(PROFILES_DIR.glob("*__fp8-kvbf16__*.json"))
    assert len(paths) == 10  # 8B tp1 and 70B tp1/2/4/8 on h100-sxm and h200
    for path in paths:
        p = load_profile(path)
        assert (p.weight_dtype, p.kv_dtype, p.form) == ("fp8", "bf16", "piecewise")
        assert path.name == profile_file_name(p.hardware, p.model, "fp8-kvbf16", p.tp)
        assert p.provenance["notes"].startswith("python -m calibrate.aic_dtype_pairs")


def test_fp8_weights_bf16_kv_find_the_pair_profile() -> None:
    _, used = cost_model_from_config({}, LLAMA8B, H100, 1, "fp8", "bf16")
    assert used.startswith("h100-sxm__llama-3.1-8b__fp8-kvbf16__tp1.json (measured per "
                           "operation by NVIDIA")
    _, used = cost_model_from_config({}, LLAMA8B, H100, 1, "fp8", "fp16")  # fp16 = bf16
    assert used.startswith("h100-sxm__llama-3.1-8b__fp8-kvbf16__tp1.json")
    _, used = cost_model_from_config({}, LLAMA8B, H100, 1, "fp8", "fp8")  # unchanged
    assert used.startswith("h100-sxm__llama-3.1-8b__fp8__tp1.json")
    cost, used = cost_model_from_config({}, LLAMA8B, L40S, 1, "fp8", "bf16")  # no tables
    assert used == f"roofline prior (built on the fly), {prior_note('l40s', 'fp8')}"
    assert isinstance(cost, RooflineCost)


def test_pair_sits_between_fp8_and_bf16() -> None:
    def step(dtypes: str, rows: int, context: int) -> float:
        p = load_profile(PROFILES_DIR / f"h100-sxm__llama-3.1-8b__{dtypes}__tp1.json")
        shape = StepShape(num_decode_seqs=rows, decode_context_tokens=rows * context)
        return p.build(LLAMA8B, H100).step_time(shape)

    # Batch 1, short context: fp8 GEMMs dominate, so the pair costs what fp8 does (5.33 vs
    # 5.17 ms; bf16 6.57 ms).
    assert step("fp8-kvbf16", 1, 128) == pytest.approx(step("fp8", 1, 128), rel=0.05)
    assert step("fp8-kvbf16", 1, 128) < 0.85 * step("bf16", 1, 128)
    # 64 rows at 8,192 tokens: 64 x 8,192 x 128 KiB = 64 GiB of bf16 KV read per step
    # dominates; fp8 KV halves it, so the pair is slower than fp8 and near bf16.
    assert step("fp8-kvbf16", 64, 8192) > 1.3 * step("fp8", 64, 8192)
    assert step("fp8-kvbf16", 64, 8192) == pytest.approx(step("bf16", 64, 8192), rel=0.15)
    # (28.3 ms against fp8 16.9 ms and bf16 29.4 ms.) A 4,096-token prefill is GEMM-bound:
    # fp8's cost (68.9 vs 66.8 ms; bf16 94.5 ms).
    prefill = StepShape(num_prefill_tokens=4096, prefill_attn_work=4096 * 2048.0)
    pair, fp8 = (load_profile(PROFILES_DIR / f"h100-sxm__llama-3.1-8b__{d}__tp1.json")
                 .build(LLAMA8B, H100).step_time(prefill) for d in ("fp8-kvbf16", "fp8"))
    assert pair == pytest.approx(fp8, rel=0.05)


def test_composer_takes_gemms_from_fp8_and_attention_from_bf16() -> None:
    aic = pytest.importorskip("calibrate.aiconfigurator")
    pairs = pytest.importorskip("calibrate.aic_dtype_pairs")
    root = aic.find_data_root()
    if root is None:
        pytest.skip("aiconfigurator-core 0.12.0 tables not installed")
    system, version = aic.SYSTEMS["h100-sxm"]
    tables = aic.SystemTables(root, system, version)
    chunks, contexts = [(512, 0)], [2048] * 8
    pair = pairs.PairComposer(tables, LLAMA8B, "fp8", 1, "bf16").step_ops(chunks, contexts)
    fp8 = aic.Composer(tables, LLAMA8B, "fp8", 1).step_ops(chunks, contexts)
    bf16 = aic.Composer(tables, LLAMA8B, "bf16", 1).step_ops(chunks, contexts)
    for op in ("qkv_gemm", "proj_gemm", "gate_ffn1_gemm", "ffn2_gemm", "logits_gemm"):
        assert pair[op] == fp8[op]
    for op in ("context_attention", "generation_attention", "add_norm_1", "act_gate"):
        assert pair[op] == bf16[op]
    assert pair["generation_attention"] > fp8["generation_attention"]


@pytest.mark.parametrize("stack", ["vllm", "sglang"])
def test_each_stack_has_its_own_pair_files(stack: str) -> None:
    folder = PROFILES_DIR / "stacks" / stack
    paths = sorted(folder.glob("*__fp8-kvbf16__*.json"))
    assert len(paths) == 10  # as the TensorRT-LLM ones: 8B tp1, 70B tp1/2/4/8, H100 and H200
    for path in paths:
        p = load_profile(path)
        assert (p.weight_dtype, p.kv_dtype) == ("fp8", "bf16")
        assert p.provenance["aiconfigurator"]["backend"] == stack
        assert p.provenance["aiconfigurator"]["fmha"] == (
            "context attention in bf16 over the bf16 KV cache")


def test_vllm_fp8_checkpoint_is_priced_by_vllms_tables() -> None:
    # vLLM's FP8 default (fp8 weights, bf16 KV) under a vLLM stack: its own pair, not
    # TensorRT-LLM's (the lookup before the vLLM pairs existed).
    _, used = cost_model_from_config({}, LLAMA8B, H100, 1, "fp8", "bf16", stack="vllm")
    assert used.startswith("stacks/vllm/h100-sxm__llama-3.1-8b__fp8-kvbf16__tp1.json "
                           "(measured per operation by NVIDIA")
    assert "backend vllm 0.24.0" in used
    # Without a stack, TensorRT-LLM's pair as before.
    _, used = cost_model_from_config({}, LLAMA8B, H100, 1, "fp8", "bf16")
    assert used.startswith("h100-sxm__llama-3.1-8b__fp8-kvbf16__tp1.json")


def test_stack_pair_composer_reads_that_stacks_tables() -> None:
    aic = pytest.importorskip("calibrate.aiconfigurator")
    pairs = pytest.importorskip("calibrate.aic_dtype_pairs")
    backends = pytest.importorskip("calibrate.aic_backends")
    root = aic.find_data_root()
    if root is None:
        pytest.skip("aiconfigurator-core 0.12.0 tables not installed")
    system, version = backends.systems("vllm")["h100-sxm"]
    tables = aic.SystemTables(root, system, version, "vllm")
    chunks, contexts = [(512, 0)], [2048] * 8
    pair = pairs.PairComposer(tables, LLAMA8B, "fp8", 1, "bf16").step_ops(chunks, contexts)
    fp8 = aic.Composer(tables, LLAMA8B, "fp8", 1).step_ops(chunks, contexts)
    bf16 = aic.Composer(tables, LLAMA8B, "bf16", 1).step_ops(chunks, contexts)
    for op in ("qkv_gemm", "proj_gemm", "gate_ffn1_gemm", "ffn2_gemm"):
        assert pair[op] == fp8[op]
    for op in ("context_attention", "generation_attention"):
        assert pair[op] == bf16[op]
    # And the file written from these tables prices a step as the tables do: its fitted
    # piecewise model within the held-out error its fit reports for mixed steps (this shape
    # is one of the sweep's; the file says 20.8%: the sweep's m + 1 prefill steps, on the
    # fp8 GEMMs' cliff past m = 512, pull the smooth form, calibrate/aiconfigurator.py
    # PROMPT_OFFSETS) of the composed sum, 17.26 ms.
    path = PROFILES_DIR / "stacks" / "vllm" / "h100-sxm__llama-3.1-8b__fp8-kvbf16__tp1.json"
    shape = StepShape(num_decode_seqs=8, decode_context_tokens=8 * 2048,
                      num_prefill_tokens=512, prefill_attn_work=512 * 256.0)
    profile = load_profile(path)
    fitted = profile.build(LLAMA8B, H100).step_time(shape)
    bound = profile.fit["by_phase"]["mixed"]["max_ape"]
    assert 0.0 < bound < 0.25
    assert fitted == pytest.approx(sum(pair.values()), rel=bound)
