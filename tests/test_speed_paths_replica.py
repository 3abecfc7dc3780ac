"""The replica's speed paths give exactly the records and step log of its plain paths.

- Several steps per SimPy event (steps that end before the known next arrival run on the
  replica's own clock) against one SimPy event per step.
- Short decode runs priced step by step in plain Python against the vectorised plan.
- With an exact scalar pricer, fast-forward on and off give identical results.
- Several replicas behind a router that reads no token counts: each runs its steps up to
  the fleet's next arrival (known ahead) at once and lets a decode run go on until a
  request reaches it, against one SimPy event per step and replicas told nothing ahead.

Small random workloads, every policy, fast-forward on and off, horizons, and a time grid
where arrivals tie with step ends.
"""

from __future__ import annotations

import math

import pandas as pd
import pytest
from helpers import TokenCost, grid_rows, request_rows, table
from hypothesis import given, settings
from hypothesis import strategies as st

import simulator.replica as replica_module
from simulator.cluster import ClusterSpec, SimResult, simulate
from simulator.costs import LinearCost, RooflineCost
from simulator.costs.host import HostCost, Overhead
from simulator.policies import ContinuousPolicy, DynamicPolicy, StaticPolicy
from simulator.replica import Replica
from simulator.specs import get_hardware, get_model

COSTS = {
    "linear": LinearCost(step_s=0.003, prefill_token_s=1e-4, decode_seq_s=2e-4,
                         decode_context_s=1e-6, request_s=1e-4),
    "roofline": RooflineCost(get_model("tiny"), get_hardware("cpu"), weight_dtype="fp32"),
    "host": HostCost(LinearCost(step_s=0.002, decode_seq_s=3e-4), Overhead(seq_s=1e-5)),
    "no-pricer": TokenCost(step_s=0.003, prefill_token_s=1e-4, decode_seq_s=2e-4),
}
GRID_COST = LinearCost(step_s=0.25)  # every step 0.25 s: arrivals on the grid tie with step ends

requests = request_rows(max_output=60)
grid_requests = grid_rows()
policies = st.one_of(
    st.builds(StaticPolicy, batch_size=st.integers(1, 5)),
    st.builds(DynamicPolicy, max_batch_size=st.integers(1, 5), max_wait_s=st.floats(0, 0.5)),
    st.builds(ContinuousPolicy, max_num_seqs=st.integers(1, 6),
              max_num_batched_tokens=st.integers(8, 64), chunked_prefill=st.booleans(),
              padded_prefill=st.booleans(), long_prompt_alone=st.booleans(),
              num_scheduler_steps=st.sampled_from([1, 1, 3])),
)


def _same(a: SimResult, b: SimResult) -> None:
    pd.testing.assert_frame_equal(a.requests, b.requests, check_exact=True)
    pd.testing.assert_frame_equal(a.steps, b.steps, check_exact=True)


def _one_event_per_step(mp: pytest.MonkeyPatch) -> None:
    """Every step waits on its own SimPy event, as before several steps shared one."""
    mp.setattr(Replica, "_inline_before", lambda self: -math.inf)


@settings(max_examples=120, deadline=None)
@given(rows=requests, policy=policies, kv_blocks=st.integers(4, 40),
       block_size=st.integers(1, 6), replicas=st.integers(1, 2),
       cost=st.sampled_from(list(COSTS)), fast_forward=st.booleans(),
       horizon=st.sampled_from([None, 0.5, 1.7]), request_s=st.sampled_from([0.0, 0.01]))
def test_several_steps_per_event_match_one_event_per_step(  # type: ignore[no-untyped-def]
    rows, policy, kv_blocks, block_size, replicas, cost, fast_forward, horizon, request_s
) -> None:
    spec = ClusterSpec(policy, COSTS[cost], kv_blocks=kv_blocks, block_size=block_size,
                       num_replicas=replicas, check_invariants=True, request_s=request_s)
    fast = simulate(table(sorted(rows)), spec, fast_forward=fast_forward, horizon_s=horizon)
    with pytest.MonkeyPatch.context() as mp:
        _one_event_per_step(mp)
        slow = simulate(table(sorted(rows)), spec, fast_forward=fast_forward, horizon_s=horizon)
    _same(fast, slow)
    assert fast.num_events <= slow.num_events


@settings(max_examples=120, deadline=None)
@given(rows=requests, policy=policies, kv_blocks=st.integers(4, 40),
       block_size=st.integers(1, 6), cost=st.sampled_from(["linear", "roofline", "host"]),
       horizon=st.sampled_from([None, 1.7]))
def test_short_decode_runs_match_the_vectorised_plan(  # type: ignore[no-untyped-def]
    rows, policy, kv_blocks, block_size, cost, horizon
) -> None:
    spec = ClusterSpec(policy, COSTS[cost], kv_blocks=kv_blocks, block_size=block_size)
    results = []
    for short_run in (0, 10**9):  # never / always priced step by step
        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(replica_module, "_SHORT_RUN", short_run)
            results.append(simulate(table(sorted(rows)), spec, horizon_s=horizon))
    _same(*results)


