"""Running scenario points and writing their results (Parquet tables and summary JSON)."""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from simulator.atomic import atomic_write
from simulator.cluster import LeaveHook, Progress, SimResult, simulate
from simulator.costs.host import intake_request_s, stream_token_s
from simulator.deployment import Deployment, resolve
from simulator.errors import ConfigError
from simulator.fleet.disagg_spec import blocks_by_replica
from simulator.fleet.disagg_summary import disagg_summary
from simulator.fleet.summary import fleet_summary, gpu_price
from simulator.memory_guard import available_bytes, check_fits, step_row_budget
from simulator.metrics import summarize, to_json_safe
from simulator.metrics_classes import class_summary, with_classes
from simulator.prefix_cache_run import prefix_summary
from simulator.results_manifest import SIMULATED, begin_writing, seal_results
from simulator.speculative_stats import spec_summary
from simulator.token_stream import stream_summary
from simulator.workload.arrivals import check_span
from simulator.workload.build import BuiltWorkload, build_requests
from simulator.workload.classes import CLASS_COLUMN
from simulator.workload.config import SYNTHETIC


@dataclass(slots=True)
class PointResult:
    """One simulated scenario point."""

    labels: dict[str, Any]  # the swept values that identify the point
    deployment: Deployment
    summary: dict[str, Any]  # summary JSON (contract 5) with labels and provenance
    result: SimResult


def run_point(labels: dict[str, Any], point: dict[str, Any],
              progress: Progress | None = None,
              watch: Callable[[pd.DataFrame], LeaveHook] | None = None) -> PointResult:
    """Resolve, build the workload with the point's seed, simulate and summarise.

    A point that cannot fit in memory is refused before its requests are drawn
    (:mod:`simulator.memory_guard`); ``progress(done, total)`` follows the simulation;
    ``watch(table)`` gives the hook told of each request as it leaves (``simulate``'s
    ``on_leave``; the planner's early verdict, capacity/early_stop.py).
    """
    dep = resolve(point)
    simulated, free = _before_horizon(dep), available_bytes()  # free: before any is built
    preflight(dep, available=free)
    rng = np.random.default_rng(dep.seed)
    built = build_requests(dep.workload, rng, dep.model.max_context_tokens, dep.cost.step_time)
    rows = None if free is None else step_row_budget(len(built.table), simulated,
                                                     available=free, step_log=dep.step_log,
                                                     replicas=dep.replicas)
    res = simulate(built.table, dep.cluster(), horizon_s=dep.horizon_s,
                   fast_forward=dep.fast_forward, progress=progress, max_step_rows=rows,
                   max_concurrency=built.max_concurrency, segments=built.segments,
                   on_leave=None if watch is None else watch(built.table))
    disagg = dep.disaggregated
    summary = summarize(res.requests, res.steps, dep.slo, kv_blocks_total=dep.kv_blocks
                        if disagg is None else blocks_by_replica(disagg),
                        num_replicas=res.num_replicas, step_stats=res.step_stats)
    if CLASS_COLUMN in built.table:  # priority classes: records and summary per class
        res.requests = with_classes(res.requests, built.table)
        summary["classes"] = class_summary(res.requests, dep.workload.classes, dep.slo)
    if res.spec_stats is not None:  # speculative decoding's keys, only when it is on
        summary |= spec_summary(res.spec_stats)
    if res.prefix_stats is not None:  # prefix caching's keys, only when it is on
        summary |= prefix_summary(res.prefix_stats)
    token_s = stream_token_s(dep.cost)
    if token_s > 0:  # the API server's token stream's keys, only when it is priced
        summary |= stream_summary(res.requests, token_s, summary.get("duration"),
                                  res.num_replicas)
    if (intake_s := intake_request_s(dep.cost)) > 0:  # its intake, only when priced
        summary["intake_s"] = intake_s
    if res.fleet is not None:  # the autoscaler's keys, only when it is on
        price = gpu_price(dep.hardware.name, dep.autoscale.usd_per_gpu_hour)
        summary |= fleet_summary(res.fleet, dep.gpus, price)
    meta: dict[str, Any] = {"sim_events": res.num_events, "sim_wall_s": res.wall_s}
    if disagg is not None and res.transfers is not None:  # the pools' keys, only when on
        summary |= disagg_summary(res.transfers, disagg, res.requests, res.steps)
        meta |= {"replicas": disagg.prefill.replicas + disagg.decode.replicas,
                 "num_gpus": disagg.prefill.num_gpus + disagg.decode.num_gpus}
    return point_result(labels, point, dep, built, summary, res, **meta)


def preflight(dep: Deployment, *, available: int | None = None, parallel: int = 1) -> None:
    """Refuse, before anything is drawn, a point whose synthetic arrivals would span more
    simulated time than float64 resolves, or whose tables would not fit in memory when
    ``parallel`` points run at once (each gets an equal share of ``available``)."""
    wl = dep.workload
    if dep.step_log == "none" and dep.slo is not None and "itl" in dep.slo.targets_ms:
        raise ConfigError("slo.itl_ms needs the step log, and run.step_log = 'none' keeps "
                          "none of it; use run.step_log = 'summary' (ITL within 0.1%) or 'full'")
    check_fits(wl.num_requests, _before_horizon(dep), available=available, parallel=parallel,
               step_log=dep.step_log)
    if wl.arrival in SYNTHETIC and wl.rate is not None and wl.num_requests is not None:
        check_span(wl.rate, wl.num_requests)


