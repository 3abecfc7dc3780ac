"""Priority classes in a scenario: drawing, config errors naming the field, the summary's
per-class block, the report's class table, and FCFS untouched."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from helpers import tiny_cpu_scenario

from simulator.errors import ConfigError
from simulator.policies import make_policy
from simulator.report import format_summary_table
from simulator.runner import run_point
from simulator.scenario import expand_sweep, load_scenario
from simulator.workload.classes import WorkloadClasses, add_classes
from simulator.workload.table import validate_request_table

LOAD = ('arrival = "poisson"\nrate = 20.0\nnum_requests = 60\n'
        'prompt = { dist = "fixed", tokens = 32 }\noutput = { dist = "fixed", tokens = 8 }\n')
CLASSES = ("[workload.classes.chat]\nshare = 0.25\nttft_ms = 2000\n"
           "[workload.classes.bulk]\nshare = 0.75\n")


def _run(tmp_path: Path, text: str) -> tuple[dict, pd.DataFrame]:  # type: ignore[type-arg]
    path = tmp_path / "s.toml"
    path.write_text(text)
    ((labels, point),) = expand_sweep(load_scenario(path))
    result = run_point(labels, point)
    return result.summary, result.result.requests


def test_classes_are_drawn_from_the_seed_by_share() -> None:
    classes = WorkloadClasses.from_value({"a": 0.3, "b": 0.7})
    table = pd.DataFrame({"request_id": np.arange(10_000)})
    one, note = add_classes(table, classes, np.random.default_rng(5))
    two, _ = add_classes(table, classes, np.random.default_rng(5))
    assert one["priority_class"].tolist() == two["priority_class"].tolist()
    # 10,000 draws with p = 0.3: the count is within 4 sd (sd = sqrt(10^4 x 0.21) = 46)
    assert abs(int((one["priority_class"] == 0).sum()) - 3000) < 4 * 46
    assert note == "priority classes drawn by share: a (class 0) 0.3, b (class 1) 0.7"


@pytest.mark.parametrize(("value", "message"), [
    ({"a": 0.3, "b": 0.6}, "workload.classes: shares sum to 0.9; they must sum to 1"),
    ({"a": 1.5}, "workload.classes.a = 1.5: a share must be a number in (0, 1]"),
    ({"a": {"share": 0.5}, "b": 0.5, "c": {}}, "workload.classes: give every class a share"),
    ({"a": {"share": 1, "priority": -1}}, "workload.classes.a.priority = -1: must be an"),
    ({"a": {"share": 0.5, "priority": 1}, "b": 0.5},
     "workload.classes.b.priority = 1: a has it too"),
    ({"a": {"share": 1, "ttft": 5}}, "workload.classes.a.ttft: unknown SLO key"),
    ("interactive", "workload.classes = 'interactive': must be a table"),
])
def test_class_errors_name_the_field(value: object, message: str) -> None:
    with pytest.raises(ConfigError, match=f"^{message.replace('(', '.').replace(')', '.')}"):
        WorkloadClasses.from_value(value)


def test_policy_and_table_errors_name_the_field() -> None:
    with pytest.raises(ConfigError, match=r"policy.scheduling = 'edf'"):
        make_policy("continuous", scheduling="edf")
    with pytest.raises(ConfigError, match=r"not a knob of the static policy"):
        make_policy("static", scheduling="priority")
    bad = pd.DataFrame({"request_id": [0, 1], "arrival_s": [0.0, 1.0], "prompt_tokens": [4, 4],
                        "output_tokens": [2, 2], "priority_class": [0, -1]})
    with pytest.raises(ValueError, match=r"t row 2: priority_class = -1: must be >= 0"):
        validate_request_table(bad, "t")


def test_a_trace_column_must_meet_tables_without_shares() -> None:
    table = pd.DataFrame({"request_id": [0, 1], "priority_class": [1, 0]})
    named = WorkloadClasses.from_value({"hi": {"ttft_ms": 100}, "lo": {}})
    assert add_classes(table, named, np.random.default_rng(0))[0] is table
    with pytest.raises(ConfigError, match="the trace has its own priority_class column"):
        add_classes(table, WorkloadClasses.from_value({"a": 1.0}), np.random.default_rng(0))
    with pytest.raises(ConfigError, match="no shares given and the trace has no"):
        add_classes(table.drop(columns="priority_class"), named, np.random.default_rng(0))


def test_a_run_with_classes_reports_each_class(tmp_path: Path) -> None:
    text = tiny_cpu_scenario("p", 3, LOAD + CLASSES).replace(
        'name = "continuous"', 'name = "continuous"\nscheduling = "priority"')
    summary, records = _run(tmp_path, text)
    chat, bulk = summary["classes"]["chat"], summary["classes"]["bulk"]
    counts = records["priority_class"].value_counts().to_dict()
    assert chat["requests"] == counts[0] and bulk["requests"] == counts[1]
    assert chat["requests"] + bulk["requests"] == 60
    assert chat["completed"] + bulk["completed"] == summary["completed"]
    assert chat["slo"] == {"ttft_ms": 2000.0, "percentile": 99.0}
    assert bulk["slo"] is None and bulk["slo_met"] is None  # no [slo] to fall back on
    table = format_summary_table([summary], "t", labels=["policy"])
    assert "Per priority class" in table
    lines = [line.split() for line in table.splitlines()]
    assert any(row[:3] == ["continuous", "chat", "0"] for row in lines)
    assert any(row[:3] == ["continuous", "bulk", "1"] for row in lines)


def test_without_classes_nothing_changes(tmp_path: Path) -> None:
    # the default (fcfs, no classes): no class key, no class column, and "priority"
    # scheduling of one class gives the very same records.
    summary, records = _run(tmp_path, tiny_cpu_scenario("p", 3, LOAD))
    assert "classes" not in summary and "priority_class" not in records
    assert "Per priority class" not in format_summary_table([summary], "t")
    text = tiny_cpu_scenario("p", 3, LOAD).replace(
        'name = "continuous"', 'name = "continuous"\nscheduling = "priority"')
    _, same = _run(tmp_path, text)
    pd.testing.assert_frame_equal(records, same)


def test_a_trace_gives_the_classes_and_the_tables_name_them(tmp_path: Path) -> None:
    from simulator.workload.build import build_requests
    from simulator.workload.config import WorkloadConfig

    trace = tmp_path / "t.csv"
    trace.write_text("request_id,arrival_s,prompt_tokens,output_tokens,priority_class\n"
                     "0,0.0,10,5,1\n1,0.5,12,4,0\n2,0.7,8,3,1\n")
    cfg = WorkloadConfig.from_dict({"arrival": "trace", "trace": str(trace),
                                    "classes": {"hi": {"ttft_ms": 100}, "lo": {}}})
    built = build_requests(cfg, np.random.default_rng(0), None)
    assert built.table["priority_class"].tolist() == [1, 0, 1]
    assert cfg.classes is not None and cfg.classes.name_of(0) == "hi"
    with pytest.raises(ConfigError, match=r"^workload.classes.hi.share = 2: a share must be"):
        WorkloadConfig.from_dict({"classes": {"hi": {"share": 2}}})
