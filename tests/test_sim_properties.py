"""Property tests of the simulator's invariants over random small workloads."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pandas as pd
from helpers import TokenCost, assert_accounted, grid_rows, request_rows
from hypothesis import given, settings
from hypothesis import strategies as st

from simulator.cluster import ClusterSpec, simulate
from simulator.policies import ContinuousPolicy, DynamicPolicy, StaticPolicy

COST = TokenCost(step_s=0.003, prefill_token_s=1e-4, decode_seq_s=2e-4)

requests = request_rows()
policies = st.one_of(
    st.builds(StaticPolicy, batch_size=st.integers(1, 5)),
    st.builds(DynamicPolicy, max_batch_size=st.integers(1, 5), max_wait_s=st.floats(0, 0.5)),
    st.builds(ContinuousPolicy, max_num_seqs=st.integers(1, 6),
              max_num_batched_tokens=st.integers(8, 64), chunked_prefill=st.booleans()),
)


def _table(rows: list[tuple[float, int, int]]) -> pd.DataFrame:
    rows = sorted(rows)
    return pd.DataFrame({
        "request_id": np.arange(len(rows)),
        "arrival_s": [r[0] for r in rows],
        "prompt_tokens": [r[1] for r in rows],
        "output_tokens": [r[2] for r in rows],
    })


@settings(max_examples=150, deadline=None)
@given(rows=requests, policy=policies, kv_blocks=st.integers(4, 40), replicas=st.integers(1, 3),
       window=st.sampled_from([0, 0, 1, 3]))
def test_invariants(rows, policy, kv_blocks, replicas, window) -> None:  # type: ignore[no-untyped-def]
    # window: blocks each running request's sliding-window layers hold (vLLM's hybrid cache)
    spec = ClusterSpec(policy, COST, kv_blocks=kv_blocks, block_size=4, num_replicas=replicas,
                       router="least_outstanding", window_blocks=window)
    res = simulate(_table(rows), replace(spec, check_invariants=True))
    recs, steps = res.requests, res.steps
    # every request accounted for, times ordered, KV conserved
    assert_accounted(res, len(rows), kv_blocks)
    done = recs[recs["status"] == "finished"]
    # steps back to back per replica, never overlapping
    for _, s in steps.groupby("replica"):
        assert (s["start_s"].to_numpy()[1:] >= s["end_s"].to_numpy()[:-1] - 1e-12).all()
    if isinstance(policy, ContinuousPolicy):
        assert (steps["num_running"] <= policy.max_num_seqs).all()
        tokens = steps["num_prefill_tokens"] + steps["num_decode_seqs"]
        assert (tokens <= policy.max_num_batched_tokens).all()
    else:
        size = getattr(policy, "batch_size", getattr(policy, "max_batch_size", 0))
        assert (steps["num_decode_seqs"] <= size).all()
    # output tokens emitted: first tokens + decode tokens = outputs of finished requests
    assert steps["num_decode_tokens"].sum() == (done["output_tokens"] - 1).sum()


@settings(max_examples=100, deadline=None)
@given(rows=requests, policy=policies, kv_blocks=st.integers(4, 40),
       window=st.sampled_from([0, 0, 2]))
def test_fast_forward_gives_the_same_records_as_stepping(rows, policy, kv_blocks, window) -> None:  # type: ignore[no-untyped-def]
    spec = ClusterSpec(policy, COST, kv_blocks=kv_blocks, block_size=4, window_blocks=window)
    fast = simulate(_table(rows), spec, fast_forward=True)
    slow = simulate(_table(rows), spec, fast_forward=False)
    cols = ["scheduled_s", "first_token_s", "finish_s"]
    np.testing.assert_allclose(fast.requests[cols], slow.requests[cols], rtol=1e-9, atol=1e-9)
    assert fast.requests["status"].tolist() == slow.requests["status"].tolist()
    assert fast.requests["preemptions"].tolist() == slow.requests["preemptions"].tolist()
    int_cols = ["num_prefill_tokens", "num_decode_seqs", "decode_context_tokens",
                "num_decode_tokens", "num_running", "queue_len", "kv_blocks_used"]
    assert fast.steps[int_cols].values.tolist() == slow.steps[int_cols].values.tolist()
    np.testing.assert_allclose(fast.steps["end_s"], slow.steps["end_s"], rtol=1e-9, atol=1e-9)
    assert fast.num_events <= slow.num_events


def test_same_seed_same_result_and_no_interference() -> None:
    rng = np.random.default_rng(5)
    rows = [(float(a), int(p), int(o)) for a, p, o in
            zip(np.cumsum(rng.exponential(0.05, 300)), rng.integers(1, 200, 300),
                rng.integers(1, 100, 300), strict=True)]
    spec_a = ClusterSpec(ContinuousPolicy(max_num_seqs=16), COST, kv_blocks=200, block_size=16)
    spec_b = ClusterSpec(StaticPolicy(batch_size=4), COST, kv_blocks=200, block_size=16)
    a1 = simulate(_table(rows), spec_a)
    simulate(_table(rows), spec_b)  # another simulation in between must not change a
    a2 = simulate(_table(rows), spec_a)
    pd.testing.assert_frame_equal(a1.requests, a2.requests)
    pd.testing.assert_frame_equal(a1.steps, a2.steps)


grid_requests = grid_rows()


@settings(max_examples=100, deadline=None)
@given(rows=grid_requests, policy=policies, kv_blocks=st.integers(4, 40),
       replicas=st.integers(1, 2))
def test_ties_between_arrivals_and_step_ends_resolve_the_same_way(  # type: ignore[no-untyped-def]
    rows, policy, kv_blocks, replicas
) -> None:
    # 0.25 s steps and arrivals on a 0.125 s grid: many arrivals land exactly on a step
    # end. Arrivals go first at equal times, so stepping and fast-forward agree exactly.
    spec = ClusterSpec(policy, TokenCost(step_s=0.25), kv_blocks=kv_blocks, block_size=4,
                       num_replicas=replicas, router="least_outstanding")
    fast = simulate(_table(rows), spec, fast_forward=True)
    slow = simulate(_table(rows), spec, fast_forward=False)
    pd.testing.assert_frame_equal(fast.requests, slow.requests)
    pd.testing.assert_frame_equal(fast.steps, slow.steps)
