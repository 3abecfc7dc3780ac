"""The autoscaler by hand: when replicas start, serve, drain and leave, and what they cost."""

from __future__ import annotations

import pytest
from helpers import TokenCost, table

from simulator.cluster import ClusterSpec, SimResult, simulate
from simulator.errors import ConfigError
from simulator.fleet.sections import AutoscaleSection
from simulator.fleet.summary import fleet_summary
from simulator.policies import ContinuousPolicy
from simulator.scenario_types import Scenario

UNIT = TokenCost(step_s=1.0)  # every step takes 1 s


def _run(rows: list[tuple[float, int, int]], scale: AutoscaleSection, replicas: int = 1,
         router: str = "least_outstanding") -> SimResult:
    spec = ClusterSpec(ContinuousPolicy(max_num_seqs=1), UNIT, kv_blocks=100,
                       num_replicas=replicas, router=router, autoscale=scale)
    return simulate(table(rows), spec)


def test_a_step_in_load_starts_a_replica_that_serves_after_its_cold_start() -> None:
    # One request at a time, 1 s each (prompt 4, output 1). Every 2 s until 20 (queue 0),
    # then 4/s from 20.1 (80 requests, to 39.85). Evaluations every 5 s: at 20 nothing
    # waits; at 25 requests 20.1..24.85 (20) have arrived and 5 started (20.1, 21.1, ...,
    # 24.1): 15 wait > 2, so a replica starts at 25, billed from 25, serving at 25 + 10.
    # The first request it gets is the first to arrive after 35: 20.1 + 60/4 = 35.1.
    rows = [(2.0 * i, 4, 1) for i in range(10)] + [(20.1 + k / 4, 4, 1) for k in range(80)]
    scale = AutoscaleSection(min_replicas=1, max_replicas=2, scale_up_above=2.0,
                             scale_down_below=0.5, down_hold_s=1000.0, interval_s=5.0,
                             cold_start_s=10.0)
    res = _run(rows, scale)
    req = res.requests
    on_new = req[req["replica"] == 1]
    assert on_new["arrival_s"].min() == pytest.approx(35.1)
    assert (req.loc[req["arrival_s"] >= 35.1, "replica"] == 1).any()
    assert res.fleet is not None
    assert res.fleet.timeline[:3] == [(0.0, 1, 1), (25.0, 2, 1), (35.0, 2, 2)]
    assert res.num_replicas == 2 and res.fleet.peak_replicas == 2
    # billing: replica 0 from 0 and replica 1 from 25, both to the last finish
    end = float(req["finish_s"].max())
    assert res.fleet.end_s == end
    assert res.fleet.replica_seconds == pytest.approx(end + (end - 25.0))


def test_a_replica_drained_after_the_hold_leaves_when_its_last_request_is_done() -> None:
    # Two replicas, round robin: r0 (output 20) on replica 0 runs 0-20, r1 (output 10) on
    # replica 1 runs 0-10. Nothing waits: the signal is 0 from the first evaluation (2 s),
    # so after the 3 s hold the evaluation at 6 drains one; both have one request, so the
    # newest (replica 1) goes. r2 at 7 goes to replica 0 (the only one serving) and runs
    # 20-21. Replica 1 leaves at 10, its request's finish.
    rows = [(0.0, 4, 20), (0.0, 4, 10), (7.0, 4, 1)]
    scale = AutoscaleSection(min_replicas=1, max_replicas=2, scale_up_above=5.0,
                             scale_down_below=0.5, down_hold_s=3.0, interval_s=2.0,
                             cold_start_s=5.0)
    res = _run(rows, scale, replicas=2, router="round_robin")
    assert res.requests["replica"].tolist() == [0, 1, 0]
    assert res.requests["finish_s"].tolist() == [20.0, 10.0, 21.0]
    assert res.fleet is not None
    assert res.fleet.timeline == [(0.0, 2, 2), (6.0, 2, 1), (10.0, 1, 1)]
    # cost by hand: replica 0 billed 0-21, replica 1 0-10: 31 replica-seconds over 21 s
    assert res.fleet.replica_seconds == 31.0 and res.fleet.end_s == 21.0
    assert res.fleet.mean_replicas == pytest.approx(31.0 / 21.0)
    s = fleet_summary(res.fleet, tp=2, usd_per_gpu_hour=3.0)
    assert s["cost_usd"] == pytest.approx(31.0 / 3600.0 * 2 * 3.0)
    assert s["replica_timeline"] == [[0.0, 2, 2], [6.0, 2, 1], [10.0, 1, 1]]


def test_an_idle_replica_is_drained_first_and_leaves_at_once() -> None:
    # r0 (output 8) -> replica 0 (0-8), r1 (output 1) -> replica 1 (0-1). At the drain (6)
    # replica 1 has nothing: it is the one drained (fewest requests) and leaves at 6.
    rows = [(0.0, 4, 8), (0.0, 4, 1)]
    scale = AutoscaleSection(min_replicas=1, max_replicas=2, scale_up_above=5.0,
                             scale_down_below=0.5, down_hold_s=3.0, interval_s=2.0)
    res = _run(rows, scale, replicas=2, router="round_robin")
    assert res.fleet is not None
    assert res.fleet.timeline == [(0.0, 2, 2), (6.0, 1, 1)]
    assert res.fleet.replica_seconds == 8.0 + 6.0


