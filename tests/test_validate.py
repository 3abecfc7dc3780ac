"""``servesim validate``'s comparison: zero against itself, an injected slowdown found exactly.

These run the simulator on both sides (no torch); tests/test_validate_engine.py runs the
real engine.
"""

from __future__ import annotations

import json
import math

import pandas as pd
import pytest
from helpers import mark_measured

from calibrate.validate import (
    METRICS,
    ROW_KEYS,
    STATISTICS,
    compare_summaries,
    worst_request,
)
from servesim.cli import main

# One request at a time (every 2 s, each done well within 1 s): no queueing, so scaling
# every step by 1.08 scales TTFT, TPOT, ITL and end-to-end latency by exactly 1.08.
SCENARIO = """
name = "val"
seed = 3
[model]
name = "tiny"
weight_dtype = "fp32"
[hardware]
gpu = "cpu"
[policy]
name = "continuous"
[workload]
arrival = "constant"
rate = 0.5
num_requests = 12
prompt = { dist = "uniform", low = 20, high = 80 }
output = { dist = "uniform", low = 5, high = 30 }
"""


@pytest.fixture()
def runs(tmp_path):
    scenario = tmp_path / "val.toml"
    scenario.write_text(SCENARIO)
    base, slow = tmp_path / "base", tmp_path / "slow"
    assert main(["run", str(scenario), "--out", str(base), "--workers", "1"]) == 0
    assert main(["run", str(scenario), "--out", str(slow), "--workers", "1",
                 "--set", "cost.time_scale=1.08"]) == 0
    mark_measured(base)  # the simulator stands in for a measurement here
    return scenario, base, slow


def test_a_run_against_itself_has_zero_error(runs, tmp_path, capsys):
    scenario, base, _ = runs
    capsys.readouterr()
    code = main(["validate", str(scenario), "--measured", str(base), "--simulated", str(base),
                 "--out", str(tmp_path / "v"), "--json"])
    assert code == 0
    rows = json.loads(capsys.readouterr().out)  # stdout holds the rows and nothing else
    assert len(rows) == len(METRICS) * len(STATISTICS) + 2
    assert all(set(r) == set(ROW_KEYS) for r in rows)
    assert all(r["relative_error"] == 0 and r["ok"] for r in rows)
    assert (tmp_path / "v" / "comparison.csv").is_file()
    assert (tmp_path / "v" / "cdf.png").stat().st_size > 1000


def test_an_injected_slowdown_is_reported_as_that_slowdown(runs, tmp_path, capsys):
    scenario, base, slow = runs
    capsys.readouterr()
    code = main(["validate", str(scenario), "--measured", str(base), "--simulated", str(slow),
                 "--out", str(tmp_path / "v"), "--json", "--strict"])
    assert code == 1  # --strict: figures outside tolerance
    rows = {(r["metric"], r["statistic"]): r for r in json.loads(capsys.readouterr().out)}
    for metric in ("ttft", "tpot", "itl", "e2el"):
        for stat in STATISTICS:
            r = rows[metric, stat]
            assert r["relative_error"] == pytest.approx(0.08, abs=1e-9), (metric, stat)
            assert r["ok"] is (stat == "p99")  # 8% is within P99's 10% tolerance only
    assert rows["queue", "mean"]["measured"] == 0 and rows["queue", "mean"]["ok"]


def test_text_report_names_the_worst_request(runs, tmp_path, capsys):
    scenario, base, _ = runs
    records = pd.read_parquet(base / "requests.parquet")
    records.loc[records["request_id"] == 7, "finish_s"] += 0.5  # one request 0.5 s late
    hacked = tmp_path / "hacked"
    hacked.mkdir()
    records.to_parquet(hacked / "requests.parquet")
    (hacked / "summary.json").write_text((base / "summary.json").read_text())
    capsys.readouterr()
    assert main(["validate", str(scenario), "--measured", str(base), "--simulated",
                 str(hacked), "--out", str(tmp_path / "v")]) == 0
    out = capsys.readouterr().out
    assert "worst request: id 7" in out
    assert "policy continuous, load rate=0.5" in out


def test_a_results_folder_of_another_shape_is_refused(runs, tmp_path, capsys):
    scenario, base, _ = runs
    code = main(["validate", str(scenario), "--measured", str(base), "--simulated", str(base),
                 "--set", "policy.name=['static', 'continuous']", "--out", str(tmp_path / "v")])
    assert code == 2
    assert "1 points, but the scenario has 2" in capsys.readouterr().err


def test_compare_summaries_by_hand():
    m = {f"{s}_{k}_ms": 100.0 for k in METRICS for s in STATISTICS}
    m.update(request_throughput=2.0, output_throughput=50.0)
    s = dict(m, mean_ttft_ms=104.0, p99_ttft_ms=111.0, mean_queue_ms=100.5,
             output_throughput=45.0)
    rows = {(r["metric"], r["statistic"]): r for r in
            compare_summaries(m, s, policy="p", load="l")}
    assert rows["ttft", "mean"]["relative_error"] == pytest.approx(0.04)
    assert rows["ttft", "mean"]["ok"]
    assert not rows["ttft", "p99"]["ok"]  # +11% > 10%
    assert rows["throughput", "output_throughput"]["relative_error"] == pytest.approx(-0.1)
    assert not rows["throughput", "output_throughput"]["ok"]
    m["mean_queue_ms"], s["mean_queue_ms"] = 0.2, 0.9  # +350%, but within the 1 ms floor
    rows = {(r["metric"], r["statistic"]): r for r in
            compare_summaries(m, s, policy="p", load="l")}
    assert rows["queue", "mean"]["ok"]
    m["p90_queue_ms"] = None  # not measured (a client cannot see queueing): no row
    assert ("queue", "p90") not in {(r["metric"], r["statistic"]) for r in
                                    compare_summaries(m, s, policy="p", load="l")}
    m["mean_ttft_ms"] = math.nan
    bad = [r for r in compare_summaries(m, s, policy="p", load="l")
           if (r["metric"], r["statistic"]) == ("ttft", "mean")]
    assert not bad[0]["ok"]


def test_worst_request_by_hand():
    base = pd.DataFrame({"request_id": [1, 2, 3], "arrival_s": [0.0, 0.0, 0.0],
                         "scheduled_s": [0.0] * 3, "first_token_s": [0.1] * 3,
                         "finish_s": [1.0, 2.0, 4.0], "output_tokens": [5] * 3,
                         "status": ["finished"] * 3})
    sim = base.assign(finish_s=[1.1, 1.0, 4.4])  # request 2: -50%
    w = worst_request(base, sim, policy="p", load="l")
    assert w is not None and w.request_id == 2
    assert w.relative_error == pytest.approx(-0.5)
