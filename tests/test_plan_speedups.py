"""The plan's speed-ups change how many points it simulates, never its answer (issue 13).

- the rate search stops once the replica count for the target is certain (sizing.py):
  checked against every outcome pattern the bisection could still see, and against the
  full search (``stop_when_sized=False``) on threshold worlds;
- a failing cluster check whose last replica got no request is replayed exactly by every
  larger cluster behind ``least_outstanding``/``shortest_queue`` (sizer.py), so the sizer
  goes straight to the last size: checked on the simulator itself;
- the whole plan against a plain reimplementation of the old algorithm (full bisection,
  then +1 replica per failed check) on a small real scenario, in the same run.
"""

from __future__ import annotations

import itertools
import math
import tomllib
from typing import Any

import numpy as np
import pandas as pd
import pytest
from helpers import tiny_plan_scenario

from simulator.capacity import SearchSettings, build_candidates, plan
from simulator.capacity import plan as plan_function
from simulator.capacity.search import (
    PROBE_RATE,
    REPLICAS_USED,
    RateSearch,
    at_rate,
    cluster_job,
    passes,
    sample_size,
    step_log_for,
    summary_job,
)
from simulator.capacity.sizing import highest_end, replicas_for, settled_replicas
from simulator.cluster import ClusterSpec, simulate
from simulator.costs.linear import LinearCost
from simulator.policies import make_policy
from simulator.slo import parse_slo_string

DISPATCH = __import__("simulator.capacity.dispatch", fromlist=["summary_job"])


# --- a world where feasibility is a known threshold -------------------------------------

class ThresholdWorld:
    """A fake ``summary_job``: the probe drains ``mu`` req/s; one replica passes at rates
    <= ``single``; a cluster of k passes when target / k <= ``cluster``. Counts calls."""

    def __init__(self, mu: float, single: float, cluster: float | None = None,
                 used: int | None = None) -> None:
        self.mu, self.single = mu, single
        self.cluster = single if cluster is None else cluster
        self.used = used  # replicas that get requests in a cluster check (None: all)
        self.calls: list[tuple[float, int]] = []

    def __call__(self, point: dict[str, Any]) -> dict[str, Any]:
        rate, k = point["workload"]["rate"], point["cluster"]["replicas"]
        self.calls.append((rate, k))
        if rate == PROBE_RATE:
            return {"request_throughput": self.mu, "slo": {}}
        limit = self.single if k == 1 else self.cluster
        ok = rate / k <= limit
        value = 50.0 if ok else 150.0
        return {"request_throughput": rate, "num_rejected": 0, "num_in_flight": 0,
                "p99_ttft_ms": value, "output_throughput": 100.0 * rate,
                "slo": {"p99_ttft_ms": {"target": 100.0, "value": value, "met": ok}},
                REPLICAS_USED: k if self.used is None else min(k, self.used)}

    def cluster_job(self, item: tuple[dict[str, Any], list[int]],
                    ) -> tuple[dict[str, Any], dict[int, dict[str, Any]]]:
        """A fake ``search.cluster_job``: larger clusters fail alike, and are not counted."""
        point, larger = item
        out = self(point)
        if out[REPLICAS_USED] >= point["cluster"]["replicas"]:
            return out, {}
        return out, {k: {**out, "request_throughput": -k} for k in larger}


def _fake_plan(world: ThresholdWorld, target: float, monkeypatch: pytest.MonkeyPatch,
               router: str = "least_outstanding", **settings: Any) -> Any:
    monkeypatch.setattr(DISPATCH, "summary_job", world)  # serial: runs in this process
    monkeypatch.setattr(DISPATCH, "verdict_job", world)  # a world's verdicts are whole runs
    monkeypatch.setattr(DISPATCH, "bounded_job", lambda item: world(item[0]))
    monkeypatch.setattr(DISPATCH, "cluster_job", world.cluster_job)
    raw = {"name": "fake", "model": {"name": "llama-3.1-8b"}, "hardware": {"gpu": "h100-sxm"},
           "cluster": {"router": router},
           "workload": {"arrival": "poisson", "rate": 1.0}}
    (cand,) = build_candidates(raw)
    result = plan_function([cand], target, parse_slo_string("ttft_p99_ms=100"),
                           settings=SearchSettings(min_requests=100, min_tail=1, **settings))
    return result.ranked[0]


