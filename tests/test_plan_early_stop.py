"""A plan's point stops once its SLO verdict is a fail (simulator/capacity/early_stop.py).

- the rule: how many values over a target decide a percentile, by hand and against numpy;
- the watch on hand-made requests (100 requests at P99: the 2nd over decides);
- the whole plan with and without the early stop, on a small real scenario in one run:
  the same points in the same order, each with the same pass/fail, the same plan, and
  every reported figure from a run to the end.
"""

from __future__ import annotations

import json
import math
import tomllib
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pandas as pd
import pytest
from helpers import tiny_plan_scenario

from servesim.cli import main
from simulator.capacity import SearchSettings, build_candidates, plan
from simulator.capacity.early_stop import (
    DECIDED,
    Decided,
    SLOWatch,
    bounded_job,
    decided_summary,
    fail_threshold,
    verdict_job,
)
from simulator.capacity.search import at_rate, cluster_job, passes, step_log_for, summary_job
from simulator.slo import parse_slo_string

DISPATCH = __import__("simulator.capacity.dispatch", fromlist=["summary_job"])


def test_the_threshold_by_hand() -> None:
    # P99 of n values is interpolated at index 0.99 * (n - 1), at least v[floor(that)]:
    # n = 100 -> index 98.01, v[98] is the 2nd largest, so 2 values over decide it
    assert fail_threshold(100, 99) == 2
    assert fail_threshold(10_000, 99) == 101  # index 9899.01: the 101st largest
    assert fail_threshold(101, 99) == 3  # index 99 exactly: taken a hair low, v[98]
    assert fail_threshold(1, 99) == 1
    assert fail_threshold(10, 50) == 6  # index 4.5: v[4], the 6th largest


