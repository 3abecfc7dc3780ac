"""Scheduler invariants checked after every schedule() when a run asks (issue 11).

``ClusterSpec(check_invariants=True)`` makes each replica check the batch a policy
returns and the state after each step; a broken invariant raises AssertionError naming it.
"""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from helpers import TokenCost, table

from simulator.cluster import ClusterSpec, simulate
from simulator.policies import Batch, ContinuousPolicy, ServerState, StaticPolicy, Wait

UNIT = TokenCost(step_s=1.0)
ROWS = [(0, 4, 3), (0, 6, 2), (0.5, 2, 4), (1.5, 8, 1)]


@dataclass(slots=True, frozen=True)
class LosesARequest(ContinuousPolicy):
    """Continuous batching that silently drops the second waiting request once."""

    def schedule(self, state: ServerState, now: float) -> Batch | Wait:
        if len(state.waiting) > 1 and now == 0:
            del state.waiting[1]
        return ContinuousPolicy.schedule(self, state, now)


@dataclass(slots=True, frozen=True)
class OverAdmits(ContinuousPolicy):
    """Continuous batching whose admission forgets max_num_seqs."""

    def schedule(self, state: ServerState, now: float) -> Batch | Wait:
        return ContinuousPolicy(max_num_seqs=256).schedule(state, now)


def test_correct_policies_pass_every_check() -> None:
    for policy in (ContinuousPolicy(max_num_seqs=2), ContinuousPolicy(
            max_num_batched_tokens=4, chunked_prefill=True), StaticPolicy(batch_size=2)):
        spec = ClusterSpec(policy, UNIT, kv_blocks=6, block_size=2, check_invariants=True)
        res = simulate(table(ROWS), spec)
        assert (res.requests["status"] == "finished").all()


@pytest.mark.pure_python
def test_a_lost_request_is_named() -> None:
    spec = ClusterSpec(LosesARequest(), UNIT, kv_blocks=100, check_invariants=True)
    with pytest.raises(AssertionError,
                       match="every request is in exactly one of waiting/running/finished"):
        simulate(table(ROWS), spec)
    simulate(table(ROWS), ClusterSpec(LosesARequest(), UNIT, kv_blocks=100))  # off: silent


@pytest.mark.pure_python
def test_running_over_max_num_seqs_is_named() -> None:
    spec = ClusterSpec(OverAdmits(max_num_seqs=2), UNIT, kv_blocks=100, check_invariants=True)
    with pytest.raises(AssertionError, match=r"running <= max_num_seqs \(3 running"):
        simulate(table(ROWS), spec)
