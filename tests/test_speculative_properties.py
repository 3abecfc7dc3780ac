"""Property tests with speculative steps: KV conservation and request accounting (issue 14).

Every run checks the scheduler's invariants after every schedule() and step
(``check_invariants``: a running request holds exactly ``blocks_for(num_computed)`` KV
blocks between steps, so the verify's lookahead blocks were given back; used blocks equal
the blocks held; every request is in one of waiting/running/finished; the token budget
covers each row's ``1 + drafts``), over small KV caches that force preemption.
"""

from __future__ import annotations

import pandas as pd
from helpers import TokenCost, assert_accounted, table
from hypothesis import given, settings
from hypothesis import strategies as st

from simulator.cluster import ClusterSpec, simulate
from simulator.policies import ContinuousPolicy
from simulator.speculative_acceptance import Acceptance

COST = TokenCost(step_s=0.003, prefill_token_s=1e-4, decode_seq_s=2e-4)

requests = st.lists(
    st.tuples(st.floats(0, 2), st.integers(1, 40), st.integers(1, 30)), min_size=1, max_size=25
)
policies = st.builds(
    ContinuousPolicy, max_num_seqs=st.integers(1, 6), max_num_batched_tokens=st.integers(8, 64),
    chunked_prefill=st.booleans(), num_speculative_tokens=st.integers(1, 6),
    preemption=st.sampled_from(["newest", "fewest_outputs"]), mixed_chunks=st.booleans(),
    admission=st.sampled_from(["greedy", "no_evict", "conservative"]),
)
acceptances = st.one_of(
    st.builds(Acceptance, alpha=st.floats(0, 1), seed=st.integers(0, 99)),
    st.builds(Acceptance, counts=st.just((0.25, 0.25, 0.5)), seed=st.integers(0, 99)),
)


@settings(max_examples=150, deadline=None)
@given(rows=requests, policy=policies, acceptance=acceptances, kv_blocks=st.integers(4, 40),
       replicas=st.integers(1, 3))
def test_invariants_with_speculative_steps(rows, policy, acceptance, kv_blocks,  # type: ignore[no-untyped-def]
                                           replicas) -> None:
    spec = ClusterSpec(policy, COST, kv_blocks=kv_blocks, block_size=4, num_replicas=replicas,
                       router="least_outstanding", check_invariants=True, speculative=acceptance)
    res = simulate(table(sorted(rows)), spec)
    recs, steps = res.requests, res.steps
    assert_accounted(res, len(rows), kv_blocks)
    done = recs[recs["status"] == "finished"]
    assert (steps["num_running"] <= policy.max_num_seqs).all()
    stats = res.spec_stats
    assert stats is not None
    # one ITL sample per decode row per step; a speculative row emits 1..1+drafts tokens
    assert stats.num_row_steps <= steps["num_decode_tokens"].sum()
    assert stats.num_row_steps <= stats.num_emitted <= stats.num_row_steps + stats.num_drafts
    if done["preemptions"].sum() == 0:  # tokens: the first from the prefill, the rest decoded
        assert stats.num_emitted == (done["output_tokens"] - 1).sum()
        assert stats.num_row_steps == steps["num_decode_tokens"].sum()


@settings(max_examples=60, deadline=None)
@given(rows=requests, kv_blocks=st.integers(4, 40), chunked=st.booleans())
def test_alpha_zero_emits_what_plain_decoding_emits(rows, kv_blocks, chunked) -> None:  # type: ignore[no-untyped-def]
    """alpha = 0 and a cost blind to drafts: the same schedule as plain decoding, except
    that the token budget and the KV cache are taken by the drafts too (a verify step
    holds its rows' lookahead blocks, as vLLM's lookahead slots do), so compare with a
    budget no step reaches and a cache that holds every request at once with its drafts:
    under KV pressure the lookahead blocks rightly change who is preempted when."""
    plain = ContinuousPolicy(max_num_batched_tokens=4096, chunked_prefill=chunked)
    spec = ContinuousPolicy(max_num_batched_tokens=4096, chunked_prefill=chunked,
                            num_speculative_tokens=3)
    reqs = table(sorted(rows))
    room = kv_blocks + sum(-(-(p + o + 3) // 4) for _, p, o in rows)  # blocks of 4 tokens
    a = simulate(reqs, ClusterSpec(plain, COST, kv_blocks=room, block_size=4))
    b = simulate(reqs, ClusterSpec(spec, COST, kv_blocks=room, block_size=4,
                                   speculative=Acceptance(alpha=0.0)))
    assert a.requests["preemptions"].sum() == b.requests["preemptions"].sum() == 0
    cols = ["status", "scheduled_s", "first_token_s", "finish_s"]
    pd.testing.assert_frame_equal(a.requests[cols], b.requests[cols])
