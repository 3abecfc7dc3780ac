"""Each stack's preset: the scheduler rules it sets, and their decisions on one tiny timeline.

The timeline: every step costs 10 ms (``TokenCost(step_s=0.01)``), the KV cache is 5
blocks of 4 tokens (the scenario's own ``[kv]``, which wins over the preset's layout), and
three requests arrive at 0 with (prompt, output) = (4, 4), (4, 8), (4, 4): 2, 3 and 2
blocks for their whole prompt + output, 7 in all against 5.
"""

from __future__ import annotations

import pytest
from helpers import TokenCost, table, timeline

from simulator.cluster import ClusterSpec, simulate
from simulator.deployment import resolve
from simulator.errors import ConfigError
from simulator.specs.hardware import get_hardware
from simulator.specs.models import get_model
from simulator.stacks import STACKS

ROWS = [(0, 4, 4), (0, 4, 8), (0, 4, 4)]


def run(stack: str, version: str = ""):  # noqa: ANN201
    dep = resolve({"stack": {"name": stack, "version": version},
                   "kv": {"num_blocks": 5, "block_size": 4}})
    spec = ClusterSpec(dep.policy, TokenCost(step_s=0.01), kv_blocks=5, block_size=4,
                       check_invariants=True)
    return dep.policy, simulate(table(ROWS), spec)


def test_vllm_admits_greedily_and_recomputes_the_newest() -> None:
    # All three start at 0 (greedy). At .01 each decode needs its 2nd block, 2 are free:
    # r2, the newest, is preempted (recomputed later); r0 and r1 never are.
    for stack in ("vllm-v0", "vllm-v1"):
        policy, res = run(stack)
        assert (policy.admission, policy.preemption) == ("greedy", "newest")
        assert res.requests["preemptions"].tolist() == [0, 0, 1]
    assert run("vllm-v0")[0].kv_watermark == 0.01  # int(0.01 x 5) = 0 blocks here


def test_trtllm_admits_only_what_fits_whole_and_never_preempts() -> None:
    # no_evict: r0 reserves 2 blocks, r1 3: r2 (2) waits until r0 ends at .04 (prefill
    # .00-.01, 3 decodes). In-flight batching (mixed_prefill): r2's prompt joins r1's
    # decode in the step .04-.05, so r1 is not stalled: its 8 tokens end at .08 (a
    # prefill-only step, vLLM v0's, would end it at .09); r2 decodes .05-.08.
    policy, res = run("trtllm")
    assert (policy.admission, policy.chunked_prefill, policy.mixed_prefill) == (
        "no_evict", False, True)
    assert timeline(res.requests) == [(0, 0.0, 0.01, 0.04), (1, 0.0, 0.01, 0.08),
                                      (2, 0.04, 0.05, 0.08)]
    assert res.requests["preemptions"].tolist() == [0, 0, 0]
    assert (res.steps["num_prefill_tokens"] * res.steps["num_decode_seqs"]).tolist()[4] == 4


def test_sglang_admits_against_its_token_ratio_prefills_apart_and_preempts_nobody() -> None:
    # conservative, in tokens (20), and a step either prefills or decodes (mixed_chunks
    # off). r0 needs 4 + 4 = 8 < 20, charged 8; r1 needs 12, not < 12 left: waits. r0's
    # prefill .00-.01. At .01 r0 holds 1 block (16 free) and its 3 outstanding tokens x 0.7
    # leave 13.9 > 12: r1's prefill .01-.02 (r0 does not decode in it). r2 (8) waits: 12
    # free less (3 + 7) x 0.7 = 5. r0 decodes .02-.05 and ends; at .05 r1 holds 2 blocks
    # (12 free) and its 5 outstanding x ~0.697 leave ~8.5 > 8: r2's prefill .05-.06, then
    # both decode: r2 ends at .09, r1's 8th token at .10.
    policy, res = run("sglang")
    assert (policy.admission, policy.preemption, policy.mixed_chunks) == (
        "conservative", "fewest_outputs", False)
    assert timeline(res.requests) == [(0, 0.0, 0.01, 0.05), (1, 0.01, 0.02, 0.1),
                                      (2, 0.05, 0.06, 0.09)]
    assert res.requests["preemptions"].sum() == 0
    assert (res.steps["num_prefill_tokens"] * res.steps["num_decode_seqs"] == 0).all()


def test_no_stack_is_todays_policy() -> None:
    policy, res = run("none")
    assert (policy.admission, policy.max_model_len, policy.kv_watermark) == ("greedy", 0, 0.0)
    assert res.requests["preemptions"].tolist() == [0, 0, 1]


