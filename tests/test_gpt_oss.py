"""gpt-oss in the catalogue: its sizes, its MXFP4 experts, its sliding-window layers.

Every figure is worked by hand from the Hugging Face configs of openai/gpt-oss-120b and
-20b (hidden 2,880, 64 query / 8 KV heads of 64, experts of 2,880, 4 a token, vocab
201,088, every other layer a 128-token window) and OpenAI's model card (116.83B and 20.91B
parameters, 5.13B and 3.61B active without the embedding).
"""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path

import pytest

from simulator.costs.moe_tables import moe_layer_curve
from simulator.costs.roofline import RooflineCost
from simulator.costs.weight_only import weight_only
from simulator.errors import ConfigError
from simulator.kv_config import KVCacheConfig
from simulator.shapes import StepShape
from simulator.specs import get_hardware, get_model
from simulator.specs.dtypes import natural_kv_dtype, weight_dtype_bytes
from simulator.specs.model_spec import ModelSpec
from simulator.specs.models import model_from_hf_config

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks.trtllm_bench_settings import checkpoint_elements, engine_settings  # noqa: E402

# per layer: q and o 2 x 2,880 x 4,096, k and v 2 x 2,880 x 512, router 2,880 x 128,
# two norms 2 x 2,880
SHARED_PER_LAYER = 23_592_960 + 2_949_120 + 368_640 + 5_760
EMBEDDING = 2 * 201_088 * 2_880  # untied: embedding and lm_head
EXPERT = 3 * 2_880 * 2_880  # gate, up and down of one expert in one layer


def test_parameter_counts_match_the_model_card() -> None:
    big, small = get_model("gpt-oss-120b"), get_model("gpt-oss-20b")
    shared_120 = 36 * SHARED_PER_LAYER + EMBEDDING + 2_880
    assert big.params_total == shared_120 + 128 * 36 * EXPERT == 116_789_048_640
    assert big.params_total == pytest.approx(116.83e9, rel=0.001)  # biases, sinks left out
    assert big.params_active - 201_088 * 2_880 == pytest.approx(5.13e9, rel=0.002)
    assert small.params_total == pytest.approx(20.91e9, rel=0.001)
    assert small.params_active - 201_088 * 2_880 == pytest.approx(3.61e9, rel=0.002)


def test_mxfp4_quantises_the_experts_only() -> None:
    m = get_model("gpt-oss-120b")
    assert weight_dtype_bytes("mxfp4") == 4.25 / 8  # 32 four-bit values and one 8-bit scale
    experts = 128 * 36 * EXPERT  # 114,661,785,600 weights at 17/32 of a byte
    shared = m.params_total - experts  # 2,127,263,040 at 2 bytes
    assert m.weight_bytes("mxfp4") == experts * 17 // 32 + 2 * shared == 65_168_599_680
    # a checkpoint that quantised everything but the embedding would be smaller
    everything = dataclasses.replace(m, experts_only_quantised=False)
    assert everything.weight_bytes("mxfp4") < m.weight_bytes("mxfp4")
    assert natural_kv_dtype("mxfp4") == "bf16"
    assert weight_only("mxfp4", get_hardware("h100-sxm"))  # W4A16: bf16 math


def test_kv_cache_counts_the_full_layers() -> None:
    m = get_model("gpt-oss-120b")
    assert (m.full_layers, m.sliding_layers, m.sliding_window) == (18, 18, 128)
    assert m.kv_bytes_per_token("bf16") == 2 * 18 * 8 * 64 * 2 == 36_864
    assert m.window_kv_bytes_per_token("fp8") == 2 * 18 * 8 * 64 == 18_432
    # the same pool holds twice the tokens a model without windows would
    kv = KVCacheConfig(block_size=16, gpu_memory_utilization=0.9)
    args = {"memory_bytes": get_hardware("h200").memory_bytes, "tp": 1,
            "weight_bytes": m.weight_bytes("mxfp4")}
    windows = kv.capacity_blocks(**args, kv_bytes_per_token=m.kv_bytes_per_token("bf16"))
    no_windows = dataclasses.replace(m, sliding_layers=0, sliding_window=0)
    full = kv.capacity_blocks(**args, kv_bytes_per_token=no_windows.kv_bytes_per_token("bf16"))
    assert windows // 2 == full


def _prior(**knobs: float) -> RooflineCost:
    return RooflineCost(get_model("gpt-oss-20b"), get_hardware("h200"), 1, "mxfp4", "fp8",
                        compute_efficiency=0.5, kv_memory_efficiency=0.8, moe_kind="",
                        **knobs)


