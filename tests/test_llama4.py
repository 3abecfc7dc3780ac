"""Llama 4 Maverick: a MoE model whose layers mix dense and expert MLPs and whose MoE
layers add a shared expert (ModelSpec's dense_layers, dense_intermediate_size,
shared_experts). Its parameter count by hand, its config.json read, the prior's experts
priced over its 24 MoE layers only, and the broken ep 8 rows calibrate.moe_curves steps
past."""

from __future__ import annotations

import json
import math

import pandas as pd
import pytest

from calibrate.moe_curves import EP_SLOWER_LIMIT, ROUTING, sane_routing
from simulator.costs.moe_tables import MOE_FILE
from simulator.costs.roofline import RooflineCost
from simulator.costs.speculative import first_layers
from simulator.errors import ConfigError
from simulator.shapes import StepShape
from simulator.specs.hardware import get_hardware
from simulator.specs.model_spec import ModelSpec
from simulator.specs.models import MODELS, get_model, model_from_hf_config

MAVERICK = get_model("llama-4-maverick")
H, V = 5120, 202048
# meta-llama/Llama-4-Maverick-17B-128E's text_config (TensorRT-LLM's
# tests/unittest/_torch/modeling/test_modeling_llama4.py copy, 48 layers)
TEXT_CONFIG = {
    "attention_chunk_size": 8192, "head_dim": 128, "hidden_size": H,
    "interleave_moe_layer_step": 2, "intermediate_size": 8192,
    "intermediate_size_mlp": 16384, "max_position_embeddings": 1048576,
    "model_type": "llama4_text", "num_attention_heads": 40, "num_experts_per_tok": 1,
    "num_hidden_layers": 48, "num_key_value_heads": 8, "num_local_experts": 128,
    "vocab_size": V, "tie_word_embeddings": False,
}


def test_maverick_parameters_by_hand() -> None:
    attention = 48 * (2 * H * 40 * 128 + 2 * H * 8 * 128)
    norms = 48 * 2 * H + H
    dense = 24 * 3 * H * 16384  # the 24 dense layers' MLPs
    expert = 24 * 3 * H * 8192  # one expert over the 24 MoE layers
    router = 24 * H * 128
    embedding = 2 * V * H
    shared = attention + norms + dense + expert + router + embedding  # + 1 shared expert
    assert MAVERICK.moe_layers == 24
    assert MAVERICK.params_per_expert == expert
    assert MAVERICK.params_shared == shared
    assert MAVERICK.params_total == shared + 128 * expert == 400_711_848_960
    assert MAVERICK.params_active == shared + expert == 17_184_691_200
    # the model card's figures: 400B total, 17B active
    assert MAVERICK.params_total == pytest.approx(400e9, rel=0.002)
    assert MAVERICK.params_active == pytest.approx(17e9, rel=0.011)
    # FP8 checkpoint: everything in 1 byte but the embedding and lm_head (2 bytes)
    assert MAVERICK.weight_bytes("fp8") == MAVERICK.params_total + embedding
    assert MAVERICK.kv_bytes_per_token("fp8") == 2 * 48 * 8 * 128  # every layer full


def test_the_catalogues_other_moe_models_keep_their_counts() -> None:
    # the layer mix defaults to every layer MoE, no shared expert: unchanged figures
    qwen = MODELS["qwen3-235b-a22b"]
    assert (qwen.moe_layers, qwen.params_dense_mlp) == (94, 0)
    assert qwen.params_total == 235_093_610_496
    assert MODELS["mixtral-8x7b"].params_active == 12_879_925_248


def test_maverick_read_from_its_config_json(tmp_path) -> None:
    nested = {"model_type": "llama4", "architectures": ["Llama4ForConditionalGeneration"],
              "text_config": TEXT_CONFIG}
    assert model_from_hf_config(nested, name="llama-4-maverick") == MAVERICK
    path = tmp_path / "config.json"
    path.write_text(json.dumps(nested))
    assert model_from_hf_config(path).params_total == MAVERICK.params_total
    # an explicit moe_layers list wins over the step (Scout: every layer MoE, 16 experts)
    scout = model_from_hf_config({**TEXT_CONFIG, "num_local_experts": 16,
                                  "interleave_moe_layer_step": 1,
                                  "moe_layers": list(range(48))})
    assert (scout.dense_layers, scout.shared_experts, scout.num_experts) == (0, 1, 16)
    # a Mixtral config gets no mix
    mixtral = model_from_hf_config({**TEXT_CONFIG, "model_type": "mixtral",
                                    "num_local_experts": 8, "num_experts_per_tok": 2})
    assert (mixtral.dense_layers, mixtral.shared_experts) == (0, 0)