@pytest.mark.parametrize(("model", "chunked", "budget"), [("llama-3.1-8b", True, 512),
                                                           ("llama-2-7b", False, 4096)])
def test_vllm_v0_chunks_prefill_only_beyond_32k_context(model: str, chunked: bool,
                                                        budget: int) -> None:
    dep = resolve({"model": {"name": model}, "stack": {"name": "vllm-v0"}})
    assert (dep.policy.chunked_prefill, dep.policy.max_num_batched_tokens) == (chunked, budget)
    assert dep.policy.max_model_len == get_model(model).max_context_tokens


def test_vllm_v0_long_context_rule_reads_the_served_max_model_len() -> None:
    # vLLM 0.6 decides chunked prefill from the max_model_len it serves with: Llama-3.1-8B
    # (131,072 positions) served with --max-model-len 4096 gets whole-prompt steps and a
    # budget of max(4096, 2048) = 4096, not 512-token chunks
    dep = resolve({"model": {"name": "llama-3.1-8b"}, "stack": {"name": "vllm-v0"},
                   "policy": {"max_model_len": 4096}})
    assert (dep.policy.chunked_prefill, dep.policy.max_num_batched_tokens,
            dep.policy.max_model_len) == (False, 4096, 4096)


@pytest.mark.parametrize(("model", "chunked", "budget"), [("llama-2-7b", True, 512),
                                                           ("llama-3.1-8b", False, 131_072)])
@pytest.mark.parametrize("version", ["0.5.4", "0.6"])
def test_vllm_v0_budget_follows_the_chunked_prefill_the_user_sets(
        model: str, chunked: bool, budget: int, version: str) -> None:
    # vLLM v0's SchedulerConfig picks the budget from the flag the server runs with:
    # --enable-chunked-prefill on a 4K model gives 512-token steps, turning it off on
    # Llama-3.1-8B (131,072 positions) gives max(131072, 2048); a budget the scenario
    # sets itself still wins
    def policy(extra: dict):  # noqa: ANN202
        return resolve({"model": {"name": model}, "policy": extra,
                        "stack": {"name": "vllm-v0", "version": version}}).policy
    assert policy({"chunked_prefill": chunked}).max_num_batched_tokens == budget
    assert policy({"chunked_prefill": chunked,
                   "max_num_batched_tokens": 1024}).max_num_batched_tokens == 1024


# vLLM V1's online-server defaults (max_num_seqs, max_num_batched_tokens) release by
# release: 0.8.0-0.8.3 1024 sequences everywhere and 8192 tokens on H100/H200 (#12369);
# 0.8.4 back to 256 sequences but on H100/H200 (#16158); 0.8.5 by memory, 70 GiB or more
# (#17073, the A100-80GB too); 0.9 on, not the A100 (#17885)
V1_DEFAULTS = {
    "h100-sxm": {"0.8": (1024, 8192), "0.8.4": (1024, 8192), "0.8.5": (1024, 8192),
                 "0.9": (1024, 8192), "0.10": (1024, 8192)},
    "h200": {"0.8": (1024, 8192), "0.8.4": (1024, 8192), "0.8.5": (1024, 8192),
             "0.9": (1024, 8192), "0.10": (1024, 8192)},
    "a100-80gb": {"0.8": (1024, 2048), "0.8.4": (256, 2048), "0.8.5": (1024, 8192),
                  "0.9": (256, 2048), "0.10": (256, 2048)},
    "b200": {"0.8": (1024, 2048), "0.8.4": (256, 2048), "0.8.5": (1024, 8192),
             "0.9": (1024, 8192), "0.10": (1024, 8192)},
    "l40s": {"0.8": (1024, 2048), "0.8.4": (256, 2048), "0.8.5": (256, 2048),
             "0.9": (256, 2048), "0.10": (256, 2048)},
}


@pytest.mark.parametrize("gpu", sorted(V1_DEFAULTS))
def test_vllm_v1_batch_defaults_follow_the_release_and_the_gpu(gpu: str) -> None:
    for version, want in V1_DEFAULTS[gpu].items():
        dep = resolve({"hardware": {"gpu": gpu}, "model": {"name": "llama-2-7b"},
                       "stack": {"name": "vllm-v1", "version": version}})
        got = (dep.policy.max_num_seqs, dep.policy.max_num_batched_tokens)
        assert got == want, f"{gpu} vllm-v1 {version}"
        assert dep.policy.chunked_prefill


