"""The fleet features keep the replicas' speed path exact (issue 15's speed target).

Replicas of an open loop run their steps up to the fleet's next arrival on their own
clocks and let a decode run go on until a request reaches them (simulator/replica_runs.py),
also behind ``least_outstanding_tokens``, the front door and an autoscaler: the router's
token counts and the autoscaler's KV reading are taken as of the arrival or evaluation
inside a run (simulator/fleet/tokens.py), evaluations cut the steps run ahead as arrivals
do, and a draining replica waits on SimPy for each step. Against replicas told nothing
ahead, one SimPy event per step: the same records, step log and fleet timeline.

Small random workloads, every policy, 1 to 3 replicas, every router that needs no prefix
cache, random admission and autoscaler settings; and a time grid where arrivals and
evaluations tie with step ends.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from helpers import grid_rows, request_rows, table
from hypothesis import given, settings
from hypothesis import strategies as st
from test_speed_paths_replica import COSTS, GRID_COST, _arrivals_unknown, ahead_and_exact, policies

from simulator.cluster import ClusterSpec, SimResult, simulate
from simulator.fleet.sections import AdmissionSection, AutoscaleSection
from simulator.policies import ContinuousPolicy, StaticPolicy

ROUTERS = ["round_robin", "least_outstanding", "shortest_queue", "least_outstanding_tokens"]

requests = request_rows(max_output=60, max_size=30)
grid_requests = grid_rows()
admissions = st.one_of(
    st.none(),
    st.builds(AdmissionSection, rate_limit=st.sampled_from([None, 4.0, 12.0]),
              burst=st.integers(1, 4), max_queue=st.sampled_from([None, 1, 3]),
              queue_scope=st.sampled_from(["replica", "fleet"])),
)


@st.composite
def autoscalers(draw: st.DrawFn, interval: st.SearchStrategy[float]) -> AutoscaleSection | None:
    if draw(st.booleans()):
        return None
    signal = draw(st.sampled_from(["kv", "queue", "ttft"]))
    up, down = {"kv": (0.2, 0.05), "queue": (1.0, 0.5), "ttft": (100.0, 20.0)}[signal]
    return AutoscaleSection(min_replicas=1, max_replicas=3, signal=signal, scale_up_above=up,
                            scale_down_below=down, down_hold_s=draw(st.sampled_from([0.0, 0.3])),
                            interval_s=draw(interval),
                            cold_start_s=draw(st.sampled_from([0.0, 0.2, 0.5])),
                            window_s=0.5)


def _same(a: SimResult, b: SimResult) -> None:
    pd.testing.assert_frame_equal(a.requests, b.requests, check_exact=True)
    pd.testing.assert_frame_equal(a.steps, b.steps, check_exact=True)
    if a.fleet is None or b.fleet is None:
        assert a.fleet is None and b.fleet is None
    else:  # the same replicas at the same times, billed alike
        assert a.fleet.timeline == b.fleet.timeline
        assert a.fleet.end_s == b.fleet.end_s
        assert a.fleet.replica_seconds == b.fleet.replica_seconds


def _spec(policy, cost, kv_blocks, replicas, router, admission, autoscale,  # type: ignore[no-untyped-def]
          **kw) -> ClusterSpec:
    if autoscale is not None:
        replicas = min(replicas, autoscale.max_replicas)
    return ClusterSpec(policy, cost, kv_blocks=kv_blocks, block_size=4, num_replicas=replicas,
                       router=router, admission=admission, autoscale=autoscale, **kw)


@settings(max_examples=150, deadline=None)
@given(rows=requests, policy=policies, kv_blocks=st.integers(4, 40),
       replicas=st.integers(1, 3), router=st.sampled_from(ROUTERS),
       cost=st.sampled_from(["linear", "roofline", "host"]), fast_forward=st.booleans(),
       request_s=st.sampled_from([0.0, 0.01]), admission=admissions,
       autoscale=autoscalers(st.sampled_from([0.1, 0.25, 0.4])))
@pytest.mark.pure_python
def test_fleet_replicas_stepping_ahead_match_one_event_per_step(  # type: ignore[no-untyped-def]
    rows, policy, kv_blocks, replicas, router, cost, fast_forward, request_s, admission,
    autoscale
) -> None:
    spec = _spec(policy, COSTS[cost], kv_blocks, replicas, router, admission, autoscale,
                 check_invariants=True, request_s=request_s)
    fast, slow = ahead_and_exact(rows, spec, fast_forward)
    _same(fast, slow)
    assert fast.num_events <= slow.num_events


@settings(max_examples=80, deadline=None)
@given(rows=grid_requests, policy=policies, kv_blocks=st.integers(4, 40),
       replicas=st.integers(1, 3), router=st.sampled_from(ROUTERS), admission=admissions,
       autoscale=autoscalers(st.sampled_from([0.25, 0.5, 1.0])), fast_forward=st.booleans())
def test_fleet_ties_with_step_ends_resolve_the_same_way(  # type: ignore[no-untyped-def]
    rows, policy, kv_blocks, replicas, router, admission, autoscale, fast_forward
) -> None:
    """Steps of 0.25 s, arrivals on a 0.125 s grid, evaluations every 0.25 to 1 s: an
    arrival or evaluation at a step's end runs first, whichever path ran the step."""
    spec = _spec(policy, GRID_COST, kv_blocks, replicas, router, admission, autoscale)
    fast, slow = ahead_and_exact(rows, spec, fast_forward)
    _same(fast, slow)


