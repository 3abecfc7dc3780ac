"""``workload.rate = inf`` (a burst at t = 0) and closed-loop client starts (issue 12).

Timelines are checked by hand against a cost of ``step_s + prefill_token_s * P``.
"""

from __future__ import annotations

import math
import tomllib

import numpy as np
import pytest
from helpers import TokenCost, timeline
from helpers import table as request_table

from simulator.cluster import ClusterSpec, simulate
from simulator.deployment import resolve
from simulator.errors import ConfigError
from simulator.metrics import summarize, to_json_safe
from simulator.policies import ContinuousPolicy
from simulator.scenario import apply_overrides
from simulator.scenario_types import Scenario, schema_rules
from simulator.slo import SLO
from simulator.workload.arrivals import constant_arrivals, gamma_arrivals, poisson_arrivals
from simulator.workload.build import build_requests
from simulator.workload.clients import cycle_estimate_s, first_send_s
from simulator.workload.config import WorkloadConfig
from simulator.workload.transforms import scale_to_rate

FIXED = {"prompt": {"dist": "fixed", "tokens": 4}, "output": {"dist": "fixed", "tokens": 3}}
# 0.5 s a step plus 0.125 s a prompt token: one 4-token prefill 1.0 s, two 1.5 s; decode 0.5 s
COST = TokenCost(step_s=0.5, prefill_token_s=0.125)
BASE = {"model": {"name": "llama-3.1-8b"}, "hardware": {"gpu": "h100-sxm"},
        "policy": {"name": "continuous"},
        "workload": {"arrival": "poisson", "rate": 5.0, "num_requests": 4}}


def _built(workload: dict, step_time=None):  # type: ignore[no-untyped-def]
    cfg = WorkloadConfig.from_dict({**FIXED, **workload})
    return build_requests(cfg, np.random.default_rng(0), None, step_time)


def _run(workload: dict, budget: int = 8192):  # type: ignore[no-untyped-def]
    built = _built(workload, COST.step_time)
    spec = ClusterSpec(ContinuousPolicy(max_num_batched_tokens=budget), COST, 100, 4)
    return built, simulate(built.table, spec)


@pytest.mark.parametrize("arrival", ["poisson", "gamma", "constant"])
def test_a_burst_of_four_gives_the_hand_timeline(arrival: str) -> None:
    # budget 8 tokens: two 4-token prompts a step. 0-1.5: prefill r0, r1 (first tokens at
    # 1.5); 1.5-3: prefill r2, r3 (r0, r1 stall); 3-3.5, 3.5-4: decode all four (done at 4)
    extra = {"cv": 2.0} if arrival == "gamma" else {}
    built, res = _run({"arrival": arrival, "rate": math.inf, "num_requests": 4, **extra}, 8)
    assert built.table["arrival_s"].tolist() == [0.0] * 4
    assert timeline(res.requests) == [(0, 0.0, 1.5, 4.0), (1, 0.0, 1.5, 4.0),
                                      (2, 1.5, 3.0, 4.0), (3, 1.5, 3.0, 4.0)]
    s = to_json_safe(summarize(res.requests, res.steps, SLO(), kv_blocks_total=100))
    assert s["duration"] == 4.0 and s["request_throughput"] == 1.0  # 4 requests / 4 s
    assert s["output_throughput"] == 3.0 and s["mean_ttft_ms"] == 2250.0


def test_inf_arrives_at_zero_in_order_and_draws_nothing() -> None:
    rng = np.random.default_rng(1)
    for times in (poisson_arrivals(math.inf, 3, rng), gamma_arrivals(math.inf, 0.5, 3, rng),
                  constant_arrivals(math.inf, 3)):
        assert times.tolist() == [0.0, 0.0, 0.0]
    assert rng.random() == np.random.default_rng(1).random()  # the generator is untouched
    trace = request_table([(2.0, 4, 1), (3.0, 4, 1), (7.0, 4, 1)])
    assert scale_to_rate(trace, math.inf)["arrival_s"].tolist() == [2.0, 2.0, 2.0]


def test_rate_inf_is_read_from_toml_and_set() -> None:
    assert tomllib.loads("rate = inf")["rate"] == math.inf
    sc = Scenario.from_dict(apply_overrides(BASE, ["workload.rate=inf"]))
    assert sc.workload.rate == math.inf
    assert schema_rules()["workload.rate"].allow_inf
    with pytest.raises(ConfigError, match="workload.rate = -inf"):
        Scenario.from_dict(apply_overrides(BASE, ["workload.rate=-inf"]))