@pytest.mark.parametrize("gpu", ["rtx4090", "l40s", "a100-40gb", "h100-sxm", "h200", "b200"])
def test_sglang_chunk_size_follows_gpu_memory(gpu: str) -> None:
    # 0.5's server_args.py tiers: the 4090 2048, the L40S (44.42 GiB) and the A100 40GB
    # (39.39) 4096, the H100 and H200 8192, the B200 (178.35) 16384
    gib = get_hardware(gpu).memory_bytes / 2**30
    want = 2048 if gib < 35 else 4096 if gib < 60 else 8192 if gib < 160 else 16384
    dep = resolve({"hardware": {"gpu": gpu}, "model": {"name": "llama-2-7b"},
                   "stack": {"name": "sglang"}})
    assert dep.policy.max_num_batched_tokens == want


@pytest.mark.parametrize(("gpu", "v03", "v04"), [("rtx4090", 8192, 2048),
                                                  ("h100-sxm", 8192, 8192),
                                                  ("b200", 8192, 8192)])
def test_older_sglang_chunk_sizes(gpu: str, v03: int, v04: int) -> None:
    """0.3: 8192 on every GPU. 0.4: 2048 under 25,000 MB (the 4090's 23.65 GiB, as CUDA
    reports it, is 24,218 MB), else 8192, no 16384 tier (0.5 gives the 178 GiB B200 16384)."""
    for version, want in (("0.3", v03), ("0.4", v04)):
        dep = resolve({"hardware": {"gpu": gpu}, "model": {"name": "llama-2-7b"},
                       "stack": {"name": "sglang", "version": version}})
        assert dep.policy.max_num_batched_tokens == want, version


def test_every_preset_names_its_sources() -> None:
    for presets in STACKS.values():
        for preset in presets:
            assert preset.sources and all(isinstance(s, str) and s for s in preset.sources)


def test_sglang_02_prefills_whole_prompts_first_and_0_3_chunks_them() -> None:
    # 10 ms steps, a cache of 40,000 one-token blocks; r0 (12,000 + 3) and r1 (6,000 + 3)
    # at 0, r2 (1,000 + 2) at 5 ms. SGLang 0.2 (no chunked prefill, max_prefill_tokens
    # 16384): r0 alone fills the first prefill batch .00-.01 (r1's 6,000 do not fit the
    # 4,384 left); at .01 r1 and r2 (7,000) make the next, a prefill-only step while r0
    # waits; then every running request decodes: r2 ends at .03, r0 and r1 at .04.
    # SGLang 0.3 cuts prompts to 8192-token chunks: r0's first token waits for its second
    # chunk (.02), which r1's first 4,384 tokens share; r1 and r2 start decoding at .03.
    rows = [(0, 12_000, 3), (0, 6_000, 3), (0.005, 1_000, 2)]
    out = {}
    for version in ("0.2", "0.3"):
        dep = resolve({"stack": {"name": "sglang", "version": version},
                       "kv": {"num_blocks": 40_000, "block_size": 1}})
        spec = ClusterSpec(dep.policy, TokenCost(step_s=0.01), kv_blocks=40_000,
                           block_size=1, check_invariants=True)
        res = simulate(table(rows), spec)
        assert (res.steps["num_prefill_tokens"] * res.steps["num_decode_seqs"] == 0).all()
        out[version] = (timeline(res.requests), res.steps["num_prefill_tokens"].tolist())
    assert out["0.2"] == ([(0, 0.0, 0.01, 0.04), (1, 0.01, 0.02, 0.04), (2, 0.01, 0.02, 0.03)],
                          [12_000, 6_000 + 1_000, 0, 0])
    assert out["0.3"][1] == [8192, 3808 + 4384, 1616 + 1000, 0, 0]
    assert [r[2] for r in out["0.3"][0]] == [0.02, 0.03, 0.03]  # first tokens


def test_sglang_02_preset_is_whole_prompt_prefill_first() -> None:
    dep = resolve({"hardware": {"gpu": "h100-sxm"}, "model": {"name": "llama-3.1-8b"},
                   "stack": {"name": "sglang", "version": "0.2"}})
    p = dep.policy
    assert (p.chunked_prefill, p.mixed_prefill, p.long_prompt_alone, p.max_num_batched_tokens,
            p.admission, p.preemption, p.num_scheduler_steps) == (
        False, False, True, 16384, "conservative", "fewest_outputs", 1)
    assert dep.block_size == 1