def test_decode_reads_a_window_of_each_row_in_the_window_layers() -> None:
    cost, hw = _prior(), get_hardware("h200")
    rows, context = 64, 64 * 1000
    terms = cost.terms(StepShape(0, 0, rows, context, 0, 0))
    per_token = 2 * 12 * 8 * 64  # fp8: 12 full layers, and 12 window layers alike
    # full layers read every row's context, window layers 128 tokens of each; both write
    # the rows' new tokens
    read = per_token * (context + rows) + per_token * (rows * 128 + rows)
    assert read == 888_668_160
    assert terms.attention_s == pytest.approx(read / (hw.bandwidth_gbps * 1e9 * 0.8), rel=1e-12)
    # without windows all 24 layers would read the whole context
    dense = dataclasses.replace(get_model("gpt-oss-20b"), sliding_layers=0, sliding_window=0)
    whole = RooflineCost(dense, hw, 1, "mxfp4", "fp8", compute_efficiency=0.5,
                         kv_memory_efficiency=0.8, moe_kind="")
    assert whole.terms(StepShape(0, 0, rows, context, 0, 0)).attention_s == pytest.approx(
        2 * per_token * (context + rows) / (hw.bandwidth_gbps * 1e9 * 0.8), rel=1e-12)


def test_a_prefill_attends_a_window_in_the_window_layers() -> None:
    cost, hw = _prior(), get_hardware("h200")
    p = 4096
    pairs = p * p / 2  # a causal prompt from an empty cache
    terms = cost.terms(StepShape(p, pairs, 0, 0, 1, 0))
    per_pair = 4 * 12 * 64 * 64  # QK^T and PV, 2 FLOPs a MAC, 12 layers of each kind
    flops = per_pair * pairs + per_pair * p * 128
    compute = flops / (hw.peak_flops("bf16") * 0.5)
    reads = 2 * (2 * 12 * 8 * 64) * p / (hw.bandwidth_gbps * 1e9 * 0.8)
    assert terms.attention_s == pytest.approx(max(compute, reads), rel=1e-12)
    assert compute > reads


def test_measured_mxfp4_expert_layers_price_the_experts() -> None:
    curve = moe_layer_curve(get_model("gpt-oss-120b"), "h200", "mxfp4", 1, "vllm")
    assert curve is not None and "w4a16_mxfp4" in curve.source
    cost = RooflineCost(get_model("gpt-oss-120b"), get_hardware("h200"), 1, "mxfp4",
                        moe_kind="vllm")
    assert cost.measured_moe == curve
    assert moe_layer_curve(get_model("gpt-oss-120b"), "h200", "bf16", 1, "vllm") is None


def test_hf_config_reads_windows_and_the_experts_only_quantisation() -> None:
    config = {"num_hidden_layers": 4, "hidden_size": 256, "num_attention_heads": 4,
              "num_key_value_heads": 2, "head_dim": 64, "intermediate_size": 256,
              "vocab_size": 1000, "max_position_embeddings": 4096, "num_local_experts": 8,
              "num_experts_per_tok": 2, "sliding_window": 128,
              "layer_types": ["sliding_attention", "full_attention"] * 2,
              "quantization_config": {"quant_method": "mxfp4",
                                      "modules_to_not_convert": ["model.layers.*.self_attn"]}}
    m = model_from_hf_config(config, name="toy-oss")
    assert (m.sliding_layers, m.sliding_window, m.experts_only_quantised) == (2, 128, True)
    dense = model_from_hf_config({**config, "num_local_experts": None,  # no experts to keep
                                  "num_experts_per_tok": None})
    assert dense.experts_only_quantised is False
    plain = model_from_hf_config({**config, "layer_types": None, "quantization_config": None})
    assert (plain.sliding_layers, plain.sliding_window, plain.experts_only_quantised) == (
        0, 0, False)


def test_window_fields_are_checked() -> None:
    base = get_model("gpt-oss-20b")
    with pytest.raises(ConfigError, match="sliding_layers=24 must be below"):
        dataclasses.replace(base, sliding_layers=24)
    with pytest.raises(ConfigError, match="both 0 or both"):
        dataclasses.replace(base, sliding_window=0)
    with pytest.raises(ConfigError, match="sliding_window=-1"):
        ModelSpec("x", 2, 64, 2, 1, 32, 64, 100, 100, sliding_layers=1, sliding_window=-1)


def test_trtllm_bench_counts_the_packed_checkpoint() -> None:
    m, h200 = get_model("gpt-oss-120b"), get_hardware("h200")
    experts = 128 * 36 * EXPERT
    # packed bytes (two weights each) and scales (one per 32) are elements to the tool
    assert checkpoint_elements(m, "mxfp4") == m.params_total - experts + experts * 17 / 32
    assert checkpoint_elements(m, "fp8") == m.params_total
    # 63,041,336,640 elements x 2 bytes = 117.42 GiB of 139.81 GiB; 0.95 of the other
    # 22.39 GiB over 2 x 36 layers x 8 x 64 fp8 KV bytes x 2,000 tokens = 309.8 requests:
    # max batch 128 x ceil(309.8 / 128) = 384, tokens max(2048, ...) = 2048
    assert engine_settings(m, h200, 1, "mxfp4", "fp8", 1000, 1000) == (384, 2048)