def _float_fields() -> list[str]:
    return [k for k, r in schema_rules().items() if r.kind == "float" and k != "workload.rate"]


@pytest.mark.parametrize("key", _float_fields())
def test_inf_is_refused_by_every_other_float_field(key: str) -> None:
    assert not schema_rules()[key].allow_inf
    with pytest.raises(ConfigError, match=key.replace(".", r"\.")):
        resolve(apply_overrides(BASE, [f"{key}=inf"]))


def test_ramp_starts_client_k_at_k_ramp_over_c() -> None:
    built = _built({"arrival": "closed", "concurrency": 4, "num_requests": 8,
                    "client_start": "ramp", "client_ramp_s": 2.0})
    assert built.table["think_s"].tolist() == [0.0, 0.5, 1.0, 1.5, 0.0, 0.0, 0.0, 0.0]
    assert first_send_s(3, 3.0).tolist() == [0.0, 1.0, 2.0]


def test_staggered_spreads_the_clients_over_one_estimated_cycle() -> None:
    # cycle = prefill(4 tokens) 1.0 s + (3 - 1) decodes of 0.5 s = 2.0 s: starts 0 and 1.0
    assert cycle_estimate_s(COST.step_time, 4, 3, 2, 0.0) == 2.0
    built = _built({"arrival": "closed", "concurrency": 2, "num_requests": 4,
                    "client_start": "staggered"},
                   COST.step_time)
    assert built.table["think_s"].tolist() == [0.0, 1.0, 0.0, 0.0]
    with pytest.raises(ConfigError, match="needs the deployment's cost model"):
        _built({"arrival": "closed", "concurrency": 2, "client_start": "staggered"})


def test_staggered_clients_wait_less_for_their_first_token_than_lockstep() -> None:
    closed = {"arrival": "closed", "concurrency": 2, "num_requests": 4}
    _, together = _run(closed)
    # together: 0-1.5 both prefill (TTFT 1.5), decode to 2.5; both send again at 2.5:
    # 2.5-4 prefill (TTFT 1.5), done at 5.
    assert timeline(together.requests) == [(0, 0.0, 1.5, 2.5), (1, 0.0, 1.5, 2.5),
                                           (2, 2.5, 4.0, 5.0), (3, 2.5, 4.0, 5.0)]
    _, staggered = _run({**closed, "client_start": "staggered"})
    # client 1 starts at 1.0: 0-1 prefill r0 (TTFT 1.0); 1-2 prefill r1 (TTFT 1.0, r0
    # stalls); 2-2.5, 2.5-3 decode both (both done at 3); r2, r3 at 3: 3-4.5 (TTFT 1.5).
    assert timeline(staggered.requests) == [(0, 0.0, 1.0, 3.0), (1, 1.0, 2.0, 3.0),
                                            (2, 3.0, 4.5, 5.5), (3, 3.0, 4.5, 5.5)]
    ttft = {name: float((r.requests["first_token_s"] - r.requests["arrival_s"]).mean())
            for name, r in (("together", together), ("staggered", staggered))}
    assert ttft == {"together": 1.5, "staggered": 1.25}  # (1 + 1 + 1.5 + 1.5) / 4


def test_client_start_only_for_a_closed_loop_and_ramp_only_with_a_ramp() -> None:
    with pytest.raises(ConfigError, match="client_start = 'ramp': only for arrival"):
        WorkloadConfig.from_dict({"client_start": "ramp", "client_ramp_s": 1.0})
    with pytest.raises(ConfigError, match="client_ramp_s = 0: give a ramp"):
        WorkloadConfig.from_dict({"arrival": "closed", "concurrency": 2,
                                  "client_start": "ramp"})
    with pytest.raises(ConfigError, match="client_ramp_s = 2: give a ramp"):
        WorkloadConfig.from_dict({"arrival": "closed", "concurrency": 2,
                                  "client_ramp_s": 2.0})
    default = _built({"arrival": "closed", "concurrency": 2, "num_requests": 4})
    # today's default: every client at 0
    assert default.table["think_s"].tolist() == [0.0] * 4
