"""The dashboard's form reads its defaults, choices and ranges from the scenario schema.

Issue 11 follow-up: the form used to restate them (policy dataclass defaults, the default
rate, its own ranges and percentile list), so a changed default or a new policy had to be
edited in two places, and valid scenarios (percentile 99.9, rate 20,000/s) were refused.
"""

from __future__ import annotations

import pytest

import simulator.workload.config as workload_config
from dashboard.logic.form_fields import MAX_REQUESTS, bounds, choices, form_problems
from dashboard.logic.scenario_form import MAX_DEFAULT_REQUESTS, default_knobs, knobs_from_point
from simulator.policies import POLICIES, ContinuousPolicy
from simulator.scenario_types import Scenario, field_rule


def test_policy_choices_are_the_registrys_names(monkeypatch: pytest.MonkeyPatch) -> None:
    assert choices("policy") == tuple(POLICIES) == ("static", "dynamic", "continuous", "chunked")
    assert field_rule("policy.name").choices == tuple(POLICIES)
    monkeypatch.setitem(POLICIES, "window", (ContinuousPolicy, {"max_num_seqs": 4}))
    assert choices("policy")[-1] == "window"  # one line in the registry, and the form has it


def test_form_defaults_are_the_scenarios() -> None:
    sc, k = Scenario.from_dict({}), default_knobs()
    assert (k.model, k.gpu, k.weight_dtype, k.tp) == (
        sc.model.name, sc.hardware.gpu, sc.model.weight_dtype, sc.hardware.tp)
    assert (k.policy, k.max_num_seqs, k.max_num_batched_tokens) == (
        sc.policy.name, sc.policy.policy.max_num_seqs, sc.policy.policy.max_num_batched_tokens)
    assert (k.arrival, k.rate, k.cv) == (sc.workload.arrival, sc.workload.rate, sc.workload.cv)
    assert (k.replicas, k.router) == (sc.cluster.replicas, sc.cluster.router)
    assert k.num_requests == min(sc.workload.num_requests, MAX_DEFAULT_REQUESTS)
    # the numbers, by hand: continuous, 256 seqs, 8192 tokens, 1 req/s, 1000 -> 600 requests
    assert (k.policy, k.max_num_seqs, k.max_num_batched_tokens, k.rate, k.num_requests) == (
        "continuous", 256, 8192, 1.0, 600)
    assert k.prompt == {"dist": "lognormal", "mean": 1100.0, "sigma": 1.0}
    assert k.output == {"dist": "lognormal", "mean": 265.0, "sigma": 0.9}
    assert k.percentile == 99.0


@pytest.mark.parametrize(("policy", "knobs"), [
    ("static", {"batch_size": 8}),
    ("dynamic", {"max_batch_size": 8, "max_wait_s": 0.05}),
    ("chunked", {"max_num_seqs": 256, "max_num_batched_tokens": 8192}),
])
def test_each_policys_knob_defaults_are_its_classs(policy: str, knobs: dict) -> None:
    point = {"policy": {"name": policy}}
    k, built = knobs_from_point(point), Scenario.from_dict(point).policy.policy
    for knob, value in knobs.items():
        assert getattr(k, knob) == getattr(built, knob) == value


def test_a_changed_default_reaches_the_form(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(workload_config, "DEFAULT_RATE_PER_S", 2.5)
    assert Scenario.from_dict({}).workload.rate == 2.5
    assert default_knobs().rate == 2.5  # the form restated 1.0 before


def test_ranges_are_the_schemas() -> None:
    assert bounds("replicas") == (1, None)  # an integer >= 1, no top
    assert bounds("max_num_seqs", "continuous") == (1, None)
    assert bounds("max_wait_s", "dynamic") == (0.0, None)
    assert bounds("percentile") == (None, 100.0)  # > 0: exclusive, checked, not a widget min
    assert bounds("num_requests") == (1, MAX_REQUESTS)  # the form's cap on one run
    assert form_problems({"slo": {"percentile": 99.9}, "workload": {"rate": 20_000.0}}) == []
    assert form_problems({"workload": {"rate": 0.0}, "slo": {"percentile": 100.5}}) == [
        "workload.rate = 0.0: must be a number > 0 (req/s)",
        "slo.percentile = 100.5: must be a number > 0 and <= 100"]
    assert form_problems({"policy": {"name": "static", "static": {"batch_size": 0}}}) == [
        "policy.static.batch_size = 0: must be an integer >= 1 (requests)"]


def test_field_rule_reads_the_schema() -> None:
    assert field_rule("workload.rate").default == 1.0  # what runs when no rate is given
    assert field_rule("workload.rate").unit == "req/s" and field_rule("workload.rate").low_open
    assert field_rule("policy.chunked.chunked_prefill").default is True
    assert field_rule("policy.continuous.chunked_prefill").default is False
    assert field_rule("slo.percentile").default == 99.0
    assert field_rule("slo.ttft_ms").default is None  # no SLO unless the scenario sets one
    with pytest.raises(KeyError, match="workload.bogus"):
        field_rule("workload.bogus")
