"""The prefix_affinity router: a request goes where its prompt's prefix is cached, within
a load bound, and it needs prefix caching on (hand cases on two replicas)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from helpers import TokenCost

from simulator.cluster import ClusterSpec, SimResult, simulate
from simulator.costs.linear import LinearCost
from simulator.errors import ConfigError
from simulator.policies import ContinuousPolicy
from simulator.router import AFFINITY_SLACK
from simulator.runner import run_point
from simulator.workload.prefixes import PrefixSegments, from_lists

COST = TokenCost(step_s=0.01, prefill_token_s=1e-4, decode_seq_s=1e-3)
SHARED = (7, 64)  # segment 7: a 64-token system prompt (4 blocks of 16)


def _table(arrivals: list[float], shared: list[bool]) -> tuple[pd.DataFrame, PrefixSegments]:
    segments, start, stop = from_lists([[SHARED] if s else [] for s in shared])
    n = len(arrivals)
    return pd.DataFrame({
        "request_id": np.arange(n), "arrival_s": arrivals,
        "prompt_tokens": [SHARED[1] + 20 if s else 40 for s in shared],
        "output_tokens": [3] * n, "segments_start": start, "segments_stop": stop,
    }), segments


def _run(router: str, arrivals: list[float], shared: list[bool]) -> pd.DataFrame:
    table, segments = _table(arrivals, shared)
    spec = ClusterSpec(ContinuousPolicy(), COST, kv_blocks=200, block_size=16, num_replicas=2,
                       router=router, prefix_caching=True, check_invariants=True)
    return simulate(table, spec, segments=segments).requests.sort_values("request_id")


def test_a_request_follows_its_cached_prefix_where_least_outstanding_would_miss() -> None:
    # r0 (shared) at 0 -> replica 0 (tie: lowest index), which caches the system prompt at
    # its first step; r1 and r2 (own prompts) at 0.001 and 0.0015 -> replicas 1 and 0 (no
    # cache to follow: least loaded, then lowest index). r3 (shared) at 0.002 finds replica
    # 0 with 2 outstanding and replica 1 with 1: least_outstanding sends it to the cold
    # replica 1; prefix_affinity to replica 0 (within the load bound), a 64-token hit.
    arrivals, shared = [0.0, 0.001, 0.0015, 0.002], [True, False, False, True]
    affinity = _run("prefix_affinity", arrivals, shared)
    assert affinity["replica"].tolist() == [0, 1, 0, 0]
    assert affinity["cached_tokens"].tolist() == [0, 0, 0, 64]
    least = _run("least_outstanding", arrivals, shared)
    assert least["replica"].tolist() == [0, 1, 0, 1]
    assert least["cached_tokens"].tolist() == [0, 0, 0, 0]
    rr = _run("round_robin", [0.0, 0.002], [True, True])
    aff = _run("prefix_affinity", [0.0, 0.002], [True, True])
    assert rr["replica"].tolist() == [0, 1] and rr["cached_tokens"].tolist() == [0, 0]
    assert aff["replica"].tolist() == [0, 0] and aff["cached_tokens"].tolist() == [0, 64]


def test_the_load_bound_sends_a_warm_request_to_the_least_loaded_replica() -> None:
    # r0 (shared) at 0 -> replica 0, whose first step caches the system prompt. At 0.001 a
    # burst of AFFINITY_SLACK + 1 shared requests: the j-th finds replica 0 warm with 1 + j
    # outstanding against replica 1's 0, so it stays within the bound (0 + SLACK) while
    # 1 + j <= SLACK: SLACK of them go to replica 0 (each a 64-token hit), the last to
    # replica 1, cold.
    n = AFFINITY_SLACK + 2
    recs = _run("prefix_affinity", [0.0] + [0.001] * (n - 1), [True] * n)
    assert recs["replica"].tolist() == [0] * (AFFINITY_SLACK + 1) + [1]
    assert recs["cached_tokens"].tolist() == [0] + [64] * AFFINITY_SLACK + [0]


def test_prefix_affinity_needs_prefix_caching() -> None:
    point = {"name": "x", "model": {"name": "llama-3.1-8b"}, "hardware": {"gpu": "h100-sxm"},
             "cluster": {"replicas": 2, "router": "prefix_affinity"},
             "workload": {"num_requests": 10, "rate": 1.0}}
    with pytest.raises(ConfigError, match="kv.prefix_caching = true"):
        run_point({}, point)


def _evicting_run(fast_forward: bool) -> pd.DataFrame:
    return _evicting_run_result(1.1, fast_forward).requests.sort_values("request_id")


def _evicting_run_result(last_s: float, fast_forward: bool) -> SimResult:
    rows = [(0.0, True, 3), (0.05, False, 100), (last_s, True, 3)]
    segments, start, stop = from_lists([[SHARED] if s else [] for _, s, _ in rows])
    t = pd.DataFrame({"request_id": np.arange(3), "arrival_s": [r[0] for r in rows],
                      "prompt_tokens": [84, 100, 84], "output_tokens": [r[2] for r in rows],
                      "segments_start": start, "segments_stop": stop})
    spec = ClusterSpec(ContinuousPolicy(), COST, kv_blocks=13, block_size=16, num_replicas=2,
                       router="prefix_affinity", prefix_caching=True, check_invariants=True)
    return simulate(t, spec, segments=segments, fast_forward=fast_forward)


@pytest.mark.parametrize("fast_forward", [True, False])
def test_the_router_sees_the_blocks_a_decode_run_evicted_before_the_arrival(
        fast_forward: bool) -> None:
    # Two replicas of 13 blocks of 16. r0 (the 64-token system prompt + 20, 3 out) runs on
    # replica 0 and leaves its 5 full blocks cached-free, freed last to first (the oldest
    # to go is its own fifth block, the system prompt's first goes last). r1 (100 own
    # tokens, 100 out) at 0.05 goes there too (no hit anywhere: lowest index): 7 blocks at
    # its prefill, 1 plain block left. Its context passes 112, 128, 144, 160, 176 and 192
    # tokens at decode steps 13, 29, 45, 61, 77 and 93 (0.011 s each from 0.07), each
    # opening a block when the step starts: the first takes the plain block, the others
    # evict, the last (from 1.082 s) the system prompt's first block. r2 (system prompt +
    # 20) at 1.1 finds no prefix on replica 0 and goes to the idle replica 1: first token
    # 1.1 + 0.01 + 84e-4 = 1.1184, done two steps of 0.011 later. (At 1.08 it would still
    # find one block there and go to replica 0.) Fast-forwarded, r1's steps are one decode
    # run ending at 1.159; before stop 63 its blocks were opened only then, so r2 went to
    # replica 0, its cache still showing the whole prompt, and waited for r1 to finish.
    recs = _evicting_run(fast_forward)
    assert recs["replica"].tolist() == [0, 0, 1]
    assert recs["cached_tokens"].tolist() == [0, 0, 0]
    assert recs["first_token_s"].tolist()[2] == pytest.approx(1.1184, abs=1e-12)
    assert recs["finish_s"].tolist()[2] == pytest.approx(1.1404, abs=1e-12)


def test_an_arrival_tied_with_the_evicting_steps_end_sees_the_eviction() -> None:
    # The case above, r2 arriving exactly when the evicting step (the 93rd decode) starts
    # or ends. At its start the arrival comes first (as when stepping): the prompt's first
    # block is still cached and r2 follows it to replica 0. At its end the step has not
    # ended (the arrival again comes first), but its block was taken when it started: the
    # prefix is gone and r2 goes to replica 1. Times read off the stepping run's log.
    steps = _evicting_run_result(1.1, False).steps
    own = steps[steps["replica"] == 0].reset_index(drop=True)
    i = int(np.argmin(np.abs(own["start_s"].to_numpy() - 1.082)))
    start, end = float(own["start_s"][i]), float(own["end_s"][i])
    assert end - start == pytest.approx(0.011)
    for at, replica in ((start, 0), (end, 1)):
        for fast_forward in (True, False):
            recs = _evicting_run_result(at, fast_forward).requests.sort_values("request_id")
            assert recs["replica"].tolist() == [0, 0, replica], (at, fast_forward)


def test_a_short_decode_run_stops_at_the_arrival_too() -> None:
    # A cost with an exact decode pricer takes the short-run path (steps priced one by one)
    # rather than the planned one. r0-r2 as above on replica 0 (LinearCost, the same
    # times); r3 (40 own tokens, 3 out) at 0.8 goes to the idle replica 1 and is done by
    # 0.85. r4 (system prompt + 20) at 1.1: replica 0's prefix was evicted at 1.082, so it
    # goes to replica 1 (both within the load bound, neither cached: fewer outstanding).
    # Before stop 63 the short run went on past the arrival and r4 followed the stale
    # prefix to replica 0.
    cost = LinearCost(step_s=0.01, prefill_token_s=1e-4, decode_seq_s=1e-3)
    rows = [(0.0, True, 3, 84), (0.05, False, 100, 100), (0.8, False, 3, 40), (1.1, True, 3, 84)]
    segments, start, stop = from_lists([[SHARED] if s else [] for _, s, _, _ in rows])
    t = pd.DataFrame({"request_id": np.arange(4), "arrival_s": [r[0] for r in rows],
                      "prompt_tokens": [r[3] for r in rows], "output_tokens": [r[2] for r in rows],
                      "segments_start": start, "segments_stop": stop})
    spec = ClusterSpec(ContinuousPolicy(), cost, kv_blocks=13, block_size=16, num_replicas=2,
                       router="prefix_affinity", prefix_caching=True, check_invariants=True)
    for fast_forward in (True, False):
        recs = simulate(t, spec, segments=segments, fast_forward=fast_forward
                        ).requests.sort_values("request_id")
        assert recs["replica"].tolist() == [0, 0, 1, 1]
        assert recs["first_token_s"].tolist()[3] == pytest.approx(1.1184, abs=1e-12)
