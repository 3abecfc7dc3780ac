"""The front door: a token bucket and a bounded queue, by hand; every request accounted for."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from helpers import TokenCost, table, timeline

from simulator.cluster import ClusterSpec, simulate
from simulator.errors import ConfigError
from simulator.fleet.admission import REFUSED_QUEUE, REFUSED_RATE, TokenBucket
from simulator.fleet.sections import AdmissionSection
from simulator.metrics import summarize
from simulator.policies import ContinuousPolicy
from simulator.scenario_types import Scenario

UNIT = TokenCost(step_s=1.0)  # every step takes 1 s


def test_token_bucket_rate_2_burst_1_by_hand() -> None:
    # full at 0 (1 token): 0 passes (0 left); 0.1: 0.2 tokens, refused; 0.6: 0.2 + 0.5 * 2
    # = 1.2, capped at 1, passes (0 left); 1.0: 0.4 * 2 = 0.8, refused.
    bucket = TokenBucket(2.0, 1)
    assert [bucket.take(t) for t in (0.0, 0.1, 0.6, 1.0)] == [True, False, True, False]


def test_rate_limited_requests_are_rejected_with_their_reason() -> None:
    spec = ClusterSpec(ContinuousPolicy(), UNIT, kv_blocks=100,
                       admission=AdmissionSection(rate_limit=2.0, burst=1))
    res = simulate(table([(0.0, 4, 1), (0.1, 4, 1), (0.6, 4, 1), (1.0, 4, 1)]), spec)
    req = res.requests
    assert req["status"].tolist() == ["finished", "rejected", "finished", "rejected"]
    assert req["reason"][1].startswith(f"{REFUSED_RATE}: 2 req/s with burst 1")
    assert req["replica"].tolist() == [0, -1, 0, -1]  # a refused request reaches no replica
    summary = summarize(req, res.steps)
    assert summary["rejected_by_cause"] == {REFUSED_RATE: 2}
    assert summary["completed"] == 2


def test_queue_bound_2_with_one_second_per_request() -> None:
    # one request at a time (max_num_seqs 1), 1 s each. r0 at 0 starts at once; r1 (0.1) and
    # r2 (0.2) wait (queue 1, 2); r3 (0.3) and r4 (0.4) find 2 waiting: refused. At 1.5 r1
    # runs (1-2) and only r2 waits, so r5 is taken: r2 runs 2-3, r5 3-4.
    spec = ClusterSpec(ContinuousPolicy(max_num_seqs=1), UNIT, kv_blocks=100,
                       admission=AdmissionSection(max_queue=2))
    rows = [(0.0, 4, 1), (0.1, 4, 1), (0.2, 4, 1), (0.3, 4, 1), (0.4, 4, 1), (1.5, 4, 1)]
    req = simulate(table(rows), spec).requests
    assert req["status"].tolist() == ["finished"] * 3 + ["rejected"] * 2 + ["finished"]
    assert req["reason"][3] == f"{REFUSED_QUEUE}: 2 waiting on its replica, max_queue = 2"
    done = req[req["status"] == "finished"]
    assert timeline(done) == [(0, 0.0, 1.0, 1.0), (1, 1.0, 2.0, 2.0), (2, 2.0, 3.0, 3.0),
                              (5, 3.0, 4.0, 4.0)]


def test_fleet_wide_queue_counts_every_serving_replica() -> None:
    # two replicas, round robin, one request at a time each: r0 -> 0, r1 -> 1 start at once;
    # r2 (0.1) and r3 (0.2) wait (1, then 2 fleet-wide); r4 (0.3) finds 2: refused.
    spec = ClusterSpec(ContinuousPolicy(max_num_seqs=1), UNIT, kv_blocks=100, num_replicas=2,
                       admission=AdmissionSection(max_queue=2, queue_scope="fleet"))
    rows = [(0.0, 4, 1), (0.0, 4, 1), (0.1, 4, 1), (0.2, 4, 1), (0.3, 4, 1)]
    req = simulate(table(rows), spec).requests
    assert req["status"].tolist() == ["finished"] * 4 + ["rejected"]
    assert "2 waiting on 2 serving replica(s)" in req["reason"][4]


@pytest.mark.parametrize("horizon_s", [None, 20.0])
def test_every_request_is_accounted_for(horizon_s: float | None) -> None:
    rng = np.random.default_rng(7)
    n = 400
    t = pd.DataFrame({"request_id": np.arange(n), "arrival_s": np.cumsum(rng.exponential(0.1, n)),
                      "prompt_tokens": rng.integers(1, 300, n),
                      "output_tokens": rng.integers(1, 40, n)})
    spec = ClusterSpec(ContinuousPolicy(max_num_seqs=4), TokenCost(0.05, 1e-3, 2e-2),
                       kv_blocks=60, num_replicas=2, router="least_outstanding_tokens",
                       admission=AdmissionSection(rate_limit=8.0, burst=3, max_queue=3))
    res = simulate(t, spec, horizon_s=horizon_s)
    s = summarize(res.requests, res.steps, num_replicas=2)
    arrived = len(res.requests)
    assert s["completed"] + s["num_rejected"] + s["num_in_flight"] == arrived
    assert arrived == (n if horizon_s is None else int((t["arrival_s"] <= horizon_s).sum()))
    causes = s["rejected_by_cause"]
    assert causes.get(REFUSED_RATE, 0) > 0 and causes.get(REFUSED_QUEUE, 0) > 0
    assert sum(causes.values()) == s["num_rejected"]


def test_the_admission_section_is_checked() -> None:
    with pytest.raises(ConfigError, match=r"admission.max_queue = 0: must be an integer >= 1"):
        Scenario.from_dict({"admission": {"max_queue": 0}})
    with pytest.raises(ConfigError, match=r"admission.queue_scope = 'pod'"):
        Scenario.from_dict({"admission": {"max_queue": 2, "queue_scope": "pod"}})
    assert not Scenario.from_dict({}).admission.enabled
    assert Scenario.from_dict({"admission": {"rate_limit": 5}}).admission.rate_limit == 5.0
