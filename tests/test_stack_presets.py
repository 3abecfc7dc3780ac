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


@pytest.mark.parametrize(("gpu", "seqs", "budget"), [("h100-sxm", 1024, 8192),
                                                      ("h200", 1024, 8192),
                                                      ("a100-80gb", 256, 2048),
                                                      ("l40s", 256, 2048)])
def test_vllm_v1_batch_defaults_follow_the_gpu(gpu: str, seqs: int, budget: int) -> None:
    dep = resolve({"hardware": {"gpu": gpu}, "model": {"name": "llama-2-7b"},
                   "stack": {"name": "vllm-v1", "version": "0.10"}})
    assert (dep.policy.max_num_seqs, dep.policy.max_num_batched_tokens) == (seqs, budget)
    old = resolve({"hardware": {"gpu": gpu}, "model": {"name": "llama-2-7b"},
                   "stack": {"name": "vllm-v1", "version": "0.8"}})
    assert (old.policy.max_num_seqs, old.policy.max_num_batched_tokens) == (256, 2048)


@pytest.mark.parametrize("gpu", ["rtx4090", "l40s", "h100-sxm", "h200", "b200"])
def test_sglang_chunk_size_follows_gpu_memory(gpu: str) -> None:
    gib = get_hardware(gpu).memory_bytes / 2**30
    want = 2048 if gib < 35 else 16384 if gib >= 160 else 8192
    dep = resolve({"hardware": {"gpu": gpu}, "model": {"name": "llama-2-7b"},
                   "stack": {"name": "sglang"}})
    assert dep.policy.max_num_batched_tokens == want


@pytest.mark.parametrize(("gpu", "v03", "v04"), [("rtx4090", 8192, 2048),
                                                  ("h100-sxm", 8192, 8192),
                                                  ("b200", 8192, 8192)])
def test_older_sglang_chunk_sizes(gpu: str, v03: int, v04: int) -> None:
    """0.3: 8192 on every GPU. 0.4: 2048 under 25,000 MB (the 4090's 24 GiB is 24,576 MB),
    else 8192, no 16384 tier (0.5 gives the 180 GiB B200 16384)."""
    for version, want in (("0.3", v03), ("0.4", v04)):
        dep = resolve({"hardware": {"gpu": gpu}, "model": {"name": "llama-2-7b"},
                       "stack": {"name": "sglang", "version": version}})
        assert dep.policy.max_num_batched_tokens == want, version


def test_every_preset_names_its_sources() -> None:
    for presets in STACKS.values():
        for preset in presets:
            assert preset.sources and all(isinstance(s, str) and s for s in preset.sources)
