"""Exact, hand-checkable timelines for each policy with two or three requests."""

from __future__ import annotations

import pytest
from helpers import TokenCost, table, timeline

from simulator.cluster import ClusterSpec, simulate
from simulator.policies import ContinuousPolicy, DynamicPolicy, StaticPolicy

UNIT = TokenCost(step_s=1.0)  # every step takes 1 s whatever it holds


@pytest.mark.parametrize("fast_forward", [True, False])
def test_static_waits_for_a_full_batch_and_pays_for_padding(fast_forward: bool) -> None:
    # r0 at 0 (4 prompt, 3 out), r1 at 0.5 (2 prompt, 2 out). batch_size 2: start at 0.5.
    # cost 0.1 s per prefill token (padded: 2 rows x 4) = 0.8 s, 1 s per decode step.
    cost = TokenCost(prefill_token_s=0.1, step_s=0.0, decode_seq_s=0.5)
    spec = ClusterSpec(StaticPolicy(batch_size=2), cost, kv_blocks=100, block_size=4)
    res = simulate(table([(0, 4, 3), (0.5, 2, 2)]), spec, fast_forward=fast_forward)
    # prefill 0.5 -> 1.3; decode steps (2 padded rows x 0.5 s = 1 s) 1.3 -> 2.3 -> 3.3
    assert timeline(res.requests) == [(0, 0.5, 1.3, 3.3), (1, 0.5, 1.3, 2.3)]
    steps = res.steps
    assert steps["num_prefill_tokens"].tolist() == [8, 0, 0]
    assert steps["num_decode_seqs"].tolist() == [0, 2, 2]  # finished r1 still costs
    assert steps["num_decode_tokens"].tolist() == [0, 2, 1]
    assert steps["kv_blocks_used"].tolist() == [4, 4, 0]  # 2 rows x ceil((4+3)/4), held


def test_static_flushes_a_short_batch_once_arrivals_end() -> None:
    spec = ClusterSpec(StaticPolicy(batch_size=4), UNIT, kv_blocks=100, block_size=4)
    res = simulate(table([(0, 4, 2), (1.5, 4, 1)]), spec)
    # the second arrival closes the arrivals: a batch of 2 starts at 1.5
    assert timeline(res.requests) == [(0, 1.5, 2.5, 3.5), (1, 1.5, 2.5, 2.5)]


@pytest.mark.parametrize("fast_forward", [True, False])
def test_dynamic_releases_on_timeout_or_size(fast_forward: bool) -> None:
    # max 2 rows, 0.25 s wait. r0 at 0 alone -> released at 0.25; r1 at 0.5, r2 at 0.6
    # arrive while r0 runs (prefill 0.25-1.25, decode 1.25-2.25): released together at 2.25
    spec = ClusterSpec(DynamicPolicy(max_batch_size=2, max_wait_s=0.25), UNIT, 100, 4)
    res = simulate(table([(0, 4, 2), (0.5, 4, 2), (0.6, 4, 3)]), spec, fast_forward=fast_forward)
    assert timeline(res.requests) == [
        (0, 0.25, 1.25, 2.25), (1, 2.25, 3.25, 4.25), (2, 2.25, 3.25, 5.25)]


@pytest.mark.parametrize("fast_forward", [True, False])
def test_continuous_admits_at_the_next_step(fast_forward: bool) -> None:
    # r0 at 0 (2 out), r1 at 0.5 (3 out). 1 s per step. Prefill-first (no chunking):
    # r0 prefill 0-1 (token 1); r1 arrived: prefill 1-2 (r0 stalls); decode both 2-3
    # (r0 done); r1 decodes 3-4 (done).
    spec = ClusterSpec(ContinuousPolicy(), UNIT, kv_blocks=100, block_size=4)
    res = simulate(table([(0, 4, 2), (0.5, 4, 3)]), spec, fast_forward=fast_forward)
    assert timeline(res.requests) == [(0, 0.0, 1.0, 3.0), (1, 1.0, 2.0, 4.0)]
    assert res.steps["num_prefill_tokens"].tolist() == [4, 4, 0, 0]
    assert res.steps["num_decode_seqs"].tolist() == [0, 0, 2, 1]


