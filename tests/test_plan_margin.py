"""servesim plan --record-margin: targets tightened by servesim's published track record,
worked by hand; the planner sizes against them; the command's report and plan.json."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

import pytest
from test_capacity_plan import FAST, TINY

from servesim.cli import main
from simulator import track_record as tr
from simulator.capacity import build_candidates, plan
from simulator.capacity.headroom import headroom, headroom_lines
from simulator.capacity.margin import (
    TargetMargin,
    check_cover,
    margin_text,
    margined_slo,
    record_limits,
    under_reading,
)
from simulator.capacity.results import CandidateResult
from simulator.errors import ConfigError
from simulator.slo import SLO, parse_slo_string
from simulator.track_record import FigureRecord, point_record

ERRORS = (-0.3, -0.2, -0.1, 0.0, 0.1)  # five runs' signed errors, simulated / published - 1


def record(figure: str, errors: tuple[float, ...], limit: float | None = None
           ) -> FigureRecord:
    return FigureRecord(figure, (("load", "rate"),), len(errors), 0, None, None,
                        tuple(sorted(errors)), limit)


@pytest.mark.parametrize("cover, under", [
    (1.0, -0.3),  # every run: the worst under-reading
    (0.8, -0.2),  # 4 of 5 runs read -20% or more
    (0.6, -0.1),  # 3 of 5
    (0.5, -0.1),  # floor(2.5) + 1 = the 3rd: 3 of 5 >= half
    (0.2, 0.1),  # 1 of 5 read +10% or more
])
def test_under_reading_by_hand(cover: float, under: float) -> None:
    assert under_reading(ERRORS, cover) == under
    assert under_reading(list(reversed(ERRORS)), cover) == under  # order does not matter
    share = sum(e >= under for e in ERRORS) / len(ERRORS)
    assert share >= cover  # it covers what it says
    assert under_reading((), 0.8) is None


def test_targets_tightened_by_their_records_never_loosened() -> None:
    slo = SLO(ttft_ms=500, tpot_ms=50, itl_ms=40, e2el_ms=10_000, percentile=95,
              mean_queue_ms=100)
    ttft = record("ttft", ERRORS, 500.0)  # at 0.8: -20% -> x 0.8; runs published <= 500 ms
    tpot = record("tpot", (-0.1, -0.05, 0.0, 0.02, 0.3))  # at 0.8: -5% -> x 0.95
    planned, margins = margined_slo(slo, [ttft, tpot], 0.8)
    assert planned.ttft_ms == pytest.approx(400)
    assert planned.tpot_ms == pytest.approx(47.5)
    assert planned.itl_ms == pytest.approx(38)  # ITL reads the TPOT record
    assert planned.e2el_ms == pytest.approx(8_000)  # the tighter of TTFT's and TPOT's
    assert margins["e2el"].figure == "ttft"
    assert planned.mean_queue_ms == pytest.approx(80)  # queueing is part of TTFT
    assert planned.percentile == 95
    # a record that reads high on 80% of its runs leaves its targets as given
    high, _ = margined_slo(slo, [record("ttft", (0.05, 0.1, 0.2, 0.3, 0.4)), tpot], 0.8)
    assert high.ttft_ms == 500
    # no record (a CPU deployment): the SLO as given
    same, none = margined_slo(slo, [], 0.8)
    assert same == slo and all(m.factor == 1.0 and m.figure is None for m in none.values())
    text = margin_text(margins, slo, 0.8)
    # a P95 target with no tail record here reads the mean's, and says so
    assert "P95 ttft <= 400 ms (500 less 20.0%: TTFT (its mean or median: no run like it " \
        "published a tail) read -20.0% or more on 80% of 5 runs [any stack, any GPU, " \
        "arrivals at a rate, measured within 500 ms])" in text
    assert "mean queue <= 80 ms" in text
    assert TargetMargin.from_json("ttft", margins["ttft"].to_json()) == margins["ttft"]


def test_the_runs_a_margin_reads_are_those_published_within_the_target() -> None:
    limits = record_limits(SLO(ttft_ms=500, tpot_ms=50, itl_ms=40))
    assert {k: limits[k] for k in ("ttft", "tpot")} == {"ttft": 500, "tpot": 50}
    assert record_limits(SLO(itl_ms=40, e2el_ms=9000)) == {  # ITL bounds TPOT, and its tails
        "tpot": 40, "tpot_p99": 40, "tpot_p90": 40, "itl_p99": 40, "itl_p95": 40,
        "itl_p90": 40}
    # two runs, one overloaded: published mean TTFT 9 s, read -70%; the other 120 ms, -5%
    groups = [tr.Group("vllm-v1", "h100-sxm", "several", "rate", "ttft", (-0.7, -0.05),
                       (9000.0, 120.0))]
    every = tr.track_record(groups, "vllm-v1", "h100-sxm", "rate", min_cases=1, gpus=2)[0]
    kept = tr.track_record(groups, "vllm-v1", "h100-sxm", "rate", min_cases=1, gpus=2,
                           limits={"ttft": 500})[0]
    assert every.errors == (-0.7, -0.05) and kept.errors == (-0.05,)
    assert (every.limit, kept.limit) == (None, 500)
    assert under_reading(kept.errors, 1.0) == -0.05  # a 500 ms plan: x 0.95, not x 0.3


@pytest.mark.parametrize("bad", [0, 1.5, -0.2, float("nan"), True, "0.8"])
def test_cover_must_be_a_share(bad: object) -> None:
    with pytest.raises(ConfigError, match="must be a share in"):
        check_cover(bad)


def _raw(tp: int) -> dict:
    raw = tomllib.loads(TINY)
    raw["hardware"]["tp"] = tp
    return raw


def test_the_planner_sizes_each_candidate_against_its_own_margin() -> None:
    slo = parse_slo_string("ttft_p99_ms=100,tpot_p99_ms=20")
    candidates = build_candidates(_raw(2))
    given = plan(candidates, 150, slo, settings=FAST)
    margined = plan(candidates, 150, slo, settings=FAST, record_margin=0.8)
    assert given.record_margin is None and given.ranked[0].slo_planned is None
    best = margined.ranked[0]
    # the factors the shipped track record gives this deployment (no stack, an H100, two
    # GPUs a replica, arrivals at a rate), read here from the record itself: P99 targets,
    # so each latency's P99 record where runs like it published one, else its mean's
    factors = {}
    for r in point_record(candidates[0].point, "h100-sxm", 150, limits=record_limits(slo),
                          tails=True):
        u = under_reading(r.errors, 0.8)
        assert u is not None
        factors[r.figure] = min(1.0, 1.0 + u)
    factors = {m: factors.get(f"{m}_p99", factors[m]) for m in ("ttft", "tpot")}
    assert factors["ttft"] < 1.0  # the record does tighten this one
    checks = best.at_target["slo"]
    assert checks["p99_ttft_ms"]["target"] == pytest.approx(100 * factors["ttft"])
    assert checks["p99_tpot_ms"]["target"] == pytest.approx(20 * factors["tpot"])
    assert best.slo_planned == {"ttft_ms": pytest.approx(100 * factors["ttft"]),
                                "tpot_ms": pytest.approx(20 * factors["tpot"]),
                                "percentile": 99.0}
    assert best.margins["ttft"]["cases"] >= 10
    # tighter targets never need fewer replicas
    assert (best.replicas or 0) >= (given.ranked[0].replicas or 0)
    assert margined.to_json()["record_margin"] == 0.8


def test_headroom_under_the_targets_as_given() -> None:
    best = CandidateResult("c", {}, "h100-sxm", 1, "meets_slo", at_target={"slo": {
        "p99_ttft_ms": {"target": 400.0, "value": 300.0, "met": True}}})
    assert headroom(best) == {"p99_ttft_ms": pytest.approx(0.25)}  # of the planned 400
    given = SLO(ttft_ms=500)
    assert headroom(best, given) == {"p99_ttft_ms": pytest.approx(0.4)}  # of 500
    lines = headroom_lines(best, 10, [record("ttft", (0.5,))], given)
    assert lines == ["headroom of c at 10 req/s: P99 TTFT 300 ms of 500 (40%)"]  # no note


def _cli(tmp_path: Path, *extra: str) -> list[str]:
    scenario = tmp_path / "tiny.toml"
    raw = TINY.replace("[hardware]\ngpu = \"h100-sxm\"", "[hardware]\ngpu = \"h100-sxm\"\ntp = 2")
    scenario.write_text(raw)
    return ["plan", str(scenario), "--out", str(tmp_path / "o"), "--workers", "1",
            "--min-tail", "10", "--max-iterations", "5", "--rate", "150", *extra]


def test_cli_record_margin(tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    assert main(_cli(tmp_path, "--record-margin", "0.8")) == 0
    text = capsys.readouterr().out
    assert "sized against the targets less servesim's error on published runs like each " \
           "candidate (--record-margin 0.8" in text
    assert "P99 ttft <= " in text and "TTFT read -" in text
    assert "headroom of" in text and "of 100 (" in text  # under the target as given
    data = json.loads((tmp_path / "o" / "plan.json").read_text())
    assert data["record_margin"] == 0.8
    best = data["candidates"][0]
    assert best["slo_planned"]["ttft_ms"] < 100 and best["margins"]["ttft"]["factor"] < 1
    assert main(_cli(tmp_path, "--record-margin", "1.5")) == 2
    assert "--record-margin = 1.5: must be a share in (0, 1]" in capsys.readouterr().err


def test_the_margins_script_prints_the_records_under_readings(capsys) -> None:  # type: ignore[no-untyped-def]
    import importlib
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    script = importlib.import_module("benchmarks.record_margins")
    assert script.main(["--ttft", "500", "--tpot", "50"]) == 0
    text = capsys.readouterr().out
    scope = {"gpu_class": "data-centre", "parallel": "several", "load": "rate"}
    groups = tr.read_groups()
    every = tr.figure_record(groups, "ttft", scope)
    within = tr.figure_record(groups, "ttft", scope, 500.0)
    line = next(x for x in text.splitlines()
                if "TTFT" not in x and "several GPUs, arrivals at a rate" in x
                and "data-centre" in x)  # the first such line is TTFT's
    assert f"{len(every.errors):4d} runs {under_reading(every.errors, 0.8):+7.1%}" in line
    assert f"{len(within.errors):4d} runs {under_reading(within.errors, 0.8):+7.1%}" in line


def test_the_target_of_an_slo_check_by_its_key() -> None:
    from simulator.metrics_slo import check_target

    slo = SLO(ttft_ms=500, e2el_ms=9000, percentile=99.9, mean_queue_ms=80)
    assert check_target(slo, "p99.9_ttft_ms") == 500  # a fractional percentile's key
    assert check_target(slo, "p99_e2el_ms") == 9000
    assert check_target(slo, "mean_queue_ms") == 80
    assert check_target(slo, "p99_tpot_ms") is None  # no TPOT target set
