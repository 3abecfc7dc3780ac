"""The Fleet page's logic: the knobs round-trip a shipped fleet scenario unchanged, each
control writes exactly its keys, and the figures' data are the summary's own numbers
(checked by hand on small cases)."""

from __future__ import annotations

import copy
from dataclasses import replace

import numpy as np
import pandas as pd
import pytest

from dashboard import figures_fleet
from dashboard.logic.fleet import (
    ClassKnobs,
    apply_fleet,
    fleet_from_point,
    fleet_scenarios,
    scale_time,
    start_classes,
)
from dashboard.logic.fleet_results import (
    class_table,
    class_ttft,
    fleet_cost,
    offered_rate,
    refusals,
    replica_steps,
)
from dashboard.logic.run import simulate
from dashboard.logic.scenario_form import collapse, load_shipped
from simulator.scenario_types import Scenario

PLAIN = {"model": {"name": "llama-3.1-8b"}, "hardware": {"gpu": "h100-sxm"},
         "policy": {"name": "chunked"}, "workload": {"rate": 5.0, "num_requests": 50}}


def _point(name: str) -> dict:
    return collapse(load_shipped(name))


def _changed(before: dict, after: dict) -> dict:
    """{section: {key: value}} for every key ``after`` adds or changes (one level down)."""
    out: dict = {}
    for section, table in after.items():
        old = before.get(section)
        if not isinstance(table, dict):
            if table != old:
                out[section] = table
            continue
        diff = {k: v for k, v in table.items() if not isinstance(old, dict) or old.get(k) != v}
        gone = [k for k in (old or {}) if k not in table] if isinstance(old, dict) else []
        if diff or gone or old is None:
            out[section] = {**diff, **{k: "<removed>" for k in gone}}
    return out


def test_the_shipped_fleet_scenarios_are_offered():
    assert set(fleet_scenarios()) >= {"admission-control", "autoscaling-daily",
                                      "autoscaling-step", "priority-overload"}


@pytest.mark.parametrize("name", ["admission-control", "autoscaling-daily", "autoscaling-step",
                                  "priority-overload"])
def test_a_shipped_fleet_scenario_round_trips_unchanged(name):
    point = _point(name)
    assert apply_fleet(point, fleet_from_point(point)) == point


def test_a_plain_scenario_gains_no_key():
    k = fleet_from_point(PLAIN)
    assert (k.replicas, k.router, k.autoscale.on, k.scheduling, k.classes) == (
        1, "round_robin", False, "fcfs", ())
    assert k.admission.rate_limit is None and k.admission.max_queue is None
    assert apply_fleet(PLAIN, k) == PLAIN


def test_each_control_on_writes_exactly_its_keys():
    k = fleet_from_point(PLAIN)
    cases = [
        (replace(k, replicas=3, router="least_outstanding_tokens"),
         {"cluster": {"replicas": 3, "router": "least_outstanding_tokens"}}),
        (replace(k, autoscale=replace(k.autoscale, on=True)), {"autoscale": {}}),
        (replace(k, autoscale=replace(k.autoscale, on=True, signal="kv", cold_start_s=30.0)),
         {"autoscale": {"signal": "kv", "cold_start_s": 30.0}}),
        (replace(k, admission=replace(k.admission, rate_limit=5.0)),
         {"admission": {"rate_limit": 5.0}}),
        (replace(k, admission=replace(k.admission, max_queue=4, queue_scope="fleet")),
         {"admission": {"max_queue": 4, "queue_scope": "fleet"}}),
        (replace(k, scheduling="priority"), {"policy": {"scheduling": "priority"}}),
        (replace(k, classes=(ClassKnobs("a", 0.25, None, None, None),
                             ClassKnobs("b", 0.75, 800.0, None, None))),
         {"workload": {"classes": {"a": 0.25, "b": {"share": 0.75, "ttft_ms": 800.0}}}}),
    ]
    for knobs, expected in cases:
        out = apply_fleet(PLAIN, knobs)
        assert _changed(PLAIN, out) == expected
        Scenario.from_dict(out)  # and it runs
    assert Scenario.from_dict(apply_fleet(PLAIN, cases[1][0])).autoscale.enabled  # {}: on


def test_each_control_off_keeps_the_section_but_off():
    step = _point("autoscaling-step")
    k = fleet_from_point(step)
    out = apply_fleet(step, replace(k, autoscale=replace(k.autoscale, on=False)))
    assert _changed(step, out) == {"autoscale": {"enabled": False}}
    assert fleet_from_point(out).autoscale.on is False
    door = _point("admission-control")
    k = fleet_from_point(door)
    out = apply_fleet(door, replace(k, admission=replace(k.admission, rate_limit=None)))
    assert _changed(door, out) == {"admission": {"rate_limit": "<removed>"}}
    out = apply_fleet(door, replace(k, admission=replace(k.admission, rate_limit=None,
                                                          max_queue=None)))
    assert Scenario.from_dict(out).admission.enabled is False
    prio = _point("priority-overload")
    k = fleet_from_point(prio)
    assert _changed(prio, apply_fleet(prio, replace(k, scheduling="fcfs"))) == {
        "policy": {"scheduling": "fcfs"}}
    out = apply_fleet(prio, replace(k, classes=()))
    assert _changed(prio, out) == {"workload": {"classes": "<removed>"}}


