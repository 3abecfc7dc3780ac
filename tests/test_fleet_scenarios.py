"""The fleet scenarios run from the CLI (`servesim run ... --json`), smaller, and report
their figures; the text report prints the fleet lines."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from servesim.cli import main

ROOT = Path(__file__).resolve().parents[1] / "scenarios"


@pytest.mark.parametrize("name", ["autoscaling-step", "autoscaling-daily", "admission-control"])
def test_a_fleet_scenario_runs_and_accounts_for_every_request(
        name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["run", str(ROOT / f"{name}.toml"), "--json", "--out", str(tmp_path / "o"),
                 "--set", "workload.num_requests=1500"])
    assert code == 0
    s = json.loads(capsys.readouterr().out)[0]
    assert s["completed"] + s["num_rejected"] + s["num_in_flight"] == 1500
    if name.startswith("autoscaling"):
        timeline = s["replica_timeline"]
        assert timeline[0] == [0, 1, 1]
        # replica-seconds = the integral of the billed count over the timeline, to the end
        steps = [*timeline, [s["fleet_end_s"], 0, 0]]
        area = sum((b[0] - a[0]) * a[1] for a, b in zip(steps, steps[1:], strict=False))
        assert s["replica_seconds"] == pytest.approx(area)
        assert s["cost_usd"] == pytest.approx(s["replica_seconds"] / 3600 * 2.99)
    else:
        assert set(s["rejected_by_cause"]) <= {"over the admission rate limit",
                                               "admission queue full"}
        assert s["num_rejected"] > 0


def test_the_text_report_prints_the_fleet_lines(tmp_path: Path,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", str(ROOT / "autoscaling-step.toml"), "--out", str(tmp_path / "o"),
                 "--set", "workload.num_requests=1500"]) == 0
    out = capsys.readouterr().out
    assert "fleet: policy=chunked: " in out and "replica-seconds" in out
    assert "replicas billed (serving) over time: 0s:1" in out