def test_without_an_autoscaler_nothing_is_billed_or_changed() -> None:
    rows = [(0.0, 4, 3), (0.5, 4, 2)]
    spec = ClusterSpec(ContinuousPolicy(), UNIT, kv_blocks=100, num_replicas=2)
    off = ClusterSpec(ContinuousPolicy(), UNIT, kv_blocks=100, num_replicas=2,
                      autoscale=AutoscaleSection(enabled=False))
    a, b = simulate(table(rows), spec), simulate(table(rows), off)
    assert a.fleet is None and b.fleet is None
    assert a.requests.equals(b.requests)


def test_the_autoscale_section_is_checked() -> None:
    with pytest.raises(ConfigError, match=r"autoscale.min_replicas = 3: must be <= "):
        Scenario.from_dict({"autoscale": {"min_replicas": 3, "max_replicas": 2}})
    with pytest.raises(ConfigError, match=r"cluster.replicas = 5: with \[autoscale\]"):
        Scenario.from_dict({"cluster": {"replicas": 5}, "autoscale": {"max_replicas": 4}})
    with pytest.raises(ConfigError, match=r"autoscale.signal = 'gpu'"):
        Scenario.from_dict({"autoscale": {"signal": "gpu"}})
    assert not Scenario.from_dict({}).autoscale.enabled
    assert Scenario.from_dict({"autoscale": {}}).autoscale.enabled


@pytest.mark.parametrize(("above_ms", "timeline"), [
    (2900.0, [(0.0, 1, 1), (5.5, 2, 1)]),
    (3100.0, [(0.0, 1, 1)]),
])
def test_the_ttft_signal_is_a_percentile_over_the_window(above_ms: float,
                                                         timeline: list) -> None:
    # six requests at 0, one at a time, 1 s each: TTFTs 1..6 s, finished at 1..6. At the
    # evaluation at 5.5 five have finished in the 5.5 s window: median TTFT 3000 ms. The
    # sixth finishes at 6, after which nothing is decided (every request is done).
    scale = AutoscaleSection(min_replicas=1, max_replicas=2, signal="ttft", percentile=50.0,
                             window_s=5.5, interval_s=5.5, scale_up_above=above_ms,
                             scale_down_below=0.0, cold_start_s=100.0)
    res = _run([(0.0, 4, 1)] * 6, scale)
    assert res.fleet is not None
    assert res.fleet.timeline == timeline
    # billing ends with the last request (6 s): a replica started at 5.5 costs 0.5 s
    assert res.fleet.replica_seconds == 6.0 + (0.5 if len(timeline) > 1 else 0.0)


@pytest.mark.parametrize("fast_forward", [True, False])
def test_kv_usage_inside_a_decode_run_is_what_stepping_shows(fast_forward: bool) -> None:
    # prompt 4, output 40, 16-token blocks: the prefill (0-1) caches 4 tokens (1 block);
    # decode step i runs i..i+1 and caches token 4 + i, so step 13 (13-14) writes the 17th
    # token and opens block 2. During it (13.5) the replica holds 2 blocks, stepping or not.
    import simpy

    from simulator.fleet.tokens import TokenReplica
    from simulator.kvcache import BlockManager
    from simulator.policies import Sequence

    env = simpy.Environment()
    r = TokenReplica(env, 0, ContinuousPolicy(), UNIT, BlockManager(100, 16),
                     on_done=lambda seq: None, track_kv=True, fast_forward=fast_forward)
    r.submit(Sequence(0, 0.0, 4, 40))
    env.run(until=12.5)
    assert r.kv_used_now() == 1
    env.run(until=13.5)
    assert r.kv_used_now() == 2
    assert r.state.kv.used == (1 if fast_forward else 2)  # a run applies its blocks at its end


@pytest.mark.parametrize("signal", ["kv", "queue", "ttft"])
def test_fast_forward_does_not_change_the_autoscaler(signal: str) -> None:
    import numpy as np
    import pandas as pd

    rng = np.random.default_rng(5)
    gaps = np.concatenate([rng.exponential(0.5, 100), rng.exponential(0.05, 500),
                           rng.exponential(0.5, 100)])
    n = len(gaps)
    t = pd.DataFrame({"request_id": np.arange(n), "arrival_s": np.cumsum(gaps),
                      "prompt_tokens": rng.integers(10, 400, n),
                      "output_tokens": rng.integers(5, 120, n)})
    up, down = {"kv": (0.3, 0.1), "queue": (2.0, 0.5), "ttft": (300.0, 50.0)}[signal]
    scale = AutoscaleSection(min_replicas=1, max_replicas=6, signal=signal, scale_up_above=up,
                             scale_down_below=down, down_hold_s=20, interval_s=5,
                             cold_start_s=10)
    spec = ClusterSpec(ContinuousPolicy(max_num_seqs=32), TokenCost(0.01, 1e-4, 1e-3),
                       kv_blocks=300, router="least_outstanding_tokens", autoscale=scale)
    fast, slow = simulate(t, spec, fast_forward=True), simulate(t, spec, fast_forward=False)
    assert fast.fleet is not None and slow.fleet is not None
    assert fast.fleet.timeline == slow.fleet.timeline
    assert len(fast.fleet.timeline) > 3  # it did scale
    assert fast.requests.equals(slow.requests)
