"""TensorRT-LLM's versions: what the 0.10 preset changes against 1.0, on cases small enough
to check by hand.

0.10 (TensorRT engines, C++ batch manager) keeps 1.0's in-flight batching rules (no-evict
admission, context requests beside the generation ones) and changes two things: the KV
block holds 64 tokens (0.10's trtllm-build default; 1.0's PyTorch backend: 32), and every
output token sampled in a step costs ``token_s`` of blocking host time.
"""

from __future__ import annotations

import pytest
from helpers import TokenCost, table, timeline

from simulator.cluster import ClusterSpec, simulate
from simulator.deployment import resolve
from simulator.shapes import StepShape
from simulator.stack_presets import (
    TRTLLM_010_MASKED_REREAD,
    TRTLLM_010_TOKEN_S,
    TRTLLM_011_KV16_REREAD,
    query_group,
)

ROWS = [(0, 40, 40), (0, 40, 40), (0, 40, 40)]  # (arrival, prompt, output)


def run(version: str):  # noqa: ANN201
    """Three requests of 40 + 40 tokens against a 5-block cache in the preset's block size,
    10 ms a step."""
    dep = resolve({"stack": {"name": "trtllm", "version": version}, "kv": {"num_blocks": 5}})
    spec = ClusterSpec(dep.policy, TokenCost(step_s=0.01), kv_blocks=5,
                       block_size=dep.block_size, check_invariants=True)
    return dep, simulate(table(ROWS), spec)


def test_0_10_blocks_of_64_tokens_fit_two_whole_requests_where_1_0_fits_one() -> None:
    # 0.10: a request's whole 80 tokens take ceil(80 / 64) = 2 blocks: r0 and r1 (4 of 5
    # blocks) start at 0, prefill .00-.01 (first token), 39 decodes end them at .40; r2
    # (2 more) waits for them: prefill .40-.41, ends .80. Never a preemption.
    dep, res = run("0.10")
    assert (dep.block_size, dep.policy.admission, dep.policy.mixed_prefill) == (
        64, "no_evict", True)
    assert timeline(res.requests) == [(0, 0.0, 0.01, 0.4), (1, 0.0, 0.01, 0.4),
                                      (2, 0.4, 0.41, 0.8)]
    assert res.requests["preemptions"].sum() == 0
    # 1.0: ceil(80 / 32) = 3 blocks each, so one request at a time
    dep, res = run("1.0")
    assert dep.block_size == 32
    assert [r[1] for r in timeline(res.requests)] == [0.0, 0.4, 0.8]


@pytest.mark.parametrize(("shape", "tokens"), [
    (StepShape(num_decode_seqs=100, decode_context_tokens=100 * 500), 100),
    (StepShape(num_prefill_tokens=3 * 128, prefill_attn_work=3 * 128 * 64, num_admitted=3),
     3),
    (StepShape(num_prefill_tokens=128, prefill_attn_work=128 * 64, num_admitted=1,
               num_decode_seqs=50, decode_context_tokens=50 * 300), 51),
])
def test_0_10_adds_its_host_cost_per_output_token_to_1_0s_kernels(shape: StepShape,
                                                                  tokens: int) -> None:
    # Same kernel tables for both versions; 0.10's step is longer by token_s for each token
    # sampled: one per decode row plus one per request whose prompt completes (admitted).
    # (0.10's extra time and factor on a step that only prefills are off here:
    # tests/test_prefill_pass.py.)
    point = {"model": {"name": "llama-2-7b", "weight_dtype": "fp16"},
             "hardware": {"gpu": "h100-sxm"}}
    old = resolve({**point, "stack": {"name": "trtllm", "version": "0.10"},
                   "cost": {"prefill_pass_s": 0, "prefill_scale": 1}})
    new = resolve({**point, "stack": {"name": "trtllm", "version": "1.0"}})
    extra = old.cost.step_time(shape) - new.cost.step_time(shape)
    assert extra == pytest.approx(tokens * TRTLLM_010_TOKEN_S, rel=1e-9)


def test_a_scenario_host_cost_wins_over_0_10s() -> None:
    point = {"model": {"name": "llama-2-7b", "weight_dtype": "fp16"},
             "hardware": {"gpu": "h100-sxm"}, "stack": {"name": "trtllm", "version": "0.10"}}
    own = resolve({**point, "cost": {"overhead": {"token_s": 0.0}}})
    new = resolve({**point, "stack": {"name": "trtllm", "version": "1.0"}})
    shape = StepShape(num_decode_seqs=100, decode_context_tokens=100 * 500)
    assert own.cost.step_time(shape) == pytest.approx(new.cost.step_time(shape), rel=1e-12)