@pytest.mark.pure_python
def test_the_fleet_path_waits_on_fewer_events() -> None:
    """Behind least_outstanding_tokens with an autoscaler on KV, the replicas run most
    steps ahead: far fewer SimPy events than one per step, the same results."""
    rows = [(0.05 * i, 20, 40) for i in range(40)]
    spec = _spec(ContinuousPolicy(), COSTS["linear"], 64, 2,
                 "least_outstanding_tokens", None,
                 AutoscaleSection(min_replicas=1, max_replicas=3, signal="kv",
                                  scale_up_above=0.5, scale_down_below=0.1, interval_s=0.5,
                                  cold_start_s=0.2, down_hold_s=0.5))
    fast = simulate(table(rows), spec)
    with pytest.MonkeyPatch.context() as mp:
        _arrivals_unknown(mp)
        slow = simulate(table(rows), spec, fast_forward=False)
    _same(fast, slow)
    assert len(fast.steps) > 2 * len(rows)  # every request's prefill and decodes
    assert fast.num_events < slow.num_events / 2


SCALE = {  # thresholds that scale a 40-request, 2-second burst up and down again
    "kv": AutoscaleSection(min_replicas=1, max_replicas=3, signal="kv", scale_up_above=0.3,
                           scale_down_below=0.1, down_hold_s=0.2, interval_s=0.1,
                           cold_start_s=0.15),
    "queue": AutoscaleSection(min_replicas=1, max_replicas=3, signal="queue",
                              scale_up_above=1.0, scale_down_below=0.5, down_hold_s=0.2,
                              interval_s=0.1, cold_start_s=0.15),
    "ttft": AutoscaleSection(min_replicas=1, max_replicas=3, signal="ttft",
                             scale_up_above=60.0, scale_down_below=20.0, down_hold_s=0.2,
                             interval_s=0.1, cold_start_s=0.15, window_s=0.3),
}
POLICIES = {
    "continuous": lambda: ContinuousPolicy(max_num_seqs=8, max_num_batched_tokens=64),
    "chunked": lambda: ContinuousPolicy(max_num_seqs=8, max_num_batched_tokens=32,
                                        chunked_prefill=True),
    "static": lambda: StaticPolicy(batch_size=3),
}


@pytest.mark.parametrize("policy", list(POLICIES))
@pytest.mark.parametrize("fleet", ["plain", "admission", "kv", "queue", "ttft"])
@pytest.mark.parametrize("router", ROUTERS)
def test_fleet_paths_match_on_random_traffic(router: str, fleet: str, policy: str) -> None:
    """Numpy-drawn traffic (hypothesis favours simple floats and short lists): 40 requests
    over 2 s into 2 replicas, for each router, fleet feature and policy."""
    rng = np.random.default_rng(sorted(ROUTERS).index(router) * 100 + len(fleet + policy))
    n = 40
    rows = sorted(zip(rng.uniform(0, 2, n).tolist(), rng.integers(1, 40, n).tolist(),
                      rng.integers(1, 60, n).tolist(), strict=True))
    admission = (AdmissionSection(rate_limit=15.0, burst=3, max_queue=4)
                 if fleet == "admission" else None)
    spec = _spec(POLICIES[policy](), COSTS["linear"], 40, 2, router, admission,
                 SCALE.get(fleet), check_invariants=True)
    fast = simulate(table(rows), spec)
    with pytest.MonkeyPatch.context() as mp:
        _arrivals_unknown(mp)
        slow = simulate(table(rows), spec, fast_forward=False)
    _same(fast, slow)
    if fleet in SCALE:
        assert fast.fleet is not None and len(fast.fleet.timeline) > 1  # it scaled


@pytest.mark.parametrize("fast_forward", [True, False])
@pytest.mark.parametrize("known", [True, False])
def test_an_evaluation_at_a_finish_does_not_see_it(fast_forward: bool, known: bool) -> None:
    """Steps of 0.25 s; requests 0 (9 tokens) and 1 (40) arrive at 0 with 1-token prompts:
    prefill 0-0.25 (TTFT 250 ms each), then one decode run to request 0's finish at 2.25.
    The evaluation at 2.25 runs first among that instant's events, so the window is still
    empty (no value); at 2.5 it holds 250 ms > 100 and a replica starts (no cold start).
    The run's end waits on one event scheduled at 0.25: without URGENT evaluations it
    would come first and the replica would start at 2.25."""
    scale = AutoscaleSection(min_replicas=1, max_replicas=2, signal="ttft",
                             scale_up_above=100.0, scale_down_below=0.0, interval_s=0.25,
                             cold_start_s=0.0, window_s=10.0)
    spec = _spec(ContinuousPolicy(), GRID_COST, 40, 1, "round_robin", None, scale)
    with pytest.MonkeyPatch.context() as mp:
        if not known:
            _arrivals_unknown(mp)
        res = simulate(table([(0.0, 1, 9), (0.0, 1, 40)]), spec, fast_forward=fast_forward)
    assert res.requests["finish_s"].tolist() == [2.25, 10.0]
    assert res.fleet is not None and res.fleet.timeline == [(0, 1, 1), (2.5, 2, 2)]
