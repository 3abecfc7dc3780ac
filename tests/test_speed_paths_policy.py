"""Chunked prefill's clock-keeping mixed step gives exactly what the general loop gives.

``clock_and_chunks`` (simulator/policies/clock_chunks.py) builds the mixed step without
writing the decode clock back; switched off, every such step takes the general loop
(flush, walk every running request). Random small workloads near and over saturation,
tight KV caches and budgets (so the fallbacks run too), invariants checked every step.
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd
import pytest
from helpers import TokenCost, table
from hypothesis import given, settings
from hypothesis import strategies as st

from simulator.cluster import ClusterSpec, simulate
from simulator.policies import Batch, ContinuousPolicy, Sequence, ServerState

COST = TokenCost(step_s=0.003, prefill_token_s=1e-4, decode_seq_s=2e-4)

requests = st.lists(
    st.tuples(st.floats(0, 1), st.integers(1, 80), st.integers(1, 40)), min_size=1, max_size=30
)
chunked = st.builds(ContinuousPolicy, max_num_seqs=st.integers(1, 8),
                    max_num_batched_tokens=st.integers(4, 64), chunked_prefill=st.just(True),
                    preemption=st.sampled_from(["newest", "fewest_outputs"]),
                    admission=st.sampled_from(["greedy", "no_evict", "conservative"]))


@dataclass(slots=True, frozen=True)
class GeneralLoop(ContinuousPolicy):
    """Chunked prefill with every mixed step taking the general per-request loop."""

    def _clock_and_chunks(
        self, state: ServerState
    ) -> tuple[list[tuple[Sequence, int]], Batch, int] | None:
        return None


@settings(max_examples=200, deadline=None)
@given(rows=requests, policy=chunked, kv_blocks=st.integers(4, 60),
       block_size=st.integers(1, 6), fast_forward=st.booleans())
@pytest.mark.pure_python
def test_clock_keeping_mixed_step_matches_the_general_loop(  # type: ignore[no-untyped-def]
    rows, policy, kv_blocks, block_size, fast_forward
) -> None:
    general = GeneralLoop(policy.max_num_seqs, policy.max_num_batched_tokens, True,
                          admission=policy.admission, preemption=policy.preemption)
    results = [
        simulate(table(sorted(rows)), ClusterSpec(p, COST, kv_blocks=kv_blocks,
                                                  block_size=block_size, check_invariants=True),
                 fast_forward=fast_forward)
        for p in (policy, general)
    ]
    pd.testing.assert_frame_equal(results[0].requests, results[1].requests, check_exact=True)
    pd.testing.assert_frame_equal(results[0].steps, results[1].steps, check_exact=True)
