"""The simulator's speed paths give exactly what the plain paths give.

- Continuous batching's all-decode fast path (no per-request KV query) against the
  general per-request loop.
- A fast-forward that stops at a known next arrival against one cut by the arrival's
  interrupt, on a time grid where arrivals land exactly on step ends.
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd
import pytest
from helpers import TokenCost, grid_rows, request_rows, table
from hypothesis import given, settings
from hypothesis import strategies as st

from simulator.cluster import ClusterSpec, simulate
from simulator.kvcache import blocks_used_after_steps, decode_steps_fitting, new_block_counts
from simulator.policies import Batch, ContinuousPolicy, DynamicPolicy, ServerState, StaticPolicy
from simulator.replica import Replica

COST = TokenCost(step_s=0.003, prefill_token_s=1e-4, decode_seq_s=2e-4)
GRID_COST = TokenCost(step_s=0.25)  # every step 0.25 s: arrivals on the grid tie with step ends

requests = request_rows()
grid_requests = grid_rows()
continuous = st.builds(ContinuousPolicy, max_num_seqs=st.integers(1, 6),
                       max_num_batched_tokens=st.integers(8, 64), chunked_prefill=st.booleans())
policies = st.one_of(
    st.builds(StaticPolicy, batch_size=st.integers(1, 5)),
    st.builds(DynamicPolicy, max_batch_size=st.integers(1, 5), max_wait_s=st.floats(0, 0.5)),
    continuous,
)


@dataclass(slots=True, frozen=True)
class SlowContinuous(ContinuousPolicy):
    """Continuous batching with the all-decode fast path switched off."""

    def _decode_all(self, state: ServerState) -> Batch | None:
        return None


def _same(a: pd.DataFrame, b: pd.DataFrame) -> None:
    pd.testing.assert_frame_equal(a, b, check_exact=False, rtol=1e-12, atol=1e-12)


@settings(max_examples=150, deadline=None)
@given(rows=requests, policy=continuous, kv_blocks=st.integers(4, 40),
       block_size=st.integers(1, 6), replicas=st.integers(1, 2))
@pytest.mark.pure_python
def test_all_decode_fast_path_matches_the_per_request_loop(  # type: ignore[no-untyped-def]
    rows, policy, kv_blocks, block_size, replicas
) -> None:
    slow_policy = SlowContinuous(policy.max_num_seqs, policy.max_num_batched_tokens,
                                 policy.chunked_prefill)
    results = [
        simulate(table(sorted(rows)), ClusterSpec(p, COST, kv_blocks=kv_blocks,
                                                  block_size=block_size, num_replicas=replicas,
                                                  check_invariants=True))
        for p in (policy, slow_policy)
    ]
    _same(results[0].requests, results[1].requests)
    _same(results[0].steps, results[1].steps)


@settings(max_examples=150, deadline=None)
@given(rows=grid_requests, policy=policies, kv_blocks=st.integers(4, 40))
def test_stopping_at_a_known_arrival_matches_the_interrupt(  # type: ignore[no-untyped-def]
    rows, policy, kv_blocks
) -> None:
    spec = ClusterSpec(policy, GRID_COST, kv_blocks=kv_blocks, block_size=4)
    known = simulate(table(sorted(rows)), spec)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(Replica, "_run_until_arrival", Replica._run_interruptible)
        interrupted = simulate(table(sorted(rows)), spec)
    _same(known.requests, interrupted.requests)
    _same(known.steps, interrupted.steps)


@given(cached=st.lists(st.integers(1, 200), min_size=1, max_size=12),
       block_size=st.integers(1, 9), num_free=st.integers(0, 60), steps=st.integers(1, 60))
def test_block_counts_match_a_token_by_token_count(  # type: ignore[no-untyped-def]
    cached, block_size, num_free, steps
) -> None:
    def blocks(n: int) -> int:
        return -(-n // block_size)

    counts = new_block_counts(cached, block_size)
    opened = blocks_used_after_steps(counts, steps, 0)[1:]
    brute = [sum(blocks(n + i) - blocks(n) for n in cached) for i in range(1, steps + 1)]
    assert opened.tolist() == brute
    fitting = decode_steps_fitting(counts, num_free)
    assert sum(blocks(n + fitting) - blocks(n) for n in cached) <= num_free
    assert sum(blocks(n + fitting + 1) - blocks(n) for n in cached) > num_free