# 0.11 (0.11-0.17): 1.0's rules and tables, and decode attention over a 16-bit KV cache
# read 1 + beta (G - 1) times a step (G query heads per KV head on a GPU)
DECODE = StepShape(num_decode_seqs=100, decode_context_tokens=100 * 2000)
PREFILL = StepShape(num_prefill_tokens=2048, prefill_attn_work=2048 * 1024, num_admitted=1)
SEVENTY_B = {"model": {"name": "llama-3.1-70b", "weight_dtype": "bf16"},
             "hardware": {"gpu": "h100-sxm", "tp": 4}}


def _context_term(dep) -> float:  # noqa: ANN001
    """The decode-context part of a decode step: the step less the same rows at no context."""
    empty = StepShape(num_decode_seqs=100, decode_context_tokens=0)
    return dep.cost.step_time(DECODE) - dep.cost.step_time(empty)


def test_0_11_reads_a_16_bit_cache_1_plus_beta_g_minus_1_times() -> None:
    # Llama-3.1-70B at TP 4: 64 / 4 = 16 query heads and 8 / 4 = 2 KV heads a GPU, G = 8:
    # the decode-context term is 1 + 7 beta times 1.0's; a prefill does not change.
    old = resolve({**SEVENTY_B, "stack": {"name": "trtllm", "version": "0.11"}})
    new = resolve({**SEVENTY_B, "stack": {"name": "trtllm", "version": "1.0"}})
    reads = 1 + 7 * TRTLLM_011_KV16_REREAD
    assert _context_term(old) == pytest.approx(reads * _context_term(new), rel=1e-9)
    assert old.cost.step_time(PREFILL) == pytest.approx(new.cost.step_time(PREFILL), rel=1e-12)
    assert f"KV cache {reads:.3g}x a step" in old.cost_source


@pytest.mark.parametrize("point", [
    {**SEVENTY_B, "model": {"name": "llama-3.1-70b", "weight_dtype": "fp8"}},  # an FP8 cache
    {"model": {"name": "llama-2-7b", "weight_dtype": "fp16"},  # G = 1: one read already
     "hardware": {"gpu": "h100-sxm"}},
    {**SEVENTY_B, "cost": {"decode_kv_reads": 1}},  # the scenario's own value wins
])
def test_0_11_leaves_fp8_caches_mha_models_and_a_scenarios_own_reads_alone(point) -> None:  # noqa: ANN001
    # without 0.11's all-reduce handshake (tests/test_allreduce_sync.py), which TP 4 pays
    point = {**point, "cost": {**point.get("cost", {}), "allreduce_sync_s": 0}}
    old = resolve({**point, "stack": {"name": "trtllm", "version": "0.11"}})
    new = resolve({**point, "stack": {"name": "trtllm", "version": "1.0"}})
    assert old.cost.step_time(DECODE) == pytest.approx(new.cost.step_time(DECODE), rel=1e-12)


def test_0_11_on_a_roofline_prior_keeps_one_read() -> None:
    # No kernel table for the RTX 4090: a prior prices the step, which has no separate
    # decode-context term to scale, so the preset's term is not applied (and no error).
    point = {"model": {"name": "llama-3.1-8b", "weight_dtype": "bf16"},
             "hardware": {"gpu": "rtx4090"}}
    old = resolve({**point, "stack": {"name": "trtllm", "version": "0.11"}})
    new = resolve({**point, "stack": {"name": "trtllm", "version": "1.0"}})
    assert "roofline" in old.cost_source and "KV cache" not in old.cost_source
    assert old.cost.step_time(DECODE) == new.cost.step_time(DECODE)


def test_releases_between_presets_take_the_earlier_one() -> None:
    assert resolve({"stack": {"name": "trtllm", "version": "0.13"}}).stack == \
        "trtllm 0.12 (for 0.13)"
    assert resolve({"stack": {"name": "trtllm", "version": "1.2"}}).stack == \
        "trtllm 1.0 (for 1.2)"
    assert resolve({"stack": {"name": "vllm-v1", "version": "0.9.2"}}).stack == \
        "vllm-v1 0.9 (for 0.9.2)"
    assert resolve({"stack": {"name": "vllm-v1", "version": "0.8.2"}}).stack == \
        "vllm-v1 0.8 (for 0.8.2)"
    assert resolve({"stack": {"name": "trtllm", "version": "0.11"}}).stack == "trtllm 0.11"
    assert resolve({"stack": {"name": "trtllm"}}).stack == "trtllm 1.0"


@pytest.mark.parametrize(("model", "tp", "group"), [
    ("llama-3.1-70b", 4, 8), ("llama-3.1-70b", 8, 8), ("llama-3.1-70b", 16, 4),
    ("llama-3.1-8b", 1, 4), ("llama-2-7b", 2, 1)])