@settings(max_examples=100, deadline=None)
@given(rows=requests, policy=policies, kv_blocks=st.integers(4, 40),
       cost=st.sampled_from(["linear", "roofline", "host"]))
def test_an_exact_pricer_makes_fast_forward_exact(  # type: ignore[no-untyped-def]
    rows, policy, kv_blocks, cost
) -> None:
    spec = ClusterSpec(policy, COSTS[cost], kv_blocks=kv_blocks, block_size=4)
    _same(simulate(table(sorted(rows)), spec),
          simulate(table(sorted(rows)), spec, fast_forward=False))


@settings(max_examples=100, deadline=None)
@given(rows=grid_requests, policy=policies, kv_blocks=st.integers(4, 40),
       fast_forward=st.booleans())
def test_arrivals_tied_with_step_ends_resolve_the_same_way(  # type: ignore[no-untyped-def]
    rows, policy, kv_blocks, fast_forward
) -> None:
    spec = ClusterSpec(policy, GRID_COST, kv_blocks=kv_blocks, block_size=4)
    fast = simulate(table(sorted(rows)), spec, fast_forward=fast_forward)
    with pytest.MonkeyPatch.context() as mp:
        _one_event_per_step(mp)
        slow = simulate(table(sorted(rows)), spec, fast_forward=fast_forward)
    _same(fast, slow)


def ahead_and_exact(rows: list[tuple[float, int, int]], spec: ClusterSpec,
                    fast_forward: bool) -> tuple[SimResult, SimResult]:
    """``rows`` simulated with replicas told the next arrival (stepping ahead), and with
    replicas told nothing, one exact SimPy event per step: the reference. (The old path's
    fast-forward waited ``env.timeout(end - now)``, which can miss ``end`` by an ulp, so
    the reference does not fast-forward.)"""
    ahead = simulate(table(sorted(rows)), spec, fast_forward=fast_forward)
    with pytest.MonkeyPatch.context() as mp:
        _arrivals_unknown(mp)
        exact = simulate(table(sorted(rows)), spec, fast_forward=False)
    return ahead, exact


def _arrivals_unknown(mp: pytest.MonkeyPatch) -> None:
    """Replicas not told the next arrival (the multi-replica path before issue 13's fleet
    slice; with fast-forward off, one exact SimPy event per step)."""
    init = Replica.__init__

    def blind(self, *args, **kwargs) -> None:  # type: ignore[no-untyped-def]
        kwargs["next_arrival_s"] = None
        init(self, *args, **kwargs)

    mp.setattr(Replica, "__init__", blind)


@settings(max_examples=120, deadline=None)
@given(rows=requests, policy=policies, kv_blocks=st.integers(4, 40),
       replicas=st.integers(2, 3),
       router=st.sampled_from(["round_robin", "least_outstanding", "shortest_queue"]),
       cost=st.sampled_from(["linear", "roofline", "host"]), fast_forward=st.booleans(),
       request_s=st.sampled_from([0.0, 0.01]))
@pytest.mark.pure_python
def test_replicas_stepping_to_the_next_arrival_match_one_event_per_step(  # type: ignore[no-untyped-def]
    rows, policy, kv_blocks, replicas, router, cost, fast_forward, request_s
) -> None:
    """No horizon here: a fast-forward run in progress at the horizon is not logged, while
    steps one by one log those that ended (test_several_steps_per_event_... covers horizons)."""
    spec = ClusterSpec(policy, COSTS[cost], kv_blocks=kv_blocks, block_size=4,
                       num_replicas=replicas, router=router, check_invariants=True,
                       request_s=request_s)
    fast, slow = ahead_and_exact(rows, spec, fast_forward)
    _same(fast, slow)
    assert fast.num_events <= slow.num_events


@settings(max_examples=60, deadline=None)
@given(rows=grid_requests, policy=policies, kv_blocks=st.integers(4, 40),
       router=st.sampled_from(["round_robin", "least_outstanding", "shortest_queue"]),
       fast_forward=st.booleans())
def test_replicas_resolve_arrivals_tied_with_step_ends_the_same_way(  # type: ignore[no-untyped-def]
    rows, policy, kv_blocks, router, fast_forward
) -> None:
    spec = ClusterSpec(policy, GRID_COST, kv_blocks=kv_blocks, block_size=4, num_replicas=2,
                       router=router)
    _same(*ahead_and_exact(rows, spec, fast_forward))


@pytest.mark.pure_python
def test_a_quiet_stretch_runs_in_one_event() -> None:
    """Two requests far apart: each one's steps (prefill, then decodes) take one SimPy event
    for the arrival and one for the replica's catch-up, however many steps run."""
    rows = [(0.0, 10, 50), (100.0, 10, 50)]
    spec = ClusterSpec(ContinuousPolicy(), COSTS["linear"], kv_blocks=64, block_size=4)
    res = simulate(table(rows), spec, fast_forward=False)
    assert len(res.steps) == 2 * 50  # one prefill and 49 decodes per request
    with pytest.MonkeyPatch.context() as mp:
        _one_event_per_step(mp)
        slow = simulate(table(rows), spec, fast_forward=False)
    _same(res, slow)
    assert slow.num_events >= 100 > res.num_events
