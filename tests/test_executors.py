"""Executors and the point cache: serial, process pool and Dask give the same sweep; an
interrupted sweep resumes from the cache and computes only what is missing."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from servesim.cli import main
from simulator.cached_runs import run_sweep
from simulator.executors import PoolExecutor, SerialExecutor, open_executor
from simulator.point_cache import PointCache, code_version, point_key
from simulator.scenario import expand_sweep

TINY = """
name = "tiny"
seed = 3
[hardware]
gpu = ["h100-sxm", "a100-80gb"]
[policy]
name = ["continuous", "static"]
batch_size = 4
max_num_seqs = 8
[workload]
arrival = "poisson"
rate = [5.0, 20.0]
num_requests = 60
prompt = { dist = "uniform", low = 16, high = 64 }
output = { dist = "uniform", low = 4, high = 32 }
[cost]
form = "linear"
step_s = 0.004
decode_seq_s = 0.0002
prefill_token_s = 0.00002
[slo]
ttft_ms = 200
"""


def _raw() -> dict[str, Any]:
    import tomllib

    return tomllib.loads(TINY)


def _stable(summary: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in summary.items() if k != "sim_wall_s"}


def _sweep(ex: Any, cache: PointCache | None = None) -> list[dict[str, Any]]:
    results = run_sweep(expand_sweep(_raw()), ex, cache or PointCache(None))
    return [_stable(r.summary) for r in results]


def _square(x: int) -> int:
    return x * x


def test_map_keeps_input_order_and_reports_each_result() -> None:
    seen: list[tuple[int, int]] = []
    pool = PoolExecutor(2)
    try:
        out = pool.map(_square, [5, 1, 4, 2], on_done=lambda i, r: seen.append((i, r)))
    finally:
        pool.close()
    assert out == [25, 1, 16, 4]
    assert sorted(seen) == [(0, 25), (1, 1), (2, 16), (3, 4)]


def test_process_pool_matches_serial() -> None:
    serial = _sweep(SerialExecutor())
    with open_executor(workers=2) as ex:
        assert ex.name == "process pool"
        assert _sweep(ex) == serial


def test_dask_local_cluster_matches_serial_and_pool() -> None:
    pytest.importorskip("dask.distributed", reason="dask[distributed] is not installed "
                        "(pip install -e '.[distributed]')")
    from simulator.executors import DaskExecutor

    serial = _sweep(SerialExecutor())
    ex = DaskExecutor("local", workers=2, processes=False)
    try:
        assert ex.workers == 2
        assert _sweep(ex) == serial
    finally:
        ex.close()


def test_open_executor_refuses_zero_workers() -> None:
    with pytest.raises(ValueError, match="--workers = 0"):
        with open_executor(workers=0):
            pass


def test_cache_key_is_canonical_and_tracks_code() -> None:
    a = {"x": 1, "y": {"b": 2, "a": 1}}
    b = {"y": {"a": 1, "b": 2}, "x": 1}
    assert point_key(a, "sweep") == point_key(b, "sweep")
    assert point_key(a, "sweep") != point_key(a, "summary")
    assert point_key(a, "sweep") != point_key({**a, "x": 2}, "sweep")
    assert len(code_version()) == 16


def test_interrupted_sweep_resumes_from_cache(tmp_path: Path) -> None:
    cache = PointCache(tmp_path / "cache")
    first = _sweep(SerialExecutor(), cache)
    assert (cache.computed, cache.reused) == (8, 0)
    entries = sorted((tmp_path / "cache").glob("*.json"))
    assert len(entries) == 8
    for path in entries[:3]:  # as if the run had died before these three finished
        path.unlink()
    again = PointCache(tmp_path / "cache")
    assert _sweep(SerialExecutor(), again) == first
    assert (again.computed, again.reused) == (3, 5)


def test_torn_cache_entry_is_recomputed(tmp_path: Path) -> None:
    cache = PointCache(tmp_path)
    first = _sweep(SerialExecutor(), cache)
    path = sorted(tmp_path.glob("*.json"))[0]
    path.write_text('{"summary": ')
    again = PointCache(tmp_path)
    assert _sweep(SerialExecutor(), again) == first
    assert again.computed == 1


def test_cli_sweep_resumes_and_no_cache_forces(tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    scenario = tmp_path / "tiny.toml"
    scenario.write_text(TINY)
    out = tmp_path / "out"
    args = ["sweep", str(scenario), "--out", str(out), "--json", "--workers", "1"]
    assert main(args) == 0
    first = json.loads(capsys.readouterr().out)
    next(iter((out / "cache").glob("*.json"))).unlink()
    assert main(args) == 0
    captured = capsys.readouterr()
    assert "7 point(s) read from" in captured.err and "1 computed" in captured.err
    assert [_stable(s) for s in json.loads(captured.out)] == [_stable(s) for s in first]
    assert main([*args, "--no-cache"]) == 0
    assert "read from" not in capsys.readouterr().err