def test_hand_computed_case_needs_fewer_simulations_for_the_same_answer(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # mu = 10, so the bracket is [10/64, 12.5]; one replica passes up to 6 req/s, a
    # cluster up to 5 req/s a replica; target 40 req/s. Bisection midpoints:
    #   6.328125 fail, 3.2421875 pass (40/3.24 -> 13 replicas), 4.78515625 pass (9),
    #   5.556640625 pass (8), 5.9423828125 pass (7). Now even if every later midpoint
    #   passed the search would end below 6.328125, and 40/6.33 -> 7 too: settled.
    # The full search goes on: 6.13525390625 fail, 6.038818359375 fail, then
    #   hi - lo = 0.0964 <= 2% of 5.94: stop, lo = 5.94 -> 7 replicas (the same).
    # Cluster checks: 7 replicas carry 5.71 > 5 each: fail; 8 carry 5.0: pass.
    new = _fake_plan(ThresholdWorld(10.0, 6.0, 5.0), 40.0, monkeypatch)
    old = _fake_plan(ThresholdWorld(10.0, 6.0, 5.0), 40.0, monkeypatch, stop_when_sized=False)
    assert (new.replicas, new.status, new.usd_per_hour) == (old.replicas, old.status,
                                                            old.usd_per_hour) == (
        8, "meets_slo", pytest.approx(8 * 2.99))
    # probe + low rate + 5 midpoints + 2 cluster checks; the full search: 7 midpoints
    assert (new.simulations, old.simulations) == (9, 11)
    assert new.max_rate_rps == pytest.approx(5.9423828125)
    assert old.max_rate_rps == pytest.approx(5.9423828125)  # both ended on the same lo here


@pytest.mark.parametrize("single", [0.3, 1.0, 2.5, 4.0, 6.0, 7.3, 9.9, 12.0])
@pytest.mark.parametrize("target", [1.0, 7.0, 40.0, 333.0])
def test_stopping_when_sized_gives_the_full_searchs_count(
        single: float, target: float, monkeypatch: pytest.MonkeyPatch) -> None:
    a = _fake_plan(ThresholdWorld(10.0, single), target, monkeypatch)
    b = _fake_plan(ThresholdWorld(10.0, single), target, monkeypatch, stop_when_sized=False)
    assert (a.status, a.replicas, a.usd_per_hour) == (b.status, b.replicas, b.usd_per_hour)
    assert a.simulations <= b.simulations
    assert a.max_rate_rps <= b.max_rate_rps  # a coarser lower bound, never above


def _ends(search: RateSearch, settings: SearchSettings) -> list[float]:
    """Every lo the search can end at, over every pattern of outcomes (brute force)."""
    rate = search.copy().next_rate(settings)
    if rate is None:
        return [search.lo]
    out = []
    for ok in (True, False):
        branch = search.copy()
        assert branch.next_rate(settings) == rate
        branch.take(rate, ok)
        out += _ends(branch, settings)
    return out


def test_the_bracket_holds_over_every_outcome_pattern() -> None:
    settings = SearchSettings(max_iterations=6)
    targets = [3.0, 10.0, 40.0, 97.0]
    checked = settled = 0
    for lo_frac, pattern in itertools.product((1 / 64, 1 / 8, 0.5), range(8)):
        s = RateSearch(mu=10.0, hi=12.5, lo=10.0 * lo_frac, trace=[(10.0 * lo_frac, True)])
        for ok in ((pattern >> b) & 1 == 1 for b in range(3)):  # play 3 steps
            rate = s.next_rate(settings)
            if rate is None:
                break
            s.take(rate, ok)
        if s.done:
            continue
        ends = _ends(s, settings)
        assert max(ends) == highest_end(s, settings) and min(ends) >= s.lo
        for target in targets:
            counts = {replicas_for(target, e) for e in ends}
            got = settled_replicas(s, target, settings)
            checked += 1
            if got is not None:
                settled += 1
                assert counts == {got}
            else:  # not settled: the full search could still end on two counts
                assert len(counts) > 1
    assert checked > 50 and 0 < settled < checked


# --- larger clusters replay a check whose last replica got nothing ---------------------

def _light_load(n: int = 300, seed: int = 5) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    return pd.DataFrame({
        "request_id": np.arange(n), "arrival_s": np.cumsum(rng.exponential(0.05, n)),
        "prompt_tokens": rng.integers(16, 200, n), "output_tokens": rng.integers(2, 60, n)})


@pytest.mark.parametrize("router", ["least_outstanding", "shortest_queue"])
@pytest.mark.parametrize("policy, knobs", [("continuous", {}), ("chunked", {}), ("dynamic", {}),
                                           ("static", {"batch_size": 1})])
def test_an_unused_replica_stays_unused_in_larger_clusters(router: str, policy: str,
                                                           knobs: dict[str, Any]) -> None:
    # (a static batch waits to fill, holding requests on every replica: it spreads to all)
    table = _light_load()
    cost = LinearCost(step_s=0.004, decode_seq_s=0.0002, prefill_token_s=0.00002)

    def run(k: int) -> Any:
        spec = ClusterSpec(make_policy(policy, **knobs), cost, kv_blocks=4000, num_replicas=k,
                           router=router)
        return simulate(table, spec)

    k = int(run(64).requests["replica"].max()) + 2
    base = run(k)
    assert int(base.requests["replica"].max()) + 1 < k  # the premise: the last one idles
    for more in (k + 1, k + 4):
        other = run(more)
        pd.testing.assert_frame_equal(other.requests, base.requests)
        pd.testing.assert_frame_equal(other.steps, base.steps)


def test_replayed_checks_are_skipped_only_behind_lowest_idle_routers_and_equal_sizes(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # Every cluster check fails and only 2 replicas ever get requests; one replica passes
    # up to 6 req/s, so 7 replicas are estimated for 40 req/s, and 11 is the last tried.
    def checked(router: str, **settings: Any) -> tuple[list[int], Any]:
        world = ThresholdWorld(10.0, 6.0, cluster=0.5, used=2)
        result = _fake_plan(world, 40.0, monkeypatch, router=router, **settings)
        return [k for _, k in world.calls if k > 1], result

    # n = 100 requests a replica; capped at 100, every check simulates the same requests:
    # 8-11 would replay 7, and 11's summary (the one reported) is 7's run over 11 replicas
    capped, lo = checked("least_outstanding", max_cluster_requests=100)
    assert capped == [7] and lo.status == "misses_slo" and lo.replicas == 11
    # probe, low rate, 5 midpoints (the hand-computed case above), 7, 11 (replayed)
    assert lo.at_target["request_throughput"] == -11 and lo.simulations == 9
    # round_robin spreads over every replica: never skipped
    rr_calls, rr = checked("round_robin", max_cluster_requests=100)
    assert rr_calls == [7, 8, 9, 10, 11]
    assert (rr.status, rr.replicas, rr.reason) == (lo.status, lo.replicas, lo.reason)
    # 700, 800, ... 1,100 requests: different requests, so no check replays another
    assert checked("least_outstanding")[0] == [7, 8, 9, 10, 11]
    # capped at 900: 9, 10 and 11 draw the same 900 requests, 7 and 8 fewer
    assert checked("least_outstanding", max_cluster_requests=900)[0] == [7, 8, 9]


@pytest.mark.parametrize("step_log", ["summary", "full"])
def test_a_replayed_checks_summary_is_the_larger_clusters_own(step_log: str) -> None:
    raw = tomllib.loads(TINY)
    raw["hardware"]["gpu"], raw["policy"]["name"] = "h100-sxm", "continuous"
    (cand,) = build_candidates(raw)
    slo = parse_slo_string("ttft_p99_ms=60")
    point = {**cand.point, "slo": slo.as_dict(), "run": {"step_log": step_log}}
    out, larger = cluster_job((at_rate(point, 40.0, 600, 40), [44, 47]))
    assert out[REPLICAS_USED] < 40 and sorted(larger) == [44, 47]  # the premise holds
    for k, derived in larger.items():
        assert derived == summary_job(at_rate(point, 40.0, 600, k))
    assert larger[44]["utilisation"] != out["utilisation"]  # it counts every replica


# --- the whole plan against the old algorithm, on a small real scenario -----------------

TINY = tiny_plan_scenario("tiny-speedups", 2)


def _old_algorithm(point: dict[str, Any], target: float, slo: Any,
                   settings: SearchSettings) -> tuple[int | None, dict[str, Any], int]:
    """The plan before issue 13, for one candidate: bisect to rel_tol, then one more
    replica per failed cluster check. Returns (replicas, last cluster summary, points)."""
    n, sims = sample_size(slo, settings), 0
    search = RateSearch()
    while (rate := search.next_rate(settings)) is not None:
        size = settings.min_requests if rate == PROBE_RATE else n
        search.record(rate, summary_job(at_rate(point, rate, size,
                                                step_log=step_log_for(slo, False))), settings)
        sims += 1
    if search.lo == 0:
        return None, {}, sims
    first = math.ceil(target / search.lo - 1e-9)
    for k in range(first, first + settings.max_extra_replicas + 1):
        summary = summary_job(at_rate(point, target, min(settings.max_cluster_requests,
                                                         n * k), k,
                                      step_log=step_log_for(slo, True)))
        sims += 1
        if passes(summary):
            break
    return k, summary, sims


@pytest.mark.parametrize("target, slo_text", [(150.0, "ttft_p99_ms=60"),
                                              (420.0, "ttft_p99_ms=40,tpot_p99_ms=9")])
def test_plan_gives_the_old_algorithms_answer(target: float, slo_text: str) -> None:
    raw = tomllib.loads(TINY)
    slo = parse_slo_string(slo_text)
    settings = SearchSettings(min_requests=400, min_tail=4)
    cands = build_candidates(raw)
    result = plan(cands, target, slo, settings=settings)
    by_name = {r.name: r for r in result.ranked}
    fewer = 0
    for cand in cands:
        replicas, at_target, sims = _old_algorithm({**cand.point, "slo": slo.as_dict()},
                                                   target, slo, settings)
        got = by_name[cand.name]
        assert got.replicas == replicas, cand.name
        assert got.at_target == {k: v for k, v in at_target.items() if k != REPLICAS_USED}
        assert got.simulations <= sims
        fewer += sims - got.simulations
    assert result.best is not None and fewer > 0
