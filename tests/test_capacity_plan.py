"""servesim plan: monotone answers, a known M/D/1 answer, backends agree, resume, bad input."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path
from typing import Any

import pytest

from servesim.cli import main
from simulator.capacity import SearchSettings, build_candidates, plan
from simulator.executors import SerialExecutor, open_executor
from simulator.point_cache import PointCache
from simulator.slo import SLO, parse_slo_string
from simulator.track_record import FIGURES, MIN_CASES

TINY = """
name = "tiny-plan"
seed = 1
[hardware]
gpu = "h100-sxm"
[policy]
name = "continuous"
max_num_seqs = 32
[workload]
arrival = "poisson"
rate = 100.0
prompt = { dist = "uniform", low = 16, high = 64 }
output = { dist = "uniform", low = 4, high = 32 }
[cost]
form = "linear"
step_s = 0.004
decode_seq_s = 0.0002
prefill_token_s = 0.00002
[slo]
ttft_p99_ms = 100
"""
FAST = SearchSettings(min_requests=1000, min_tail=10, max_iterations=6)


def _raw(**sections: dict[str, Any]) -> dict[str, Any]:
    raw = tomllib.loads(TINY)
    for name, table in sections.items():
        raw.setdefault(name, {}).update(table)
    return raw


def _replicas(target: float, slo: str = "ttft_p99_ms=100", **sections: Any) -> int | None:
    result = plan(build_candidates(_raw(**sections)), target, parse_slo_string(slo),
                  settings=FAST)
    return result.ranked[0].replicas if result.best else None


@pytest.mark.parametrize("low, high", [(60.0, 140.0), (140.0, 400.0)])
def test_a_higher_rate_never_needs_fewer_replicas(low: float, high: float) -> None:
    assert (_replicas(low) or 0) <= (_replicas(high) or 0)


def test_a_looser_slo_never_needs_more_replicas() -> None:
    counts = [_replicas(300.0, f"ttft_p99_ms={ms}") for ms in (15, 30, 100)]
    assert all(c is not None for c in counts)
    assert counts == sorted(counts, reverse=True)  # type: ignore[type-var]


def test_a_faster_gpu_never_needs_more_replicas() -> None:
    slow = _replicas(300.0, cost={"time_scale": 1.0})
    fast = _replicas(300.0, cost={"time_scale": 0.5})
    assert slow is not None and fast is not None and fast <= slow


def test_md1_max_rate_matches_the_formula() -> None:
    # Batch size 1, 5 steps of 20 ms per request: deterministic service S = 0.1 s.
    # M/D/1: Wq = rho S / (2 (1 - rho)); Wq = 150 ms gives rho = 2 Wq / (S + 2 Wq) = 0.75.
    # Near saturation the answer is least sensitive to the noise of a sample mean wait
    # (d rho / rho = dWq / Wq * S / (S + 2 Wq)); 12k requests put it within ~4%.
    raw = _raw(policy={"name": "static", "batch_size": 1},
               workload={"prompt": {"dist": "fixed", "tokens": 8},
                         "output": {"dist": "fixed", "tokens": 5}},
               cost={"step_s": 0.02, "decode_seq_s": 0.0, "prefill_token_s": 0.0})
    # stop_when_sized=False: bisect to rel_tol (by default the search stops as soon as the
    # replica count for the target is certain, and max_rate_rps is then a coarser bound)
    settings = SearchSettings(min_requests=12_000, max_iterations=8, rel_tol=0.01,
                              stop_when_sized=False)
    result = plan(build_candidates(raw), 3.0, SLO(mean_queue_ms=150), settings=settings)
    s, wq = 0.1, 0.150
    expected = 2 * wq / (s + 2 * wq) / s  # 7.5 req/s
    assert result.ranked[0].max_rate_rps == pytest.approx(expected, rel=0.05)
    assert result.ranked[0].saturated_rps == pytest.approx(1 / s, rel=0.01)


def test_backends_give_the_same_plan(tmp_path: Path) -> None:
    raw = _raw(hardware={"gpu": ["h100-sxm", "a100-80gb"]},
               policy={"name": ["continuous", "static"], "batch_size": 4})
    cands = build_candidates(raw)
    slo = parse_slo_string("ttft_p99_ms=100")

    def run(ex: Any) -> dict[str, Any]:
        data = plan(cands, 150.0, slo, settings=FAST, executor=ex).to_json()
        return {k: v for k, v in data.items() if k not in ("points_computed",)}

    serial = run(SerialExecutor())
    with open_executor(workers=2) as pool:
        assert run(pool) == serial
    pytest.importorskip("dask.distributed", reason="dask[distributed] is not installed "
                        "(pip install -e '.[distributed]')")
    from simulator.executors import DaskExecutor

    dask = DaskExecutor("local", workers=2, processes=False)
    try:
        assert run(dask) == serial
    finally:
        dask.close()


def test_interrupted_plan_resumes_from_the_cache(tmp_path: Path) -> None:
    cands = build_candidates(_raw(hardware={"gpu": ["h100-sxm", "a100-80gb"]}))
    slo = parse_slo_string("ttft_p99_ms=100")
    first = plan(cands, 150.0, slo, settings=FAST, cache=PointCache(tmp_path))
    total = first.computed
    assert total > 4 and first.reused == 0
    for path in sorted(tmp_path.glob("*.json"))[:3]:
        path.unlink()
    again = plan(cands, 150.0, slo, settings=FAST, cache=PointCache(tmp_path))
    assert (again.computed, again.reused) == (3, total - 3)
    assert again.to_json()["candidates"] == first.to_json()["candidates"]


def test_unmeetable_slo_names_the_closest_candidate() -> None:
    raw = _raw(hardware={"gpu": ["h100-sxm"]}, cost={"time_scale": [1.0, 2.0]})
    result = plan(build_candidates(raw), 100.0, parse_slo_string("ttft_p99_ms=1"),
                  settings=FAST)
    assert result.best is None
    closest = result.closest
    assert closest is not None and closest.labels["time_scale"] == 1.0
    assert closest.miss is not None and closest.miss["key"] == "p99_ttft_ms"
    assert closest.miss["factor"] > 1


def _cli(tmp_path: Path, *extra: str) -> list[str]:
    scenario = tmp_path / "tiny.toml"
    scenario.write_text(TINY)
    return ["plan", str(scenario), "--out", str(tmp_path / "o"), "--workers", "1",
            "--min-tail", "10", "--max-iterations", "5", *extra]


def test_cli_plan_json_and_text(tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    assert main(_cli(tmp_path, "--rate", "150", "--json", "--policies", "continuous,chunked",
                     "--prices", "h100-sxm=2")) == 0
    data = json.loads(capsys.readouterr().out)  # stdout holds only the JSON
    assert data["best"] and data["pareto"] and data["target_rps"] == 150
    best = data["candidates"][0]
    assert best["usd_per_hour"] == pytest.approx(2.0 * best["num_gpus"])
    assert (tmp_path / "o" / "plan.json").is_file()
    # the best candidate's track record on published runs (simulator/track_record.py)
    # (the headline's figures, then the tails published runs like it reported: P99s of
    # vLLM's Poisson runs on one data-centre GPU)
    assert [r["figure"] for r in data["track_record"]] == [
        *(f for f, _ in FIGURES), "ttft_p99", "tpot_p99", "itl_p99"]
    assert all(r["cases"] >= MIN_CASES for r in data["track_record"])
    # the best candidate's unused share of each target: it meets them all
    assert data["headroom"] and all(0 <= v < 1 for v in data["headroom"].values())
    assert main(_cli(tmp_path, "--slo", "ttft_p99_ms=1")) == 0
    text = capsys.readouterr().out
    assert "no candidate meets the SLO" in text and "closest:" in text and "p99_ttft_ms" in text
    assert all(line.count("closest:") <= 1 for line in text.splitlines())  # said once
    assert "(docs/metrics.md, \"Track record\"), for the closest candidate, " in text


@pytest.mark.parametrize("extra, fragment", [
    (("--slo", "ttft_p99_ms=abc"), "'abc' is not a number"),
    (("--slo", "ttft_p99=5"), "--slo.ttft_p99"),
    (("--gpus", "h100-sxm,h999"), "'h999'"),
    (("--policies", "fancy"), "'fancy'"),
    (("--dtypes", "fp7"), "'fp7'"),
    (("--tp", "one"), "--tp 'one'"),
    (("--rate", "0"), "--rate = 0"),
    (("--prices", "h999=2"), "h999"),
])
def test_cli_bad_input_exits_2_naming_it(tmp_path: Path, capsys, extra: tuple[str, ...],  # type: ignore[no-untyped-def]
                                         fragment: str) -> None:
    assert main(_cli(tmp_path, *extra)) == 2
    err = capsys.readouterr().err
    assert "servesim: error:" in err and fragment in err


@pytest.mark.parametrize("timed", [True, False])
def test_cli_plan_with_a_trace_shorter_than_the_sample(tmp_path: Path, capsys,  # type: ignore[no-untyped-def]
                                                       timed: bool) -> None:
    # 300 rows where P99 with 10 beyond it asks for 1,000: before, every point failed
    # ("workload.num_requests = 1000: ... has only 300 usable requests"); a lengths-only
    # trace failed earlier still ("has no arrival times")
    import pandas as pd

    rows = {"num_prefill_tokens": [16 + i % 48 for i in range(300)],
            "num_decode_tokens": [4 + i % 28 for i in range(300)]}
    if timed:
        rows = {"request_id": range(300), "arrival_s": [i * 0.01 for i in range(300)],
                "prompt_tokens": rows["num_prefill_tokens"],
                "output_tokens": rows["num_decode_tokens"]}
    trace = tmp_path / "t.csv"
    pd.DataFrame(rows).to_csv(trace, index=False)
    assert main(_cli(tmp_path, "--rate", "150", "--trace", str(trace), "--json")) == 0, \
        capsys.readouterr().err
    data = json.loads(capsys.readouterr().out)
    assert data["requests_per_point"] == 300 and data["requests_wanted"] == 1000
    assert data["best"] is not None
    assert main(_cli(tmp_path, "--rate", "150", "--trace", str(trace))) == 0
    assert "300 requests per point: every request of the trace, fewer than the 1000" in \
        capsys.readouterr().out


def test_cli_a_best_candidate_without_a_price_is_said(tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    # a CPU has no price in the shipped table: the verdict said "$None" (a TypeError) before
    scenario = tmp_path / "cpu.toml"
    scenario.write_text(TINY.replace('gpu = "h100-sxm"', 'gpu = "cpu"'))
    assert main(["plan", str(scenario), "--out", str(tmp_path / "o"), "--workers", "1",
                 "--min-tail", "10", "--max-iterations", "5", "--rate", "50"]) == 0
    text = capsys.readouterr().out
    assert "best: cpu x1 bf16 continuous, " in text
    assert "no price for cpu (--prices cpu=USD)" in text
    result = plan(build_candidates(tomllib.loads(scenario.read_text())), 50.0,
                  parse_slo_string("ttft_p99_ms=100"), settings=FAST)
    from dashboard.logic.capacity import verdict

    assert "no price for cpu (give one under Prices)" in verdict(result)


def test_cli_a_rate_schedule_is_refused_with_its_peak(tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    # before: the planner's probe rate (1e6 req/s) clashed with the schedule, and the error
    # named that rate, which the user never gave
    scenario = tmp_path / "daily.toml"
    scenario.write_text(TINY.replace("rate = 100.0", "rate_schedule = { start_s = [0, 60], "
                                                     "rate = [5.0, 12.5] }"))
    assert main(["plan", str(scenario), "--out", str(tmp_path / "o"), "--rate", "5"]) == 2
    err = capsys.readouterr().err
    assert "workload.rate_schedule: a plan sizes for one steady request rate" in err
    assert "plan at its peak (--rate 12.5)" in err and "1000000" not in err