@pytest.mark.parametrize(("fields", "match"), [
    ({"dense_layers": 2}, "describe a mixture of experts"),
    ({"shared_experts": 1}, "describe a mixture of experts"),
    ({"num_experts": 8, "experts_per_token": 2, "dense_layers": 4}, "dense_layers=4 must be below"),
    ({"num_experts": 8, "experts_per_token": 2, "shared_experts": -1}, "shared_experts=-1"),
])
def test_a_layer_mix_that_cannot_be_is_refused(fields: dict, match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        ModelSpec("toy", 4, 256, 4, 2, 64, 512, 1000, 2048, **fields)


def test_the_prior_prices_experts_over_the_moe_layers_only() -> None:
    """t_mm = hyp(shared compute, shared reads) + L_moe x MoE(T), L_moe = 24 of 48, and the
    dense layers' MLPs and the shared expert in the shared FLOPs and bytes."""
    cost = RooflineCost(MAVERICK, get_hardware("h200"), 8, "fp8", "fp8")
    k = cost._k
    assert k.moe_curve is not None and k.moe_layers == 24.0
    head = V * H  # the lm_head, 16-bit
    n_sh = MAVERICK.params_shared - V * H  # the input embedding is gathered, not read
    assert k.shared_bytes == pytest.approx(((n_sh - head) * 1 + 2 * head) / 8, rel=1e-12)
    shape = StepShape(num_decode_seqs=64, decode_context_tokens=64 * 1000)
    terms = cost.terms(shape)
    mm_c = k.shared_flops_per_token * 64 * k.inv_peak_mm * k.compute_scale
    mm_m = k.shared_bytes / k.mem_bw
    experts = 24 * k.moe_curve.time_s(64.0)
    assert terms.matmul_s == pytest.approx(math.hypot(mm_c, mm_m) + experts, rel=1e-12)
    # attention data parallel: one all-gather and one reduce-scatter per MoE layer
    dep = RooflineCost(MAVERICK, get_hardware("h200"), 1, "fp8", "fp8", attention_dp=8)
    assert dep._k.num_dispatches == 24.0


def test_a_draft_of_the_first_layers_keeps_the_share_of_dense_layers() -> None:
    # the spec holds counts, not places: a draft keeps the share (rounded), one MoE layer
    # at least (simulator/costs/speculative.py says it is an approximation)
    draft = first_layers(MAVERICK, 12)
    assert (draft.num_layers, draft.dense_layers, draft.moe_layers) == (12, 6, 6)
    r1 = get_model("deepseek-r1")  # 3 dense of 61: 20 layers keep round(0.98) = 1
    assert first_layers(r1, 20).dense_layers == 1
    assert first_layers(MAVERICK, 1).moe_layers == 1


def _rows(latency_by_routing: dict[str, list[float]]) -> pd.DataFrame:
    tokens = [1, 64, 1024]
    return pd.DataFrame([
        {"distribution": routing, "kernel_source": "k", "num_tokens": t, "latency": ms}
        for routing, curve in latency_by_routing.items()
        for t, ms in zip(tokens, curve, strict=True)])


def test_an_ep_curve_slower_than_half_its_ep_is_stepped_past() -> None:
    below = (pd.Series([0.06, 0.42, 0.76], index=[1, 64, 1024]), "k")
    # Maverick's H200 ep 8 rows, rounded: power_law_1.2 3-7x ep 4's, the others half
    broken = _rows({ROUTING: [0.264, 1.766, 3.083], "power_law_1.01": [0.104, 0.283, 0.502],
                    "balanced": [0.103, 0.270, 0.515]})
    routing, why = sane_routing(broken, below)
    assert routing == "power_law_1.01"
    # the median of 0.264/0.06, 1.766/0.42, 3.083/0.76 = 4.2x
    assert "read 4.2x" in why and "broken" in why
    fine = _rows({ROUTING: [0.06, 0.3, 0.5], "balanced": [0.1, 0.3, 0.5]})
    assert sane_routing(fine, below) == (ROUTING, "")
    # the limit itself is past it (3.0 / 2.0 is 1.5 exactly): the next routing is taken
    two = (pd.Series([2.0] * 3, index=[1, 64, 1024]), "k")
    assert EP_SLOWER_LIMIT == 1.5
    edge = _rows({ROUTING: [3.0] * 3, "power_law_1.01": [2.9] * 3})
    assert sane_routing(edge, two)[0] == "power_law_1.01"  # 1.45x: below the limit
    # no routing below the limit: the curve is kept, and its source says so
    worse = _rows({ROUTING: [3.0] * 3, "balanced": [4.0] * 3})
    routing, why = sane_routing(worse, two)
    assert routing == ROUTING and "read 1.5x" in why and "no other routing" in why
    assert sane_routing(broken, None) == (ROUTING, "")


def test_the_shipped_maverick_ep8_curve_is_the_fallback() -> None:
    rows = json.loads(MOE_FILE.read_text())["curves"]
    ep8 = next(r for r in rows if (r["model"], r["hardware"], r["kind"], r["dtype"],
                                   r.get("ep", 1)) == ("llama-4-maverick", "h200", "trtllm",
                                                       "fp8", 8))
    assert "power_law_1.01 routing" in ep8["source"] and "3.9x" in ep8["source"]
    ep4 = next(r for r in rows if (r["model"], r["hardware"], r["kind"], r["dtype"],
                                   r.get("ep", 1)) == ("llama-4-maverick", "h200", "trtllm",
                                                       "fp8", 4))
    at = dict(zip(ep4["tokens"], ep4["latency_us"], strict=True))
    at8 = dict(zip(ep8["tokens"], ep8["latency_us"], strict=True))
    assert at8[1024] < at[1024]  # half the experts a GPU: faster, as it must be
    # only that curve took the fallback
    assert sum("broken measurement" in r["source"] for r in rows) == 1


def test_the_engine_refuses_to_build_a_layer_mix() -> None:
    pytest.importorskip("torch")
    from engine.models import hf_config_dict

    with pytest.raises(ConfigError, match="dense_layers=24, shared_experts=1"):
        hf_config_dict(MAVERICK)