def _before_horizon(dep: Deployment) -> int | None:
    """About how many requests arrive before ``run.horizon_s`` (None: all of them)."""
    rate, horizon = dep.workload.rate, dep.horizon_s
    if (horizon is None or rate is None or math.isinf(rate)  # inf: all arrive at 0
            or dep.workload.arrival not in SYNTHETIC):
        return None
    return math.ceil(rate * horizon * 1.1) + 100  # Poisson counts stay well within this


def point_result(labels: dict[str, Any], point: dict[str, Any], dep: Deployment,
                 built: BuiltWorkload, summary: dict[str, Any], result: SimResult,
                 **meta: Any) -> PointResult:
    """A point's result: the summary with its labels, the deployment and the workload's
    provenance, then ``meta`` (which backend ran it, and how; it may override a key)."""
    head = {"policy": dep.policy_name, **labels}
    common = {
        "scenario": point.get("name", ""),
        "model": dep.model.name, "gpu": dep.hardware.name, "tp": dep.tp, "stack": dep.stack,
        "weight_dtype": dep.weight_dtype, "kv_dtype": dep.kv_dtype,
        "replicas": dep.replicas, "num_gpus": dep.replicas * dep.gpus,
        **({"attention_dp": dep.attention_dp} if dep.attention_dp > 1 else {}),
        "kv_blocks_per_replica": dep.kv_blocks, "cost_profile": dep.cost_source,
        "workload_counts": built.counts, "workload_notes": built.notes,
    }
    return PointResult(head, dep, to_json_safe({**head, **summary, **common, **meta}), result)


def run_points(
    points: list[tuple[dict[str, Any], dict[str, Any]]],
    progress: Callable[[int, int], None] | None = None,
) -> list[PointResult]:
    """Run every point in order, calling ``progress(done, total)`` after each."""
    out = []
    for i, (labels, point) in enumerate(points):
        out.append(run_point(labels, point))
        if progress:
            progress(i + 1, len(points))
    return out


def kept_step_log(r: PointResult) -> bool:
    """Whether ``r`` kept its step log (``[run] step_log = "full"``)."""
    return keeps_step_log(r.summary)


def keeps_step_log(summary: dict[str, Any]) -> bool:
    """Whether the run a summary describes kept its step log: ``summarize`` writes
    ``step_log`` ("summary" or "none") exactly when it did not, fresh or cached alike."""
    return summary.get("step_log", "full") == "full"


def write_results(results: list[PointResult], out_dir: str | Path, *, kind: str = SIMULATED,
                  tables: dict[str, pd.DataFrame] | None = None,
                  scenario_file: str | None = None) -> list[Path]:
    """Write ``summary.json``, ``requests.parquet``, ``steps.parquet`` (and ``tables``, each
    ``<name>.parquet``, already labelled with ``point``) atomically, then ``manifest.json``
    saying what produced them (``kind``; simulator/results_manifest.py), removing result
    files of an earlier run that this one does not write. ``steps.parquet`` is written
    only when some point kept its step log (:func:`kept_step_log`)."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    begin_writing(out)

    def labelled(table_of: Callable[[PointResult], pd.DataFrame]) -> pd.DataFrame:
        parts = []
        for i, r in enumerate(results):
            t = table_of(r).copy()
            t.insert(0, "point", i)
            for j, (k, v) in enumerate(r.labels.items()):
                t.insert(1 + j, k, str(v) if not isinstance(v, int | float) else v)
            parts.append(t)
        return pd.concat(parts, ignore_index=True) if parts else pd.DataFrame()

    summary = [r.summary for r in results]
    paths = [out / "summary.json", out / "requests.parquet"]
    text = json.dumps(summary, indent=2) + "\n"

    def write_json(p: Path) -> None:
        p.write_text(text)

    atomic_write(paths[0], write_json)
    atomic_write(paths[1], lambda p: labelled(lambda r: r.result.requests).to_parquet(p))
    if any(kept_step_log(r) for r in results):  # the others' step tables are empty
        paths.append(atomic_write(out / "steps.parquet",
                                  lambda p: labelled(lambda r: r.result.steps).to_parquet(p)))
    for name, frame in (tables or {}).items():
        paths.append(atomic_write(out / f"{name}.parquet", frame.to_parquet))
    measured = [s["fingerprint"] for s in summary if isinstance(s.get("fingerprint"), dict)]
    machine = measured[0] if measured else ("this" if kind == SIMULATED else None)
    seal_results(out, kind, paths, machine=machine, points=len(results),
                 scenario=str(summary[0].get("scenario", "")) if summary else None,
                 scenario_file=scenario_file)
    return paths
