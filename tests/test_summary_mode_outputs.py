"""A point that kept no step log (``[run] step_log`` "summary" or "none") writes no
steps.parquet and its cache entry stores no steps table, whether the point was computed
or read back from a sweep's cache; a point that kept it still writes it from either."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pandas as pd

from simulator.cached_runs import run_sweep
from simulator.executors import SerialExecutor
from simulator.point_cache import PointCache
from simulator.runner import kept_step_log, write_results
from simulator.scenario import apply_overrides, expand_sweep, load_scenario

Point = tuple[dict[str, Any], dict[str, Any]]


def _point(mode: str) -> Point:
    raw = apply_overrides(load_scenario("scenarios/chat.toml"), [
        "workload.num_requests=40", "workload.rate=12", "policy.name='continuous'",
        f"run.step_log='{mode}'"])
    (labels, point), = expand_sweep(raw)
    return labels, point


def _sweep_twice(points: list[Point], folder: Path) -> tuple[list[Any], list[Any]]:
    """The results computed, then the same read back from the cache."""
    cache = PointCache(folder / "cache")
    fresh = run_sweep(points, SerialExecutor(), cache)
    assert (cache.computed, cache.reused) == (len(points), 0)
    cached = run_sweep(points, SerialExecutor(), cache)
    assert (cache.computed, cache.reused) == (len(points), len(points))
    return fresh, cached


def _written(results: list[Any], out: Path) -> set[str]:
    """Names write_results returned; checks the folder and the manifest say the same."""
    names = {p.name for p in write_results(results, out)}
    on_disk = {p.name for p in out.iterdir()} - {"manifest.json"}
    manifest = json.loads((out / "manifest.json").read_text())
    assert names == on_disk == set(manifest["files"]), (names, on_disk, manifest["files"])
    return names


def test_a_point_without_step_log_writes_no_steps_fresh_or_cached(tmp_path: Path) -> None:
    for mode in ("summary", "none"):
        fresh, cached = _sweep_twice([_point(mode)], tmp_path / mode)
        assert not list((tmp_path / mode / "cache").glob("*.steps.parquet"))
        for name, results in (("fresh", fresh), ("cached", cached)):
            assert not kept_step_log(results[0])
            assert results[0].summary["step_log"] == mode
            assert len(results[0].result.steps) == 0
            assert _written(results, tmp_path / mode / name) == {
                "summary.json", "requests.parquet"}, (mode, name)


def test_a_point_with_its_step_log_writes_the_same_steps_fresh_or_cached(
        tmp_path: Path) -> None:
    fresh, cached = _sweep_twice([_point("full")], tmp_path)
    assert len(list((tmp_path / "cache").glob("*.steps.parquet"))) == 1
    tables = []
    for name, results in (("fresh", fresh), ("cached", cached)):
        assert kept_step_log(results[0])
        assert "steps.parquet" in _written(results, tmp_path / name)
        tables.append(pd.read_parquet(tmp_path / name / "steps.parquet"))
    assert len(tables[0]) > 0
    pd.testing.assert_frame_equal(tables[0], tables[1])


def test_a_mixed_sweep_writes_the_steps_of_the_point_that_kept_them(tmp_path: Path) -> None:
    # point 0 keeps its step log, point 1 keeps none: one steps.parquet, rows of point 0
    fresh, cached = _sweep_twice([_point("full"), _point("summary")], tmp_path)
    for name, results in (("fresh", fresh), ("cached", cached)):
        assert "steps.parquet" in _written(results, tmp_path / name)
        steps = pd.read_parquet(tmp_path / name / "steps.parquet")
        assert set(steps["point"]) == {0}
        assert len(steps) == len(fresh[0].result.steps)