@pytest.mark.parametrize("q", [50.0, 90.0, 95.0, 99.0, 99.9, 100.0])
def test_the_threshold_always_decides_numpys_percentile(q: float) -> None:
    rng = np.random.default_rng(3)
    target = 100.0
    for n in range(1, 400):
        need = fail_threshold(n, q)
        assert 1 <= need <= n
        below = rng.uniform(0, target, n - need)
        below[: len(below) // 2] = target  # ties at the target itself are "met"
        over = np.nextafter(target, np.inf) + rng.uniform(0, 1e-9, need)
        assert np.percentile(np.concatenate([below, over]), q) > target, (n, need)
        # never more than one above n - floor(q/100 (n-1)) (the hair low, at whole indexes)
        assert need - (n - math.floor(q / 100 * (n - 1))) in (0, 1)


def _seq(i: int, ttft_ms: float, out: int = 10, tpot_ms: float = 10.0,
         reason: str = "") -> SimpleNamespace:
    first = ttft_ms / 1000.0
    return SimpleNamespace(request_id=i, reason=reason, output_tokens=out,
                           num_generated=0 if reason else out, first_token_s=first,
                           finish_s=first + (out - 1) * tpot_ms / 1000.0)


def _table(n: int, out: int = 10) -> pd.DataFrame:
    return pd.DataFrame({"output_tokens": np.full(n, out)})


def test_the_watch_on_a_hand_case() -> None:
    slo = parse_slo_string("ttft_p99_ms=500,tpot_p99_ms=50")
    watch = SLOWatch(slo, _table(100))
    assert watch.need == {"ttft": 2, "tpot": 2}
    for i in range(50):
        watch(_seq(i, 400.0), 0.0)
    watch(_seq(50, 900.0), 0.0)  # one over: p99 can still be met
    watch(_seq(51, 500.0), 0.0)  # at the target is met
    with pytest.raises(Decided) as got:
        watch(_seq(52, 700.0), 0.0)  # the 2nd over of 100: p99 >= 700 ms, a fail
    d = got.value
    assert (d.after, d.n, d.key, d.value_ms) == (53, 100, "p99_ttft_ms", 700.0)
    summary = decided_summary(slo, d)
    assert not passes(summary) and summary[DECIDED]["after_requests"] == 53
    assert summary["slo"]["p99_ttft_ms"] == {"target": 500.0, "value": 700.0, "met": False,
                                             "lower_bound": True}


def test_the_watch_counts_tpot_over_requests_that_have_one_and_stops_on_a_refusal() -> None:
    slo = parse_slo_string("tpot_p99_ms=50")
    table = pd.DataFrame({"output_tokens": [1] * 50 + [10] * 100})
    watch = SLOWatch(slo, table)
    assert watch.need == {"tpot": 2}  # 100 requests have a TPOT
    watch(_seq(0, 100.0, out=1), 0.0)
    watch(_seq(1, 100.0, tpot_ms=60.0), 0.0)
    with pytest.raises(Decided, match="tpot 50 ms"):
        watch(_seq(2, 100.0, tpot_ms=51.0), 0.0)
    refused = SLOWatch(slo, table)
    with pytest.raises(Decided, match="lost") as got:
        refused(_seq(0, float("nan"), reason="too_long: 9000 tokens"), 0.0)
    assert not passes(decided_summary(slo, got.value))


TINY = tiny_plan_scenario("tiny-early-stop", 4)


def _plan_with_log(monkeypatch: pytest.MonkeyPatch, slo_text: str, target: float,
                   **settings: Any) -> tuple[Any, list[tuple[Any, ...]]]:
    """The plan, and (candidate, rate, replicas, requests, passed, decided) per point."""
    log: list[tuple[Any, ...]] = []

    def logged(job: Any) -> Any:
        def run(item: Any) -> Any:
            out = job(item)
            point = item[0] if isinstance(item, tuple) else item
            summary = out[0] if isinstance(out, tuple) else out
            log.append((point["hardware"]["gpu"], point["policy"]["name"],
                        point["workload"]["rate"], point["cluster"]["replicas"],
                        point["workload"]["num_requests"], passes(summary),
                        DECIDED in summary))
            return out
        return run

    for name, job in (("summary_job", summary_job), ("verdict_job", verdict_job),
                      ("bounded_job", bounded_job), ("cluster_job", cluster_job)):
        monkeypatch.setattr(DISPATCH, name, logged(job))
    result = plan(build_candidates(tomllib.loads(TINY)), target, parse_slo_string(slo_text),
                  settings=SearchSettings(min_requests=400, min_tail=4, **settings))
    return result, log


@pytest.mark.parametrize("target, slo_text", [(150.0, "ttft_p99_ms=60"),
                                              (420.0, "ttft_p99_ms=40,tpot_p99_ms=9")])
def test_the_plan_and_every_verdict_are_the_same_without_the_early_stop(
        target: float, slo_text: str, monkeypatch: pytest.MonkeyPatch) -> None:
    fast, fast_log = _plan_with_log(monkeypatch, slo_text, target)
    full, full_log = _plan_with_log(monkeypatch, slo_text, target, early_stop=False)
    strip = [row[:-1] for row in fast_log]  # same points, same order, same pass/fail
    assert strip == [row[:-1] for row in full_log]
    decided = sum(row[-1] for row in fast_log)
    assert decided > 0 and not any(row[-1] for row in full_log)
    assert all(not row[-2] for row in fast_log if row[-1])  # only fails are decided
    assert sum(r.decided_early for r in fast.ranked) == decided
    a, b = fast.to_json(), full.to_json()
    for c in a["candidates"] + b["candidates"]:
        c.pop("decided_early"), c.pop("requests_simulated")
    assert sum(r.requests_simulated for r in fast.ranked) < sum(
        r.requests_simulated for r in full.ranked)
    a["settings"].pop("early_stop"), b["settings"].pop("early_stop")
    assert a == b  # best, Pareto front, every candidate and every reported figure
    for r in fast.ranked:
        assert DECIDED not in r.at_target


def test_a_point_that_passes_runs_to_the_end_and_gives_the_summary_jobs_figures() -> None:
    raw = tomllib.loads(TINY)
    raw["hardware"]["gpu"], raw["policy"]["name"] = "h100-sxm", "continuous"
    (cand,) = build_candidates(raw)
    slo = parse_slo_string("ttft_p99_ms=60")
    point = at_rate({**cand.point, "slo": slo.as_dict()}, 20.0, 400,
                    step_log=step_log_for(slo, False))
    full = summary_job(point)
    assert passes(full) and verdict_job(point) == full
    heavy = at_rate({**cand.point, "slo": slo.as_dict()}, 2000.0, 400,
                    step_log=step_log_for(slo, False))
    decided = verdict_job(heavy)
    assert not passes(summary_job(heavy)) and not passes(decided)
    assert decided[DECIDED]["after_requests"] < 400


@pytest.mark.parametrize("flag, early, sized", [((), True, True),
                                                (("--no-early-stop",), False, True),
                                                (("--full-search",), False, False)])
def test_cli_flags_and_the_text_line(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                     flag: tuple[str, ...], early: bool, sized: bool) -> None:
    scenario = tmp_path / "tiny.toml"
    scenario.write_text(TINY)
    args = ["plan", str(scenario), "--out", str(tmp_path / "o"), "--workers", "1",
            "--min-requests", "400", "--min-tail", "4", "--rate", "150", "--slo",
            "ttft_p99_ms=60", "--no-cache", "--gpus", "h100-sxm", *flag]
    assert main(args) == 0
    text = capsys.readouterr().out
    data = json.loads((tmp_path / "o" / "plan.json").read_text())
    assert (data["settings"]["early_stop"], data["settings"]["stop_when_sized"]) == (early,
                                                                                    sized)
    decided = sum(c["decided_early"] for c in data["candidates"])
    assert (decided > 0) == early
    assert (f"({decided} stopped once their verdict was a fail" in text) == early
