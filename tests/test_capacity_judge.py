"""One judge of the SLO for ``run`` and ``plan``, and reasons that name the cause (issue 11).

A point that refuses requests (prompt + output over the token budget) used to read "SLO
met" in ``run`` while ``plan`` said "misses the SLO at every rate tried"; both now ask
``metrics_slo.slo_met`` and say how many requests were refused, and why.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pandas as pd
import pytest

from servesim.cli import main
from simulator.capacity import SearchSettings, build_candidates, plan
from simulator.capacity.search import passes
from simulator.metrics import summarize
from simulator.metrics_slo import miss_reason, refusal_causes, slo_met
from simulator.records import REQUEST_COLUMNS, STEP_COLUMNS, conform
from simulator.runner import run_point
from simulator.slo import SLO, parse_slo_string

BUDGET = "prompt + output over max_num_batched_tokens without chunked prefill"
KV = "prompt + output over the replica's KV cache"

SCENARIO = """
name = "refusing"
seed = 3
[policy]
name = "continuous"
max_num_batched_tokens = 8
[workload]
arrival = "poisson"
rate = 20.0
num_requests = 200
prompt = { dist = "uniform", low = 1, high = 10 }
output = { dist = "fixed", tokens = 1 }
[cost]
form = "linear"
step_s = 0.004
[slo]
ttft_p99_ms = 1000
"""


def _records(reasons: list[str]) -> pd.DataFrame:
    """Two finished requests (TTFT 100 ms, E2E 200 ms) and one rejected per reason."""
    rows = [(0.0, 0.0, 0.1, 0.2, 10, 2, "finished", ""), (1.0, 1.0, 1.1, 1.2, 10, 2,
                                                          "finished", "")]
    rows += [(2.0, float("nan"), float("nan"), float("nan"), 10, 2, "rejected", r)
             for r in reasons]
    df = pd.DataFrame(rows, columns=["arrival_s", "scheduled_s", "first_token_s", "finish_s",
                                     "prompt_tokens", "output_tokens", "status", "reason"])
    df["request_id"], df["replica"], df["preemptions"] = range(len(df)), 0, 0
    return conform(df, REQUEST_COLUMNS, "requests")


def _steps() -> pd.DataFrame:
    df = pd.DataFrame({"start_s": [0.0], "end_s": [0.1]}).reindex(
        columns=list(STEP_COLUMNS), fill_value=0)
    return conform(df, STEP_COLUMNS, "steps")


def test_refused_requests_miss_the_slo_and_are_counted_by_cause() -> None:
    # P99 TTFT of the two finished is 100 ms <= 500: the target holds, but 3 of 5
    # requests got no answer, so the SLO is not met.
    reasons = [f"{BUDGET}: 17 > 8", f"{BUDGET}: 9 > 8", f"{KV}: needs 9 KV blocks"]
    s = summarize(_records(reasons), _steps(), SLO(ttft_ms=500))
    assert s["slo"]["p99_ttft_ms"]["met"] is True
    assert s["num_rejected"] == 3
    assert s["rejected_by_cause"] == {BUDGET: 2, KV: 1}
    assert s["slo_met"] is False
    assert miss_reason(s) == f"3 request(s) refused (2 {BUDGET}; 1 {KV})"
    assert passes(s) is False  # plan judges it the same


def test_one_judge() -> None:
    met = {"p99_ttft_ms": {"target": 500, "value": 100, "met": True}}
    missed = {"p99_ttft_ms": {"target": 500, "value": 812.0, "met": False}}
    assert slo_met({}, 5, 5) is None  # no target: nothing to judge
    assert slo_met(met, 0, 0) is True
    assert slo_met(met, 1, 0) is False and slo_met(met, 0, 1) is False
    assert slo_met(missed, 0, 0) is False
    assert miss_reason({"slo": missed, "slo_met": False}) == "p99_ttft_ms 812.0 ms > 500 ms"
    assert refusal_causes(_records([])) == {}


def test_run_and_plan_agree_and_plan_names_the_cause() -> None:
    raw = tomllib.loads(SCENARIO)
    summary = run_point({}, raw).summary
    n = summary["num_rejected"]
    assert n > 0 and summary["rejected_by_cause"] == {BUDGET: n}
    assert summary["slo_met"] is False and passes(summary) is False
    result = plan(build_candidates(raw), 1.0, parse_slo_string("ttft_p99_ms=1000"),
                  settings=SearchSettings(min_requests=200, min_tail=2, max_iterations=2))
    (cand,) = result.ranked
    assert cand.status == "misses_slo"
    assert re.search(rf"closest: (\d+) request\(s\) refused \(\1 {re.escape(BUDGET)}\)",
                     cand.reason), cand.reason


def test_run_table_notes_count_refusals_by_cause(tmp_path: Path, capsys) -> None:
    scenario = tmp_path / "refusing.toml"
    scenario.write_text(SCENARIO)
    assert main(["run", str(scenario), "--out", str(tmp_path / "out")]) == 0
    text = capsys.readouterr().out
    records = pd.read_parquet(tmp_path / "out" / "requests.parquet")
    n = int((records["status"] == "rejected").sum())
    # uniform 1..10 prompts + 1 output over a budget of 8: prompts 8, 9, 10 are refused
    assert n == int((records["prompt_tokens"] >= 8).sum()) > 0
    assert (f"note: policy=continuous: {n} refused ({n} {BUDGET}; e.g. prompt + output = "
            in text)
    assert "0 unfinished at the horizon" in text
    assert "note: policy=continuous: SLO not met: requests lost (above)" in text


def test_chat_toml_says_what_it_refuses() -> None:
    """chat.toml said 16384 tokens cover its longest prompts; 713 of 1M requests (seed 0)
    have prompt + output above it, 0 of its 1000. Drawing the lengths (no simulation)."""
    import numpy as np

    from simulator.workload.build import build_requests
    from simulator.workload.config import WorkloadConfig

    text = (Path(__file__).resolve().parents[1] / "scenarios" / "chat.toml").read_text()
    assert "713 of 1,000,000" in text and "covers this traffic's longest" not in text
    raw = tomllib.loads(text)["workload"]
    counts = []
    for n in (1000, 1_000_000):
        cfg = WorkloadConfig.from_dict({**raw, "rate": 10.0, "num_requests": n})
        t = build_requests(cfg, np.random.default_rng(0), None).table
        counts.append(int((t["prompt_tokens"] + t["output_tokens"] > 16384).sum()))
    assert counts == [0, 713]


@pytest.mark.parametrize("rate", [1e9])
def test_an_absurd_target_rate_returns_with_the_limit(rate: float) -> None:
    """plan --rate 1e9 never returned (a cluster check of ~10^8 replicas); now the
    candidate is infeasible with the replicas it would need and the limit."""
    raw = tomllib.loads(SCENARIO)
    raw["policy"]["max_num_batched_tokens"] = 64  # nothing refused
    settings = SearchSettings(min_requests=200, min_tail=2, max_iterations=2)
    result = plan(build_candidates(raw), rate, parse_slo_string("ttft_p99_ms=1000"),
                  settings=settings)
    (cand,) = result.ranked
    assert cand.status == "infeasible" and cand.replicas is None
    need = -(-rate // cand.max_rate_rps)
    assert f"needs {int(need):,} replicas" in cand.reason
    assert "more than the limit of 1,024" in cand.reason
    assert settings.max_replicas == 1024


def test_plan_reports_progress(tmp_path: Path, capsys) -> None:
    raw = tomllib.loads(SCENARIO)
    raw["policy"]["max_num_batched_tokens"] = 64
    calls: list[tuple[int, int, int]] = []
    plan(build_candidates(raw), 5.0, parse_slo_string("ttft_p99_ms=1000"),
         settings=SearchSettings(min_requests=200, min_tail=2, max_iterations=2),
         progress=lambda *a: calls.append(a))
    points = [c[0] for c in calls]
    assert points == sorted(points) and calls[-1][1:] == (1, 1)
    assert calls[-1][0] == max(points) >= 3  # probe, low rate, a cluster check at least
    scenario = tmp_path / "p.toml"
    scenario.write_text(SCENARIO.replace("max_num_batched_tokens = 8",
                                         "max_num_batched_tokens = 64"))
    assert main(["plan", str(scenario), "--rate", "5", "--json", "--min-requests", "200",
                 "--min-tail", "2", "--max-iterations", "2", "--workers", "1",
                 "--out", str(tmp_path / "plan")]) == 0
    out = capsys.readouterr()
    assert "plan: 1/1 candidates done" in out.err
    assert "candidates done" not in out.out and out.out.lstrip().startswith("{")
