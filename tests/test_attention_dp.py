"""Attention data parallel + expert parallel (``[hardware] attention_dp``; TensorRT-LLM's
DEP): the roofline step of one balanced rank, the experts' measured ep curves and NCCL's
all-gather / reduce-scatter, the group's KV pool and batch limits, and the errors."""

from __future__ import annotations

import math

import pytest
from roofline_support import assert_one_and_many_agree

from simulator.costs.collectives import allreduce_curve, collective_curve
from simulator.costs.from_config import cost_model_from_config
from simulator.costs.moe_tables import moe_layer_curve
from simulator.costs.roofline import RooflineCost, check_attention_dp
from simulator.deployment import resolve
from simulator.errors import ConfigError
from simulator.runner import run_point
from simulator.shapes import StepShape
from simulator.specs.hardware import get_hardware
from simulator.specs.models import get_model

QWEN, H200 = get_model("qwen3-235b-a22b"), get_hardware("h200")


def _cost(dp: int, **knobs: object) -> RooflineCost:
    return RooflineCost(QWEN, H200, 1, "fp8", "fp8", attention_dp=dp, **knobs)


MIXED = StepShape(num_prefill_tokens=1024, prefill_attn_work=1024 * 512.0,
                  num_decode_seqs=256, decode_context_tokens=256 * 1500,
                  num_admitted=8, num_finished=4)


def test_a_rank_computes_and_reads_a_quarter_of_the_group_step() -> None:
    # experts' roofline (moe_kind ""), formula collectives: every term checkable by hand
    one, four = _cost(1, moe_kind=""), _cost(4, moe_kind="")
    t1, t4 = one.terms(MIXED), four.terms(MIXED)
    assert t4.compute_s == pytest.approx(t1.compute_s / 4, rel=1e-12)  # FLOPs over 4 GPUs
    # attention: a rank's share of the rows, context and prefill pairs is a quarter of
    # the group's (the cached read R is the group's chunks', here 0: roofline.py)
    assert t4.attention_s == pytest.approx(t1.attention_s / 4, rel=1e-12)
    quarter = StepShape(num_decode_seqs=64, decode_context_tokens=64 * 1500)
    decode = StepShape(num_decode_seqs=256, decode_context_tokens=256 * 1500)
    assert four.terms(decode).attention_s == pytest.approx(one.terms(quarter).attention_s,
                                                           rel=1e-12)
    # weights: every shared weight on each rank, a quarter of the experts hit
    k = four._k
    t = 1024 + 256
    hit = 128 * (1 - (1 - 8 / 128) ** t)
    expert = 94 * 3 * 4096 * 1536 * 1.0  # one expert's MLP over 94 layers, fp8
    assert k.expert_bytes == pytest.approx(expert / 4)
    assert k.shared_bytes == pytest.approx(one._k.shared_bytes)
    assert t4.bytes == pytest.approx(k.shared_bytes + hit * expert / 4
                                     + k.kv_bytes_per_token * (256 * 1500 + t))
    # each rank admits and finishes a quarter of the requests
    assert t4.overhead_s - t1.overhead_s == pytest.approx(-0.75 * 12 * one.per_request_s)


def test_the_experts_tokens_cross_the_ranks_twice_a_layer() -> None:
    # formula (allreduce_kind ""): each MoE layer all-gathers the group's T tokens to the
    # experts and reduce-scatters them back, each GPU receiving 3/4 of T x H x 2 bytes
    four = _cost(4, moe_kind="", allreduce_kind="")
    t = 1024 + 256
    link = 900e9 / 2 * four.link_efficiency
    one = four.allreduce_latency_s + 0.75 * t * 4096 * 2 / link
    assert four.terms(MIXED).allreduce_s == pytest.approx(94 * 2 * one, rel=1e-12)
    # measured: NCCL's fitted all-gather and reduce-scatter over 4 H200s at T H 2 bytes
    measured = _cost(4, moe_kind="")
    gather = collective_curve("h200", 4, "all_gather")
    scatter = collective_curve("h200", 4, "reduce_scatter")
    assert gather is not None and scatter is not None
    nbytes = t * 4096 * 2.0
    assert measured.terms(MIXED).allreduce_s == pytest.approx(
        94 * (gather.time_s(nbytes) + scatter.time_s(nbytes)), rel=1e-12)
    assert "all-gather" in measured.allreduce_source() and "ep" not in gather.source
    # tp 1 without data parallelism has no collective at all
    assert _cost(1).terms(MIXED).allreduce_s == 0.0


