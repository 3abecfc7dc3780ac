"""Chunked prefill's runs of mixed steps give exactly the records and step log of stepping.

``replica_runs.ChunkRuns`` runs the mixed steps that follow one the policy decided (one
prompt's chunks beside the decode clock's members, ``policies/chunk_runs.py``) without a
``schedule()`` each, up to the next arrival. Compared with the same runs with that path
off (every step scheduled), and with replicas told nothing ahead stepping one exact SimPy
event per step without fast-forward: random workloads whose prompts span several chunks,
tight KV caches and budgets (so every guard ends runs), every admission and preemption
rule, horizons, several replicas, and a cost model that draws a random factor per step.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
import pytest
from helpers import TokenCost, grid_rows, request_rows, table
from hypothesis import given, settings
from hypothesis import strategies as st
from test_speed_paths_replica import ahead_and_exact

import simulator.replica as replica_module
from simulator.cluster import ClusterSpec, SimResult, simulate
from simulator.costs import LinearCost, RooflineCost
from simulator.costs.base import JitterCost
from simulator.policies import ContinuousPolicy
from simulator.specs import get_hardware, get_model

COSTS = {
    "linear": LinearCost(step_s=0.003, prefill_token_s=1e-4, decode_seq_s=2e-4,
                         decode_context_s=1e-6, request_s=1e-4),
    "roofline": RooflineCost(get_model("tiny"), get_hardware("cpu"), weight_dtype="fp32"),
    "no-pricer": TokenCost(step_s=0.003, prefill_token_s=1e-4, decode_seq_s=2e-4),
}

requests = request_rows(240, 40)  # prompts up to ~10 chunks of the smallest budgets
chunked = st.builds(ContinuousPolicy, max_num_seqs=st.integers(1, 8),
                    max_num_batched_tokens=st.integers(4, 64), chunked_prefill=st.just(True),
                    preemption=st.sampled_from(["newest", "fewest_outputs"]),
                    admission=st.sampled_from(["greedy", "no_evict", "conservative"]),
                    kv_watermark=st.sampled_from([0.0, 0.1]))


def _same(a: SimResult, b: SimResult) -> None:
    pd.testing.assert_frame_equal(a.requests, b.requests, check_exact=True)
    pd.testing.assert_frame_equal(a.steps, b.steps, check_exact=True)


def _no_chunk_runs(mp: pytest.MonkeyPatch) -> None:
    """Every mixed step scheduled by the policy, as before chunk runs."""
    mp.setattr(replica_module, "chunking_policy", lambda policy: None)


@settings(max_examples=200, deadline=None)
@given(rows=requests, policy=chunked, kv_blocks=st.integers(4, 80),
       block_size=st.integers(1, 6), replicas=st.integers(1, 2),
       cost=st.sampled_from([*COSTS, "jitter"]), horizon=st.sampled_from([None, 0.5, 1.7]))
def test_chunk_runs_match_scheduling_every_step(  # type: ignore[no-untyped-def]
    rows, policy, kv_blocks, block_size, replicas, cost, horizon
) -> None:
    def spec() -> ClusterSpec:  # a jitter model draws from its own generator: a fresh one
        model = JitterCost(COSTS["linear"], 0.3, seed=7) if cost == "jitter" else COSTS[cost]
        return ClusterSpec(policy, model, kv_blocks=kv_blocks, block_size=block_size,
                           num_replicas=replicas, check_invariants=True)

    fast = simulate(table(sorted(rows)), spec(), horizon_s=horizon)
    with pytest.MonkeyPatch.context() as mp:
        _no_chunk_runs(mp)
        stepped = simulate(table(sorted(rows)), spec(), horizon_s=horizon)
    _same(fast, stepped)


@settings(max_examples=150, deadline=None)
@given(rows=requests, policy=chunked, kv_blocks=st.integers(4, 80),
       block_size=st.integers(1, 6), replicas=st.integers(1, 2),
       cost=st.sampled_from(["linear", "roofline"]))
def test_chunk_runs_match_one_exact_event_per_step(  # type: ignore[no-untyped-def]
    rows, policy, kv_blocks, block_size, replicas, cost
) -> None:
    spec = ClusterSpec(policy, COSTS[cost], kv_blocks=kv_blocks, block_size=block_size,
                       num_replicas=replicas)
    _same(*ahead_and_exact(rows, spec, fast_forward=True))


grid_requests = grid_rows(240)


@settings(max_examples=150, deadline=None)
@given(rows=grid_requests, policy=chunked, kv_blocks=st.integers(4, 80),
       block_size=st.integers(1, 6))
def test_chunk_runs_stop_at_an_arrival_tied_with_a_step_end(  # type: ignore[no-untyped-def]
    rows, policy, kv_blocks, block_size
) -> None:
    spec = ClusterSpec(policy, LinearCost(step_s=0.25), kv_blocks=kv_blocks,
                       block_size=block_size)
    fast = simulate(table(sorted(rows)), spec)
    with pytest.MonkeyPatch.context() as mp:
        _no_chunk_runs(mp)
        stepped = simulate(table(sorted(rows)), spec)
    _same(fast, stepped)
    _same(*ahead_and_exact(rows, spec, fast_forward=True))


def _counted(schedule: Any, calls: list[bool], tag: bool) -> Any:
    """``schedule``, appending ``tag`` to ``calls`` at each call."""
    def counted(self: ContinuousPolicy, state: Any, now: float) -> Any:
        calls.append(tag)
        return schedule(self, state, now)
    return counted


@pytest.mark.pure_python
def test_a_long_prompt_runs_its_chunks_without_a_decision_each() -> None:
    """One request decoding (prompt 4, 30 tokens out) and, 0.015 s later, a 100-token
    prompt under a 17-token budget: each step decodes the first request and gives the
    prompt 16 tokens (6 steps of 16, then 4), 0.01 s a step (TokenCost: step_s only).
    Steps start at 0, 0.01, ...; the prompt waits for the step starting at 0.02 and its
    last chunk ends at 0.02 + 7 x 0.01 = 0.09. The 6 steps after its first chunk run
    without a decision."""
    policy = ContinuousPolicy(max_num_seqs=4, max_num_batched_tokens=17, chunked_prefill=True)
    spec = ClusterSpec(policy, TokenCost(step_s=0.01), kv_blocks=100, block_size=4)
    rows = [(0.0, 4, 30), (0.015, 100, 3)]
    calls = []
    for runs in (True, False):
        with pytest.MonkeyPatch.context() as mp:
            if not runs:
                _no_chunk_runs(mp)
            counted = _counted(ContinuousPolicy.schedule, calls, runs)
            mp.setattr(ContinuousPolicy, "schedule", counted)
            res = simulate(table(rows), spec)
        long = res.requests.set_index("request_id").loc[1]
        assert long.scheduled_s == pytest.approx(0.02)
        assert long.first_token_s == pytest.approx(0.09)
        steps = res.steps
        assert steps.num_prefill_tokens.tolist()[2:9] == [16] * 6 + [4]
    assert calls.count(False) - calls.count(True) == 6


def test_an_arrival_at_a_step_end_inside_a_run_ends_the_run_there() -> None:
    """Steps of 0.25 s: a 4-token prompt (30 out) and a 200-token one at 0, a budget of 17:
    17 prompt tokens at [0, 0.25), then the long prompt's 16-token chunks beside one decode.
    A request arriving at 1.0, exactly when the fourth step ends, is queued before that
    step's row is logged (arrivals go first at a tie), as when every step is scheduled:
    queue lengths 0, 0, 0, 1, 1."""
    policy = ContinuousPolicy(max_num_seqs=4, max_num_batched_tokens=17, chunked_prefill=True)
    spec = ClusterSpec(policy, LinearCost(step_s=0.25), kv_blocks=100, block_size=4)
    rows = [(0.0, 4, 30), (0.0, 200, 3), (1.0, 10, 3)]
    fast = simulate(table(rows), spec)
    assert fast.steps.end_s.tolist()[:5] == [0.25, 0.5, 0.75, 1.0, 1.25]
    assert fast.steps.num_prefill_tokens.tolist()[:5] == [17, 16, 16, 16, 16]
    assert fast.steps.queue_len.tolist()[:5] == [0, 0, 0, 1, 1]
    with pytest.MonkeyPatch.context() as mp:
        _no_chunk_runs(mp)
        _same(fast, simulate(table(rows), spec))


@pytest.mark.parametrize("seed", range(40))
@pytest.mark.parametrize("replicas", [1, 2])
def test_chunk_runs_match_on_numpy_drawn_traffic(seed: int, replicas: int) -> None:
    """40 requests over 2 s (hypothesis favours short lists), prompts up to 4 chunks of a
    32-token budget, 40 KV blocks of 4 tokens: preemptions, and recomputes chunked again
    (seed 33 on one replica: a recompute left with one token, which it decodes)."""
    rng = np.random.default_rng(seed)
    n = 40
    rows = sorted(zip(rng.uniform(0, 2, n).tolist(), rng.integers(1, 120, n).tolist(),
                      rng.integers(1, 60, n).tolist(), strict=True))
    policy = ContinuousPolicy(max_num_seqs=8, max_num_batched_tokens=32, chunked_prefill=True)
    spec = ClusterSpec(policy, COSTS["linear"], kv_blocks=40, block_size=4,
                       num_replicas=replicas, check_invariants=True)
    fast = simulate(table(rows), spec)
    with pytest.MonkeyPatch.context() as mp:
        _no_chunk_runs(mp)
        _same(fast, simulate(table(rows), spec))
    _same(*ahead_and_exact(rows, spec, fast_forward=True))