@pytest.mark.parametrize("fast_forward", [True, False])
def test_chunked_prefill_mixes_chunks_with_decodes(fast_forward: bool) -> None:
    # budget 4 tokens. r0 (4 prompt, 3 out) at 0, r1 (6 prompt, 1 out) at 0.5.
    # step 0-1: r0 prefill 4. step 1-2: r0 decode 1 + r1 chunk 3. step 2-3: r0 decode
    # (done) + r1 chunk 3 (done: first and only token at 3).
    spec = ClusterSpec(ContinuousPolicy(max_num_batched_tokens=4, chunked_prefill=True),
                       UNIT, kv_blocks=100, block_size=4)
    res = simulate(table([(0, 4, 3), (0.5, 6, 1)]), spec, fast_forward=fast_forward)
    assert timeline(res.requests) == [(0, 0.0, 1.0, 3.0), (1, 1.0, 3.0, 3.0)]
    assert res.steps["num_prefill_tokens"].tolist() == [4, 3, 3]
    assert res.steps["num_decode_seqs"].tolist() == [0, 1, 1]


@pytest.mark.parametrize("fast_forward", [True, False])
def test_preemption_by_recompute_when_kv_runs_out(fast_forward: bool) -> None:
    # 3 blocks of 2 tokens, 1 s per step. r0 and r1 (2 prompt, 4 out) both at 0.
    # 0-1: prefill both (1 block each, 1 free); both emit token 1 at 1.
    # 1-2: each needs a 2nd block for position 2, one is free: r0 takes it, r1 (newest)
    #      is preempted (its block freed, back to the queue; it keeps its 1 token). r0 -> 2.
    # 2-3: r1 must recompute 3 tokens (2 blocks), 1 free: it waits; r0 decodes (position
    #      3 fits its 2nd block) -> 3 tokens.
    # 3-4: r0's position 4 opens its 3rd block (the last free): r0 -> 4 tokens, finished
    #      at 4, its 3 blocks freed.
    # 4-5: r1 recomputes its 3 tokens (2 blocks) and emits token 2 at 5.
    # 5-6: token 3 (position 3 fits). 6-7: position 4 opens a 3rd block: token 4 at 7.
    spec = ClusterSpec(ContinuousPolicy(), UNIT, kv_blocks=3, block_size=2,
                       check_invariants=True)
    res = simulate(table([(0, 2, 4), (0, 2, 4)]), spec, fast_forward=fast_forward)
    assert timeline(res.requests) == [(0, 0.0, 1.0, 4.0), (1, 0.0, 1.0, 7.0)]
    recs = res.requests.set_index("request_id")
    assert recs["preemptions"].tolist() == [0, 1]
    assert (res.requests["status"] == "finished").all()
    steps = res.steps
    assert steps["num_prefill_tokens"].tolist() == [4, 0, 0, 0, 3, 0, 0]
    assert steps["num_decode_seqs"].tolist() == [0, 1, 1, 1, 0, 1, 1]
    assert steps["num_decode_tokens"].tolist() == [0, 1, 1, 1, 1, 1, 1]  # the recompute
    assert steps["num_running"].tolist() == [2, 1, 1, 0, 1, 1, 0]  # emits r1's token 2
    assert steps["queue_len"].tolist() == [0, 1, 1, 1, 0, 0, 0]
    assert steps["kv_blocks_used"].tolist() == [2, 2, 2, 0, 2, 2, 0]


def test_request_too_big_for_the_cache_is_rejected_with_numbers() -> None:
    spec = ClusterSpec(ContinuousPolicy(), UNIT, kv_blocks=2, block_size=4)
    res = simulate(table([(0, 10, 2), (0, 2, 2)]), spec)
    recs = res.requests.set_index("request_id")
    assert recs.loc[0, "status"] == "rejected"
    assert recs.loc[0, "reason"].startswith(
        "prompt + output over the replica's KV cache: needs 3 KV blocks for 10+2 tokens")
    assert recs.loc[1, "status"] == "finished"


def test_unchunked_budget_must_hold_a_whole_recompute() -> None:
    # budget 8 tokens, no chunking: r0 (4 + 5 = 9 tokens) could not be recomputed in one
    # step after a preemption, so it is refused up front; r1 (4 + 4 = 8) runs.
    spec = ClusterSpec(ContinuousPolicy(max_num_batched_tokens=8), UNIT, 100, 4)
    res = simulate(table([(0, 4, 5), (0, 4, 4)]), spec)
    recs = res.requests.set_index("request_id")
    assert recs.loc[0, "status"] == "rejected"
    assert recs.loc[0, "reason"].startswith(
        "prompt + output over max_num_batched_tokens without chunked prefill: "
        "prompt + output = 9 tokens > max_num_batched_tokens = 8")
    assert timeline(res.requests)[1] == (1, 0.0, 1.0, 4.0)