def test_query_heads_per_kv_head_on_a_gpu(model: str, tp: int, group: int) -> None:
    # 70B: 64 query and 8 KV heads; at TP 16 a KV head is copied, 4 query heads a GPU share it
    from simulator.specs.models import get_model
    assert query_group(get_model(model), tp) == group


def test_0_10_has_the_16_bit_term_too() -> None:
    # 0.10 is a TensorRT engine release as well: the same decode-context factor on top of
    # its per-token host cost (which adds the same 100 tokens to both shapes, so cancels)
    old = resolve({**SEVENTY_B, "stack": {"name": "trtllm", "version": "0.10"}})
    new = resolve({**SEVENTY_B, "stack": {"name": "trtllm", "version": "1.0"}})
    reads = 1 + 7 * TRTLLM_011_KV16_REREAD
    assert _context_term(old) == pytest.approx(reads * _context_term(new), rel=1e-9)


@pytest.mark.parametrize(("model", "tp", "kv", "reads"), [
    ("llama-3.1-8b", 1, "fp8", 4.0),  # G = 4, no XQA kernel in 0.10: masked MHA, 4 reads
    ("mixtral-8x7b", 2, "fp8", 4.0),  # 16 query and 4 KV heads a GPU
    # 16-bit: the masked kernel's fitted term, 1 + 3 x 0.234 = 1.702 (L2 serves the rest)
    ("llama-3.1-8b", 1, "bf16", 1 + 3 * TRTLLM_010_MASKED_REREAD),
    ("llama-3.1-70b", 4, "bf16", 1 + 7 * TRTLLM_011_KV16_REREAD),  # G = 8, XQA: 0.11's term
    ("llama-3.1-70b", 4, "fp8", 1.0),  # G = 8: 0.10's XQA kernels
    ("llama-2-7b", 1, "fp8", 1.0),  # G = 1
])
def test_0_10_reads_an_fp8_cache_g_times_where_it_had_no_xqa_kernel(
        model: str, tp: int, kv: str, reads: float) -> None:
    # TensorRT-LLM 0.10's DecoderXQARunner::shouldUse took 8 or 1 query heads per KV head
    # only; 0.11 made JIT XQA (every group size) the default
    from simulator.specs.models import get_model
    from simulator.stacks import STACKS
    presets = {p.version: p for p in STACKS["trtllm"]}
    spec = get_model(model)
    assert presets["0.10"].decode_kv_reads(spec, tp, kv) == pytest.approx(reads, rel=1e-12)
    assert presets["0.11"].decode_kv_reads(spec, tp, "fp8") == 1.0


def test_the_kv_cache_is_a_share_of_the_free_memory_from_0_11_on() -> None:
    """Llama-3.1-70B FP8 on one H100 (CUDA's 79.10 GiB = 84,932,978,278 B): weights
    72,655,052,800 B (the embedding and lm_head, 2,101,346,304 weights, in 16 bits), an FP8
    cache of 2 x 80 layers x 8 heads x 128 = 163,840 B a token. TensorRT-LLM's rule, 0.9 x
    (84.93 - 72.66 - 2) GB = 9.25 GB, is 1,764 blocks of 32 tokens; vLLM's, 0.9 x 84.93 -
    72.66 - 2 = 1.78 GB, which 0.10 keeps (NIM 1.0's fitted fraction is of it), 170 blocks
    of 64."""
    point = {"model": {"name": "llama-3.1-70b", "weight_dtype": "fp8"},
             "hardware": {"gpu": "h100-sxm"}}
    left = 84_932_978_278 - 72_655_052_800 - 2e9
    blocks = {}
    for version in ("0.10", "0.11", "0.12", "1.0"):
        dep = resolve({**point, "stack": {"name": "trtllm", "version": version}})
        assert dep.kv_dtype == "fp8"
        blocks[version] = (dep.kv_blocks, dep.block_size)
    assert blocks["1.0"] == blocks["0.12"] == blocks["0.11"] == (
        int(0.9 * left // (163_840 * 32)), 32) == (1_764, 32)
    assert blocks["0.10"] == (int((0.9 * 84_932_978_278 - 72_655_052_800 - 2e9)
                                  // (163_840 * 64)), 64) == (170, 64)
    # vLLM keeps its own rule (and a bf16 cache beside FP8 weights: 327,680 B a token)
    dep = resolve({**point, "stack": {"name": "vllm-v1"}})
    assert dep.kv_dtype == "bf16"
    assert dep.kv_blocks == int((0.9 * 84_932_978_278 - 72_655_052_800 - 2e9)
                                // (327_680 * 16)) == 340
