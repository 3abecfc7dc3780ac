"""The Fleet page under AppTest: the replica timeline over the load with its cost, the
autoscaler switched off through its widget, refusals by cause, and the per-class table
and TTFT distributions switched from priority to FCFS scheduling."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from dashboard_support import PAGES, array, figures, metrics, page, trace_names

pytest.importorskip("streamlit")
TIMELINE = "Replicas over time, over the offered load"


def _run(name: str, scale: float) -> Any:
    """The page on shipped scenario ``name`` at time scale ``scale`` (a short run)."""
    at = page("fleet")
    at.session_state["fl_scenario"] = name
    at.session_state["_fl_source"] = f"shipped:{name}"  # so the scale below is kept
    at.session_state["fl_scale"] = scale
    return at.run()


def _billed(at: Any) -> np.ndarray:
    spec = figures(at)[TIMELINE]
    trace = next(t for t in spec["data"] if t["name"] == "replicas billed")
    return array(trace["y"])


def test_autoscaling_timeline_cost_and_switching_it_off():
    at = _run("autoscaling-step", 0.05)  # 1,400 requests: 4 -> 40 req/s at 15 s
    assert not at.exception and not at.error
    spec = figures(at)[TIMELINE]
    assert trace_names(spec) == ["offered (req/s, rate schedule)", "replicas billed",
                                 "replicas serving"]
    assert len(set(_billed(at))) > 1
    tiles = metrics(at)
    peak = int(max(_billed(at)))
    assert f"Fixed fleet of {peak}" in tiles and tiles["Cost"][1].endswith("vs fixed")
    at.checkbox(key="fl_autoscale").uncheck().run()
    assert set(_billed(at)) == {1}
    assert any("Autoscaler off: 1 replica(s)" in c.value for c in at.caption)
    assert "Cost" not in metrics(at)


def test_front_door_refusals_by_cause():
    at = _run("admission-control", 0.05)  # 300 requests at 40 req/s, 26 let through
    assert [d.value["cause"].tolist() for d in at.dataframe] == [
        ["over the admission rate limit"]]
    at.checkbox(key="fl_rate_limit_on").uncheck().run()
    assert "over the admission rate limit" not in str([d.value for d in at.dataframe])


def test_priority_classes_table_and_scheduling_switch():
    at = _run("priority-overload", 0.1)  # 300 requests
    table = at.dataframe[0].value
    assert table["class"].tolist() == ["interactive", "batch"]
    assert trace_names(figures(at)["TTFT by priority class"]) == ["interactive", "batch"]
    prio = table.set_index("class")["TTFT p99 ms"]
    at.selectbox(key="fl_scheduling").set_value("fcfs").run()
    fcfs = at.dataframe[0].value.set_index("class")["TTFT p99 ms"]
    assert fcfs["interactive"] > prio["interactive"]  # FCFS: the urgent class queues too
    at.number_input(key="fl_class_batch_share").set_value(0.5).run()
    assert "shares sum to 0.8, not 1" in at.error[0].value


def test_another_scenario_refills_every_fleet_widget():
    at = _run("autoscaling-step", 0.05)
    assert at.checkbox(key="fl_autoscale").value is True
    assert at.number_input(key="fl_cold_start_s").value == 30.0
    at.number_input(key="fl_cold_start_s").set_value(10.0).run()
    at.selectbox(key="fl_scenario").set_value("admission-control").run()
    assert not at.exception and not at.error
    assert at.checkbox(key="fl_autoscale").value is False
    assert at.checkbox(key="fl_rate_limit_on").value is True
    assert at.number_input(key="fl_rate_limit").value == 26.0
    assert at.number_input(key="fl_max_queue").value == 4
    assert at.number_input(key="fl_replicas").value == 2
    assert at.number_input(key="fl_scale").value == 1.0  # 6,000 requests: all of them


def test_the_explorers_current_scenario_is_offered():
    from streamlit.testing.v1 import AppTest

    at = AppTest.from_file(str(PAGES.parent / "app.py"), default_timeout=240).run()
    assert not at.exception, at.exception
    at.number_input(key="replicas").set_value(3).run()
    at.switch_page("views/fleet.py").run()
    at.selectbox(key="fl_scenario").set_value("the Explorer's current scenario").run()
    assert not at.exception and not at.error
    assert at.number_input(key="fl_replicas").value == 3  # the Explorer's, not a file's