def test_sglang_02_runs_a_prompt_over_its_prefill_budget_alone() -> None:
    # r0's 20,000 tokens exceed max_prefill_tokens (16384): SGLang 0.2 admits a batch's
    # first request whatever its length, so r0 is prefilled alone .00-.01 and r1 (100)
    # waits for the next step .01-.02; both decode .02-.03 and end. With the knob off
    # (vLLM v0's rule) r0 is refused and r1 runs at once.
    rows = [(0, 20_000, 2), (0, 100, 2)]
    for alone in (True, False):
        dep = resolve({"stack": {"name": "sglang", "version": "0.2"},
                       "policy": {"long_prompt_alone": alone},
                       "kv": {"num_blocks": 40_000, "block_size": 1}})
        spec = ClusterSpec(dep.policy, TokenCost(step_s=0.01), kv_blocks=40_000,
                           block_size=1, check_invariants=True)
        res = simulate(table(rows), spec)
        steps = res.steps["num_prefill_tokens"].tolist()
        if alone:
            assert timeline(res.requests) == [(0, 0.0, 0.01, 0.03), (1, 0.01, 0.02, 0.03)]
            assert steps == [20_000, 100, 0]
        else:
            assert steps == [100, 0]
            assert res.requests.sort_values("request_id")["status"].tolist()[0] == "rejected"


def test_vllm_v1_0_8_runs_1024_on_an_a100_and_0_8_4_runs_256() -> None:
    # 300 requests of (4 + 2) tokens at 0 on an A100-80GB, 10 ms steps, room for all: the
    # 2048-token budget takes every prompt (1,200 tokens) in the first step under 0.8's
    # 1024 sequences, and all end with the decode step at .02. 0.8.4's 256 admits 256;
    # the other 44 wait while 256 run (.01-.02, the decode step that ends them), are
    # prefilled .02-.03 and end at .04.
    rows = [(0.0, 4, 2)] * 300
    got = {}
    for version in ("0.8", "0.8.4"):
        dep = resolve({"hardware": {"gpu": "a100-80gb"}, "model": {"name": "llama-2-7b"},
                       "stack": {"name": "vllm-v1", "version": version},
                       "kv": {"num_blocks": 1_000, "block_size": 16}})
        spec = ClusterSpec(dep.policy, TokenCost(step_s=0.01), kv_blocks=1_000,
                           block_size=16, check_invariants=True)
        res = simulate(table(rows), spec)
        got[version] = (res.steps["num_running"].tolist(),
                        res.steps["num_prefill_tokens"].tolist(),
                        sorted(set(res.requests["finish_s"].round(9))))
    assert got["0.8"] == ([300, 0], [1_200, 0], [0.02])
    assert got["0.8.4"] == ([256, 0, 44, 0], [1_024, 0, 176, 0], [0.02, 0.04])


@pytest.mark.parametrize(("stack", "weights", "given", "kv"), [
    ("vllm-v0", "fp8", None, "bf16"), ("vllm-v1", "fp8", None, "bf16"),
    ("sglang", "fp8", None, "bf16"), ("trtllm", "fp8", None, "fp8"),
    ("trtllm", "int4", None, "bf16"), ("none", "fp8", None, "fp8"),
    ("vllm-v1", "fp8", "fp8", "fp8")])
def test_kv_cache_dtype_follows_each_stacks_checkpoints(stack: str, weights: str,
                                                        given: str | None, kv: str) -> None:
    # vLLM's and SGLang's --kv-cache-dtype auto keeps an FP8 checkpoint's cache in bf16;
    # TensorRT-LLM's FP8 checkpoints (and servesim without a stack) quantise it too, its
    # int4 AWQ ones do not; a kv_dtype the scenario gives wins. Llama-3.1-8B's KV is 32
    # layers x 8 heads x 128 x 2 (K, V) = 65,536 values a token: 128 KiB in bf16, 64 KiB in
    # fp8, so the same memory holds half the blocks in bf16.
    model = {"name": "llama-3.1-8b", "weight_dtype": weights}
    if given:
        model["kv_dtype"] = given
    dep = resolve({"model": model, "stack": {"name": stack},
                   "kv": {"block_size": 16, "gpu_memory_utilization": 0.9}})
    assert dep.kv_dtype == kv
    bf16 = resolve({"model": {**model, "kv_dtype": "bf16"}, "stack": {"name": stack},
                    "kv": {"block_size": 16, "gpu_memory_utilization": 0.9}})
    assert dep.kv_blocks in ((bf16.kv_blocks,) if kv == "bf16"
                             else range(2 * bf16.kv_blocks, 2 * bf16.kv_blocks + 2))