def test_the_experts_read_the_ep_table_at_the_groups_tokens() -> None:
    four = _cost(4)
    curve = four.measured_moe
    assert curve is not None and (curve.tp, curve.ep) == (1, 4)
    assert "moe_tp 1, ep 4" in curve.source
    assert curve == moe_layer_curve(QWEN, "h200", "fp8", 1, "trtllm", ep=4)
    # not the tensor-parallel table of the same four GPUs
    assert curve.latency_us != moe_layer_curve(QWEN, "h200", "fp8", 4, "trtllm").latency_us
    decode = StepShape(num_decode_seqs=512, decode_context_tokens=512 * 1000)
    k = four._k
    shared_c = k.shared_flops_per_token * 512 * k.inv_peak_mm * k.compute_scale
    shared_m = k.shared_bytes / k.mem_bw
    assert four.terms(decode).matmul_s == pytest.approx(
        math.hypot(shared_c, shared_m) + 94 * curve.time_s(512.0), rel=1e-12)


@pytest.mark.parametrize("knobs", [{}, {"moe_kind": "", "allreduce_kind": ""}])
def test_one_step_and_many_agree_bit_for_bit(knobs: dict) -> None:
    assert_one_and_many_agree(_cost(4, **knobs))


@pytest.mark.parametrize("model, tp, dp, gpu, match", [
    ("llama-3.1-8b", 1, 2, "h100-sxm", "has none"),
    ("qwen3-235b-a22b", 2, 4, "h100-sxm", "tp = 1"),
    ("qwen3-235b-a22b", 1, 3, "h100-sxm", "must divide"),
    ("mixtral-8x7b", 1, 2, "cpu", "needs a GPU link"),
    ("qwen3-235b-a22b", 1, True, "h100-sxm", "int >= 1"),
])
def test_what_attention_dp_refuses(model: str, tp: int, dp: object, gpu: str,
                                   match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        check_attention_dp(dp, get_model(model), tp, get_hardware(gpu))


def _point(**hardware: object) -> dict:
    return {"name": "dep", "model": {"name": "qwen3-235b-a22b", "weight_dtype": "fp8"},
            "hardware": {"gpu": "h200", **hardware},
            "policy": {"name": "continuous", "max_num_seqs": 64,
                       "max_num_batched_tokens": 2048},
            "kv": {"gpu_memory_utilization": 0.9, "reserve_gb": 2.0, "block_size": 16},
            "workload": {"arrival": "poisson", "rate": 2.0, "num_requests": 40,
                         "prompt": {"dist": "fixed", "tokens": 300},
                         "output": {"dist": "fixed", "tokens": 20}}}


def test_the_group_holds_one_copy_of_the_experts_and_the_ranks_limits() -> None:
    dep = resolve(_point(attention_dp=4))
    assert (dep.tp, dep.attention_dp, dep.gpus) == (1, 4, 4)
    assert (dep.policy.max_num_seqs, dep.policy.max_num_batched_tokens) == (256, 8192)
    weights = QWEN.weight_bytes("fp8")
    experts = QWEN.params_experts * 1  # fp8: a byte a weight
    group = 4 * (weights - experts) + experts
    left = 4 * H200.memory_bytes * 0.9 - group - 4 * 2e9
    assert dep.kv_blocks == int(left // (QWEN.kv_bytes_per_token("fp8") * 16))
    assert "attention data parallel x 4" in dep.cost_source
    # a replica's GPUs are the ranks'
    res = run_point({}, _point(attention_dp=4))
    assert res.summary["num_gpus"] == 4 and res.summary["attention_dp"] == 4
    assert res.summary["completed"] == 40


def test_a_profile_or_fitted_form_cannot_price_attention_dp() -> None:
    for section in ({"form": "linear", "step_s": 0.01}, {"profile": "x.json"}):
        with pytest.raises(ConfigError, match="roofline prior only"):
            cost_model_from_config(section, QWEN, H200, 1, "fp8", "fp8", attention_dp=4)
    cost, _ = cost_model_from_config({"form": "roofline", "memory_efficiency": 0.7}, QWEN,
                                     H200, 1, "fp8", "fp8", attention_dp=4)
    assert cost.attention_dp == 4 and cost.memory_efficiency == 0.7


def test_scenario_errors_name_the_field() -> None:
    dense = _point(attention_dp=2)
    dense["model"] = {"name": "llama-3.1-8b"}
    with pytest.raises(ConfigError, match=r"hardware\.attention_dp=2: .*llama-3.1-8b has none"):
        resolve(dense)
    spec = _point(attention_dp=2)
    spec["speculative"] = {"num_tokens": 2, "acceptance": 0.7, "draft_layers": 8}
    with pytest.raises(ConfigError, match="not with"):
        resolve(spec)


def test_the_all_reduce_curves_are_unchanged_by_the_new_ops() -> None:
    ar = allreduce_curve("h100-sxm", 8)
    gather = collective_curve("h100-sxm", 8, "all_gather")
    assert ar is not None and gather is not None
    assert (ar.op, gather.op) == ("all_reduce", "all_gather")
    assert ar == collective_curve("h100-sxm", 8, "all_reduce")
    assert "all-reduce" in ar.describe() and "all-gather" in gather.describe()
    assert collective_curve("h100-sxm", 16, "all_gather") is None
    # at a knot (1 MiB) the curve is the knot's fitted latency; halfway to the next, the mean
    knot = gather.knots_bytes.index(2.0**20)
    us = gather.latency_us
    assert gather.time_s(2.0**20) == pytest.approx(us[knot] * 1e-6, rel=1e-12)
    mid = (gather.knots_bytes[knot] + gather.knots_bytes[knot + 1]) / 2
    assert gather.time_s(mid) == pytest.approx((us[knot] + us[knot + 1]) / 2 * 1e-6, rel=1e-12)


def test_without_expert_parallelism_every_expert_is_split_over_the_ranks() -> None:
    # SGLang's DP attention without --enable-ep-moe: the MoE runs tensor-parallel over the
    # ranks, so its layer is the moe_tp 4 curve (at the group's tokens); the rest is DEP's
    tp_moe = _cost(4, expert_parallel=False)
    curve = tp_moe.measured_moe
    assert curve is not None and (curve.tp, curve.ep) == (4, 1)
    assert curve == moe_layer_curve(QWEN, "h200", "fp8", 4, "trtllm")
    ep = _cost(4)
    assert tp_moe._k.expert_bytes == ep._k.expert_bytes  # a quarter of every expert either way
    assert tp_moe.terms(MIXED).attention_s == ep.terms(MIXED).attention_s
    point = _point(attention_dp=4, expert_parallel=False)
    assert "moe_tp 4, ep 1" in resolve(point).cost_source
    # at attention_dp 1 it changes nothing: tensor parallelism splits every expert already
    assert resolve(_point(expert_parallel=False, tp=4)).cost_source == \
        resolve(_point(tp=4)).cost_source


def test_a_request_keeps_one_ranks_token_budget() -> None:
    # without chunked prefill a prompt must fit the budget of the rank it runs on: 2,048
    # tokens here, though the group's four ranks take 8,192 a step together
    point = _point(attention_dp=4)
    point["workload"] = {"arrival": "poisson", "rate": 1.0, "num_requests": 6,
                         "prompt": {"dist": "fixed", "tokens": 3000},
                         "output": {"dist": "fixed", "tokens": 8}}
    dep = resolve(point)
    assert (dep.policy.max_num_batched_tokens, dep.policy.request_budget) == (8192, 2048)
    res = run_point({}, point)
    assert res.summary["completed"] == 0 and res.summary["num_rejected"] == 6
    point["workload"]["prompt"]["tokens"] = 2000  # 2,000 + 8 fits one rank's 2,048
    assert run_point({}, point).summary["completed"] == 6
    one = resolve(_point(tp=4))  # a tensor-parallel replica keeps the policy as it is
    assert (one.policy.max_num_batched_tokens, one.policy.request_budget) == (2048, 0)


def test_the_planner_sizes_attention_dp_candidates_by_their_gpus() -> None:
    from simulator.capacity.candidates import build_candidates
    raw = {**_point(), "hardware": {"gpu": "h200"}}
    cands = build_candidates(raw, {"tp": [1, 4], "attention_dp": [1, 4]})
    by_name = {c.name: c for c in cands}
    assert set(by_name) == {"h200 x1 fp8 continuous", "h200 x4 fp8 continuous",
                            "h200 x4 attention-DP4 fp8 continuous",
                            "h200 x16 attention-DP4 fp8 continuous"}
    dep = by_name["h200 x4 attention-DP4 fp8 continuous"]
    assert (dep.tp, dep.infeasible, dep.labels["attention_dp"]) == (4, None, 4)
    assert "tp = 1" in by_name["h200 x16 attention-DP4 fp8 continuous"].infeasible
    assert "does not fit" in by_name["h200 x1 fp8 continuous"].infeasible