def test_class_knobs_read_both_forms_and_start_from_the_shipped_split():
    k = fleet_from_point(_point("priority-overload"))
    assert k.classes == (ClassKnobs("interactive", 0.3, 1000.0, 100.0, None),
                         ClassKnobs("batch", 0.7, None, None, 180_000.0))
    assert start_classes() == k.classes
    short = {**PLAIN, "workload": {**PLAIN["workload"], "classes": {"hi": 0.4, "lo": 0.6}}}
    assert [(c.name, c.share) for c in fleet_from_point(short).classes] == [("hi", 0.4),
                                                                           ("lo", 0.6)]


def test_scale_time_scales_requests_and_the_schedule_not_the_rates():
    point = _point("autoscaling-step")
    out = scale_time(point, 0.1)
    assert out["workload"]["num_requests"] == 2800
    assert out["workload"]["rate_schedule"] == {"start_s": [0, 30.0, 90.0],
                                                "rate": [4.0, 40.0, 4.0]}
    assert point["workload"]["num_requests"] == 28000  # the input is not touched


def test_timeline_step_points_are_the_replica_timeline_rows():
    summary = {"replica_timeline": [[0, 1, 1], [20.0, 2, 1], [50.0, 2, 2]], "fleet_end_s": 92.5}
    steps = replica_steps(summary)
    assert steps.values.tolist() == [[0, 1, 1], [20, 2, 1], [50, 2, 2], [92.5, 2, 2]]
    rate = pd.DataFrame({"t_s": [0.0, 30.0, 92.5], "rate": [4.0, 40.0, 40.0]})
    fig = figures_fleet.replica_timeline(steps, rate, "rate schedule")
    by_name = {t.name: t for t in fig.data}
    assert list(by_name["replicas billed"].y) == [1, 2, 2, 2]
    assert list(by_name["replicas serving"].x) == [0, 20, 50, 92.5]
    assert by_name["replicas billed"].line.shape == "hv"  # the count holds until the next row


def test_a_small_autoscaling_run_follows_the_step():
    point = scale_time(_point("autoscaling-step"), 0.05)  # 4 -> 40 req/s at 15 s
    s = simulate(point).summary
    steps = replica_steps(s)
    assert steps.iloc[:-1].values.tolist() == [list(map(float, r)) for r in s["replica_timeline"]]
    assert steps["billed"].nunique() > 1 and steps["billed"].max() == s["peak_replicas"]


def test_offered_rate_from_a_schedule_and_from_arrivals():
    point = {"workload": {"rate_schedule": {"start_s": [0, 10, 30], "rate": [2.0, 8.0, 1.0]}}}
    reqs = pd.DataFrame({"arrival_s": [0.0, 5.0, 25.0]})  # the run ended before 30 s
    rate, label = offered_rate(point, reqs)
    assert (rate["t_s"].tolist(), rate["rate"].tolist(), label) == (
        [0.0, 10.0, 25.0], [2.0, 8.0, 8.0], "rate schedule")
    # no schedule: 4 arrivals over [0, 1.5] in 2 bins of 0.75 s: 2 each, 2 / 0.75 req/s
    rate, label = offered_rate({"workload": {}}, pd.DataFrame({"arrival_s": [0, .5, 1, 1.5]}), 2)
    assert rate["t_s"].tolist() == [0.0, 0.75, 1.5]
    assert rate["rate"].to_numpy() == pytest.approx([2 / 0.75] * 3)
    assert label == "arrivals per 0.75 s"


def test_cost_against_a_fixed_fleet_of_the_peak_by_hand():
    # docs/fleet.md's draining example: 31 replica-seconds over 21 s, tp 2, $3/GPU-hour
    summary = {"replica_seconds": 31.0, "fleet_end_s": 21.0, "peak_replicas": 2, "tp": 2,
               "usd_per_gpu_hour": 3.0, "mean_replicas": 31 / 21}
    cost = fleet_cost(summary)
    assert cost["cost_usd"] == pytest.approx(31 / 3600 * 2 * 3)  # $0.052
    assert cost["fixed_replica_seconds"] == 42.0
    assert cost["fixed_cost_usd"] == pytest.approx(42 / 3600 * 2 * 3)
    assert cost["saving"] == pytest.approx(1 - 31 / 42)
    assert fleet_cost({"replicas": 2}) is None


def test_refusals_count_every_refused_request_by_cause():
    point = copy.deepcopy(_point("admission-control"))
    point["workload"]["num_requests"] = 400
    out = simulate(point)
    table = refusals(out.summary)
    assert table["requests"].sum() == out.summary["num_rejected"] == (
        out.requests["status"] == "rejected").sum() > 0
    assert table["cause"].iloc[0] == "over the admission rate limit"
    assert refusals({"rejected_by_cause": {}}).empty


def test_class_table_and_ttft_samples_per_class():
    point = scale_time(_point("priority-overload"), 0.1)  # 300 requests
    out = simulate(point)
    table = class_table(out.summary)
    assert table["class"].tolist() == ["interactive", "batch"]
    assert table["priority"].tolist() == [0, 1]
    assert table["requests"].sum() == 300
    samples = class_ttft(out.requests, out.summary)
    for _, row in table.iterrows():
        ttft = samples[row["class"]]
        assert len(ttft) == row["completed"]
        assert np.percentile(ttft, 50) == pytest.approx(row["TTFT p50 ms"])
    assert np.median(samples["interactive"]) < np.median(samples["batch"])  # priority works
    fig = figures_fleet.class_ttft_cdfs(samples, {"interactive": 1000.0})
    assert [t.name for t in fig.data] == ["interactive", "batch"]
    assert class_ttft(out.requests, {}) == {}