@pytest.mark.parametrize(("model", "field"), [
    ({"weight_dtype": "fp8"}, "model.weight_dtype = fp8"),
    ({"kv_dtype": "fp8"}, "model.kv_dtype = fp8")])
def test_tensorrt_llm_refuses_fp8_on_an_a100(model: dict, field: str) -> None:
    # TensorRT-LLM's support matrix has no FP8 on Ampere; vLLM serves the same checkpoint
    # (FP8 Marlin, weight-only) and an int4 one runs under TensorRT-LLM with a bf16 cache
    point = {"model": {"name": "llama-3.1-8b", **model}, "hardware": {"gpu": "a100-80gb"}}
    with pytest.raises(ConfigError, match=f"{field}: trtllm 1.0 runs FP8 only on GPUs with "
                                          "FP8 tensor cores .* a100-80gb has none"):
        resolve({**point, "stack": {"name": "trtllm"}})
    assert resolve({**point, "stack": {"name": "vllm-v1"}}).kv_dtype == model.get(
        "kv_dtype", "bf16")
    assert resolve({**point, "model": {"name": "llama-3.1-8b", "weight_dtype": "int4"},
                    "stack": {"name": "trtllm"}}).kv_dtype == "bf16"


def test_tensorrt_llm_refuses_mxfp4_experts_on_an_a100() -> None:
    # GPUStack's TensorRT-LLM runs of gpt-oss on an A100 stop at "WFP4A16 MoE is
    # unsupported on SM80"; its vLLM runs of the same checkpoint on that GPU have figures
    point = {"model": {"name": "gpt-oss-20b", "weight_dtype": "mxfp4"},
             "hardware": {"gpu": "a100-80gb"}}
    with pytest.raises(ConfigError, match="model.weight_dtype = mxfp4: trtllm 1.0 has no "
                                          "MXFP4 expert kernels for a100-80gb"):
        resolve({**point, "stack": {"name": "trtllm"}})
    assert resolve({**point, "stack": {"name": "vllm-v1"}}).kv_dtype == "bf16"
    assert resolve({**point, "hardware": {"gpu": "h100-sxm"},
                    "stack": {"name": "trtllm"}}).kv_dtype == "bf16"


@pytest.mark.parametrize(("stack", "version", "on"), [
    ("vllm-v0", "", False), ("vllm-v1", "", True), ("sglang", "", True),
    ("trtllm", "1.0", True), ("trtllm", "0.11", False), ("trtllm", "0.10", False)])
def test_prefix_caching_is_each_stacks_out_of_the_box_default(stack: str, version: str,
                                                              on: bool) -> None:
    assert resolve({"stack": {"name": stack, "version": version}}).prefix_caching is on
    # the scenario's own setting wins; a padded policy and disaggregated pools, which
    # cannot cache prefixes, run without the preset's
    off = {"stack": {"name": stack, "version": version}, "kv": {"prefix_caching": False}}
    assert resolve(off).prefix_caching is False
    static = {"stack": {"name": stack, "version": version}, "policy": {"name": "static"}}
    assert resolve(static).prefix_caching is False
    pools = {"stack": {"name": stack, "version": version}, "disaggregated": {}}
    assert resolve(pools).prefix_caching is False


def test_a_shared_system_prompt_hits_vllm_v1s_cache_and_not_v0s() -> None:
    """Every request starts with the same 1,024-token system prompt: under vllm-v1 (prefix
    caching on by default) each request after the first finds its 64 blocks of 16 tokens
    cached; under vllm-v0 (off) none does."""
    from simulator.runner import run_point

    point = {"model": {"name": "llama-3.1-8b"}, "hardware": {"gpu": "h100-sxm"},
             "workload": {"arrival": "poisson", "rate": 2.0, "num_requests": 20,
                          "prompt": {"dist": "fixed", "tokens": 100},
                          "output": {"dist": "fixed", "tokens": 10},
                          "system_prompt_tokens": 1024, "system_prompt_share": 1.0}}
    v1 = run_point({}, {**point, "stack": {"name": "vllm-v1"}}).summary
    v0 = run_point({}, {**point, "stack": {"name": "vllm-v0"}}).summary
    assert v1["prefix_cached_tokens"] == 19 * 1024
    assert not v0.get("prefix_cached_tokens")
    assert v1["mean_ttft_ms"] < v0["mean_ttft_ms"]
