"""Capacity-planning parts: the sample-size rule, the Pareto front, prices, candidates."""

from __future__ import annotations

from pathlib import Path

import pytest

from simulator.capacity import SearchSettings, build_candidates, load_prices, pareto_front
from simulator.capacity.prices import parse_price_overrides, price_table
from simulator.errors import ConfigError
from simulator.slo import SLO


def test_sample_size_rule() -> None:
    rule = SearchSettings()
    from simulator.capacity import sample_size

    assert sample_size(SLO(ttft_ms=1), rule) == 10_000  # 100 beyond the P99
    assert sample_size(SLO(ttft_ms=1, percentile=90), rule) == 1000  # 100 beyond P90
    assert sample_size(SLO(ttft_ms=1, percentile=99.9), rule) == 100_000
    assert sample_size(SLO(mean_queue_ms=5), rule) == 1000  # a mean needs no tail


def test_pareto_front() -> None:
    pts = [(3.0, 10.0), (1.0, 50.0), (2.0, 20.0), (2.5, 30.0), (1.0, 60.0), (4.0, 10.0)]
    assert pareto_front(pts) == [1, 2, 0]
    assert pareto_front([]) == []


def test_shipped_prices_are_dated_and_cover_the_catalogue() -> None:
    table = load_prices()
    assert table.date == "2026-11" and "assumed" in table.source
    for gpu in ("a100-80gb", "h100-sxm", "h200", "l40s", "b200"):
        assert (table.price(gpu) or 0) > 0


def test_price_overrides_and_files(tmp_path: Path) -> None:
    assert parse_price_overrides("h100=2.5, h200=3") == {"h100-sxm": 2.5, "h200": 3.0}
    assert price_table("h200=1").price("h200") == 1.0
    path = tmp_path / "p.json"
    path.write_text('{"usd_per_gpu_hour": {"l40s": 0.5}, "date": "2026-01", "source": "me"}')
    assert price_table(str(path)).price("l40s") == 0.5
    with pytest.raises(ConfigError, match="'x'"):
        parse_price_overrides("h100=x")
    with pytest.raises(ConfigError, match="must be a number >= 0"):
        parse_price_overrides("h100=-1")


def test_candidates_from_lists_and_flags() -> None:
    raw = {"hardware": {"gpu": ["h100-sxm", "h200"]}, "workload": {"rate": [1.0, 2.0]},
           "cluster": {"replicas": [1, 2]}}
    cands = build_candidates(raw, {"tp": [1, 2], "policies": ["continuous", "chunked"]})
    assert len(cands) == 8  # rate and replicas are the planner's, not candidates
    assert cands[0].name == "h100-sxm x1 bf16 continuous"
    assert all(c.infeasible is None for c in cands)


def test_a_deployment_that_cannot_run_is_kept_as_infeasible() -> None:
    raw = {"model": {"name": "llama-3.1-70b", "weight_dtype": "fp8"},
           "hardware": {"gpu": ["l40s", "h200"]}}
    cands = build_candidates(raw)
    assert cands[0].infeasible and cands[1].infeasible is None


def test_closed_loop_cannot_be_planned() -> None:
    with pytest.raises(ConfigError, match="closed"):
        build_candidates({"workload": {"arrival": "closed", "concurrency": 4}})
