"""Running a sweep's points on an executor, keeping each finished point in a cache.

A sweep point's cache entry holds its summary and its request and step tables (no step
table for a point that kept no step log: ``[run] step_log`` "summary" or "none"), so a
rerun rebuilds the :class:`PointResult` a fresh run gives (``sim_wall_s`` is the one
figure that tells them apart: it is the wall time of the run that computed it; the
summary holds what a fresh run's ``step_stats`` gave, so a read-back point has none). The
key covers the point's labels as well as its scenario, since both shape the summary.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from simulator.cluster import SimResult
from simulator.deployment import resolve
from simulator.executors import Executor
from simulator.point_cache import PointCache, map_cached
from simulator.records import STEP_COLUMNS, empty_table
from simulator.runner import PointResult, keeps_step_log, kept_step_log, run_point

SWEEP_KIND = "sweep"
Point = tuple[dict[str, Any], dict[str, Any]]  # (labels, scenario point)


def sweep_job(item: Point) -> PointResult:
    """One sweep point (module level, so it travels to pool and Dask workers)."""
    return run_point(*item)


def run_sweep(points: list[Point], ex: Executor, cache: PointCache,
              progress: Callable[[], None] | None = None) -> list[PointResult]:
    """Every point's result in the sweep's order; cached points are read, not run."""
    material = [{"labels": labels, "point": point} for labels, point in points]

    def save(i: int, key: str, r: PointResult) -> None:
        tables = {"requests": r.result.requests}
        if kept_step_log(r):  # a point that kept no step log stores no steps table
            tables["steps"] = r.result.steps
        cache.save(key, material[i], r.summary, tables)
        if progress:
            progress()

    def load(i: int, key: str, summary: dict[str, Any]) -> PointResult:
        labels, point = points[i]
        dep = resolve(point)
        steps = cache.table(key, "steps") if keeps_step_log(summary) else empty_table(STEP_COLUMNS)
        res = SimResult(cache.table(key, "requests"), steps,
                        dep.kv_blocks, dep.replicas, int(summary.get("sim_events") or 0),
                        float(summary.get("sim_wall_s") or 0.0))
        if progress:
            progress()
        return PointResult({"policy": dep.policy_name, **labels}, dep, summary, res)

    return map_cached(ex, sweep_job, points, material, cache, SWEEP_KIND, save, load)
