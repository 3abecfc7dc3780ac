"""DeepSeek-R1 (DeepSeek-V3's shapes): multi-head latent attention (ModelSpec's
kv_lora_rank, q_lora_rank, rope_head_dim) over three dense layers and 58 MoE layers with a
shared expert. Its parameter count and cache by hand, its config.json read, the prior's
prefill and decode attention FLOPs, a cache every tensor-parallel GPU holds whole, one step
and many agreeing bit for bit, and its block-FP8 expert curves."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from roofline_support import assert_one_and_many_agree

from calibrate.aiconfigurator import find_data_root
from simulator.costs.moe_tables import MOE_FILE
from simulator.costs.roofline import RooflineCost
from simulator.errors import ConfigError
from simulator.shapes import StepShape
from simulator.specs.hardware import get_hardware
from simulator.specs.model_spec import ModelSpec
from simulator.specs.models import get_model, model_from_hf_config

R1 = get_model("deepseek-r1")
H, N, D, R, KV, Q = 7168, 128, 128, 64, 512, 1536
H200 = get_hardware("h200")


def test_r1_parameters_by_hand() -> None:
    attention = (H * Q + Q * N * (D + R) + Q  # query down, up, its norm
                 + H * (KV + R) + KV + KV * N * 2 * D  # latent down, its norm, up (K and V)
                 + N * D * H)  # output
    assert R1.params_attention_per_layer == attention == 187_107_328
    expert = 58 * 3 * H * 2048  # one routed expert over the 58 MoE layers
    shared = (61 * (attention + 2 * H) + H  # attention and norms, the final norm
              + 3 * 3 * H * 18432  # the first three layers' dense MLPs
              + expert + 58 * H * 256  # the shared expert, the routers
              + 2 * 129280 * H)  # embedding and lm_head
    assert R1.params_shared == shared
    assert R1.params_total == shared + 256 * expert == 671_026_404_352
    assert R1.params_active == shared + 8 * expert == 37_552_282_624
    # DeepSeek's figures: 671B total, 37B activated a token
    assert R1.params_total == pytest.approx(671e9, rel=1e-3)
    assert R1.params_active == pytest.approx(37e9, rel=0.015)


def test_the_cache_holds_one_latent_a_token_for_every_head() -> None:
    assert R1.kv_bytes_per_token("bf16") == 61 * (512 + 64) * 2 == 70_272
    assert R1.kv_bytes_per_token("fp8") == 35_136
    # a grouped-query model of the same heads would cache 2 x 61 x 128 x 128 values
    assert 2 * 61 * 128 * 128 * 2 / R1.kv_bytes_per_token("bf16") == pytest.approx(56.9, 0.01)
    # tensor parallel: every GPU holds the whole cache (one latent, no head to split)
    for tp in (1, 8):
        k = RooflineCost(R1, H200, tp, "fp8", "fp8")._k
        assert k.kv_bytes_per_token == 35_136.0
    # attention data parallel: each rank its own requests'
    dep = RooflineCost(R1, H200, 1, "fp8", "fp8", attention_dp=8)._k
    assert dep.kv_bytes_per_token == 35_136.0 / 8


def test_prefill_and_decode_pairs_cost_what_latent_attention_computes() -> None:
    # prefill: QK^T over the 128 + 64 key width, PV over 128; decode, absorbed: QK^T over
    # the 512 latent + 64 rotary, PV over the 512 latent
    assert R1.attention_flops_per_pair == 2 * 61 * N * (2 * D + R) == 4_997_120
    assert R1.decode_attention_flops_per_pair == 2 * 61 * N * (2 * KV + R) == 16_990_208
    # an ordinary model: the two are the same 4 L n_h d_h
    llama = get_model("llama-3.1-8b")
    assert llama.decode_attention_flops_per_pair == llama.attention_flops_per_pair \
        == 4 * 32 * 32 * 128
    # 64 decode rows of 4,000 tokens, by hand. On one GPU the 128 heads' latent-space
    # products outweigh the latent reads; at TP 8 each GPU computes 16 heads but still
    # reads every latent, and the reads win.
    shape = StepShape(num_decode_seqs=64, decode_context_tokens=64 * 4000)
    for tp, bound in ((1, "compute"), (8, "memory")):
        k = RooflineCost(R1, H200, tp, "fp8", "fp8")._k
        attn_c = 16_990_208 * 64 * 4000 * k.inv_peak_attn * k.compute_scale
        attn_m = 35_136 * (64 * 4000 + 64) / k.kv_mem_bw
        assert (attn_c > attn_m) == (bound == "compute")
        assert RooflineCost(R1, H200, tp, "fp8", "fp8").terms(shape).attention_s \
            == pytest.approx(max(attn_c, attn_m), rel=1e-12)
    cost = RooflineCost(R1, H200, 8, "fp8", "fp8")
    k = cost._k
    # a 2,048-token prompt from an empty cache: its pairs at the prefill rate
    prefill = StepShape(num_prefill_tokens=2048, prefill_attn_work=2048 * 1024.5)
    flops = 4_997_120 * 2048 * 1024.5
    assert cost.terms(prefill).attention_s == pytest.approx(
        max(flops * k.inv_peak_attn * k.compute_scale, 35_136 * 2048 / k.kv_mem_bw),
        rel=1e-12)


@pytest.mark.parametrize("tp, dp", [(8, 1), (1, 8)])
def test_one_step_and_many_agree_bit_for_bit(tp: int, dp: int) -> None:
    cost = RooflineCost(R1, H200, tp, "fp8", "fp8", attention_dp=dp)
    assert_one_and_many_agree(cost)
    # a speculative step's verified drafts are decode pairs
    spec = StepShape(num_decode_seqs=16, decode_context_tokens=16 * 900, num_spec_tokens=48,
                     spec_attn_work=48 * 901.0)
    k = cost._k
    base = cost.terms(StepShape(num_decode_seqs=16, decode_context_tokens=16 * 900,
                                num_spec_tokens=48))
    extra = cost.terms(spec).compute_s - base.compute_s
    assert extra == pytest.approx(R1.decode_attention_flops_per_pair * 48 * 901.0
                                  * k.inv_peak_attn * k.compute_scale, rel=1e-9)


def _aic_config(name: str) -> Path:
    root = find_data_root()
    if root is None:
        pytest.skip("aiconfigurator-core is not installed (pip install -e '.[aiconfigurator]')")
    path = root.parent / "model_configs" / f"{name}_config.json"
    if not path.is_file():
        pytest.skip(f"{path} is not in this aiconfigurator-core")
    return path


def test_the_catalogue_entries_are_their_config_json() -> None:
    r1 = _aic_config("deepseek-ai--DeepSeek-R1")
    assert model_from_hf_config(r1, name="deepseek-r1") == R1
    v3 = _aic_config("deepseek-ai--DeepSeek-V3")
    assert model_from_hf_config(v3, name="deepseek-r1") == R1
    maverick = _aic_config("meta-llama--Llama-4-Maverick-17B-128E-Instruct")
    assert model_from_hf_config(maverick, name="llama-4-maverick") \
        == get_model("llama-4-maverick")


def test_a_latent_config_that_cannot_be_is_refused() -> None:
    cfg = dict({
        "model_type": "deepseek_v3", "num_hidden_layers": 4, "hidden_size": 256,
        "num_attention_heads": 4, "intermediate_size": 512, "vocab_size": 1000,
        "max_position_embeddings": 2048, "kv_lora_rank": 64, "qk_nope_head_dim": 32,
        "v_head_dim": 48, "qk_rope_head_dim": 16})
    with pytest.raises(ConfigError, match="qk_nope_head_dim=32 and v_head_dim=48"):
        model_from_hf_config(cfg)
    with pytest.raises(ConfigError, match="num_kv_heads must be 1"):
        ModelSpec("toy", 4, 256, 4, 2, 64, 512, 1000, 2048, kv_lora_rank=64)
    with pytest.raises(ConfigError, match="kv_lora_rank=0"):
        ModelSpec("toy", 4, 256, 4, 1, 64, 512, 1000, 2048, rope_head_dim=16)
    # experts named but no layer holds them
    with pytest.raises(ConfigError, match="no layer has experts"):
        model_from_hf_config({**cfg, "v_head_dim": 32, "n_routed_experts": 8,
                              "first_k_dense_replace": 4})
    # a dense latent model (DeepSeek-V2-Lite-like, no experts) reads without a layer mix
    dense = model_from_hf_config({**cfg, "v_head_dim": 32})
    assert (dense.kv_lora_rank, dense.q_lora_rank, dense.num_kv_heads, dense.num_experts) \
        == (64, 0, 1, 1)
    assert dense.params_attention_per_layer == 256 * 4 * 48 + 256 * 80 + 64 + 64 * 4 * 64 \
        + 4 * 32 * 256


def test_tensorrt_llms_fp8_experts_read_the_block_rows_for_r1() -> None:
    rows = json.loads(MOE_FILE.read_text())["curves"]
    r1 = [r for r in rows if r["model"] == "deepseek-r1" and r["kind"] == "trtllm"
          and r["dtype"] == "fp8" and r["hardware"] == "h200"]
    assert {(r["tp"], r.get("ep", 1)) for r in r1} == {(1, 1), (2, 1), (4, 1), (8, 1),
                                                      (1, 2), (1, 4), (1, 8)}
    assert all("fp8_block" in r["source"] for r in r1)
    # Qwen3's stay on the per-tensor rows the table has for it
    qwen = [r for r in rows if r["model"] == "qwen3-235b-a22b" and r["kind"] == "trtllm"
            and r["dtype"] == "fp8"]
    assert qwen and not any("fp8_block" in r["source"] for r in qwen)
    # SGLang times FP8 experts in block FP8 only: its fp8 curves are its own kernels' (Triton
    # on Hopper, FlashInfer's TensorRT-LLM MoE on the B200)
    sglang = [r for r in rows if r["kind"] == "sglang" and r["dtype"] == "fp8"]
    assert sglang and all("(sglang_" in r["source"] and ", fp8_block," in r["source"]
                          for r in sglang)
    assert any("sglang_fused_moe_triton" in r["source"] for r in sglang)
    assert {r["model"] for r in sglang} >= {"deepseek-r1", "qwen3-235b-a22b"}


def test_the_engine_refuses_latent_attention() -> None:
    pytest.importorskip("torch")
    from engine.models import hf_config_dict

    with pytest.raises(ConfigError, match="kv_lora_rank=512"):
        hf_config_dict(R1)


def test_grouped_query_read_rules_leave_latent_attention_alone() -> None:
    from simulator.stack_presets import STACKS

    # TensorRT-LLM 0.10 reads a GQA cache once per query head where it has no XQA kernel
    # for the group; latent attention has its own kernels: one read
    old = next(p for p in STACKS["trtllm"] if p.version == "0.10")
    assert old.decode_kv_reads(get_model("llama-3.1-8b"), 1, "fp8") == 4.0  # G = 32 / 8
    assert old.decode_kv_reads(R1, 8, "fp8") == 1.0


def test_the_pool_holds_a_copy_of_the_latents_on_every_tensor_parallel_gpu() -> None:
    """resolve(): at TP 8 every GPU holds the whole latent cache, so a token of the pool
    takes 8 x 35,136 bytes of the 8 GPUs' memory, by hand from the capacity rule; a GQA
    model copies a KV head once the GPUs outnumber its heads (Qwen3-235B: 4, at TP 8
    twice the bytes a token)."""
    from simulator.deployment import resolve
    from simulator.kv_config import KVCacheConfig

    kv = {"gpu_memory_utilization": 0.9, "memory_share": "total", "reserve_gb": 2.0,
          "block_size": 32}
    dep = resolve({"model": {"name": "deepseek-r1", "weight_dtype": "fp8", "kv_dtype": "fp8"},
                   "hardware": {"gpu": "h200", "tp": 8}, "kv": kv})
    left = 8 * H200.memory_bytes * 0.9 - R1.weight_bytes("fp8") - 8 * 2e9
    assert dep.kv_blocks == int(left // (8 * 35_136 * 32))
    assert KVCacheConfig().pool_bytes_per_token(R1, "fp8", 1) == 35_136
    qwen = get_model("qwen3-235b-a22b")
    per_token = qwen.kv_bytes_per_token("fp8")
    assert KVCacheConfig().pool_bytes_per_token(qwen, "fp8", 8) == 2 * per_token
    assert KVCacheConfig().pool_bytes_per_token(qwen, "fp8", 4) == per_token
