"""What ``servesim run`` and ``servesim sweep`` do, apart from parsing arguments."""

from __future__ import annotations

import argparse
import math
import os
import sys
from pathlib import Path
from typing import Any

from tqdm import tqdm

from servesim.progress import request_progress
from simulator.cached_runs import run_sweep
from simulator.capacity.margin import DEFAULT_COVER, margined_slo, record_limits
from simulator.deployment import resolve
from simulator.errors import ConfigError
from simulator.executors import open_executor
from simulator.fleet.disagg_summary import disagg_lines, pools_line
from simulator.fleet.summary import fleet_lines
from simulator.metrics_slo import refusal_causes
from simulator.point_cache import PointCache
from simulator.report import format_ms, format_summary_table
from simulator.results_folder import default_out
from simulator.results_manifest import ENGINE, SIMULATED, prepare_results
from simulator.runner import PointResult, preflight, run_point, write_results
from simulator.scenario import apply_overrides, expand_sweep, load_scenario, with_trace
from simulator.scenario_types import Scenario
from simulator.track_record import FigureRecord, deployment_record, load_kind, record_lines
from simulator.workload.clients import lockstep_lengths, lockstep_text


def _vary(items: list[str]) -> list[str]:
    """``section.key=a,b,c`` -> ``section.key=[a, b, c]`` overrides (values in TOML syntax)."""
    out = []
    for item in items:
        path, sep, values = item.partition("=")
        if not sep or not values:
            raise ConfigError(f"--vary {item!r}: expected section.key=a,b,c")
        parts = [v.strip() for v in values.split(",")]
        quoted = [v if _is_toml_scalar(v) else f'"{v}"' for v in parts]
        out.append(f"{path}=[{', '.join(quoted)}]")
    return out


def _is_toml_scalar(text: str) -> bool:
    import tomllib

    try:
        tomllib.loads(f"v = {text}")
    except tomllib.TOMLDecodeError:
        return False
    return True


def run_command(args: argparse.Namespace) -> tuple[Any, str]:
    """Run the scenario's points, write results, return (summaries, text report)."""
    if args.command == "plan":
        from servesim.plan_command import plan_command

        return plan_command(args)
    points, overrides = scenario_points(args)
    if args.command == "sweep" and len(points) < 2 and not overrides:
        print("servesim: note: the scenario holds no lists; running its single point",
              file=sys.stderr)
    if args.workers is not None and args.workers < 1:
        raise ConfigError(f"--workers = {args.workers}: must be >= 1")
    scenarios = [Scenario.from_dict(p, args.scenario) for _, p in points]
    parallel = min(len(points), args.workers or os.cpu_count() or 1)
    for sc in scenarios:  # every point valid before any runs: a bad one loses nothing
        try:
            preflight(resolve(sc), parallel=parallel)
        except ConfigError as e:  # a model, GPU or cost the catalogues refuse: name the file
            raise ConfigError(f"{args.scenario}: {e}") from None
    scenario = scenarios[0]
    out = Path(args.out) if args.out else default_out(scenario.name)
    engine = getattr(args, "backend", "sim") == "engine"
    prepare_results(out, ENGINE if engine else SIMULATED,  # before any work
                    overwrite=getattr(args, "overwrite", False))
    if engine:
        from servesim.engine_run import run_on_engine

        results, paths = run_on_engine(points, out, threads=getattr(args, "threads", 1),
                                       scenario_file=str(args.scenario))
        return [r.summary for r in results], _text(scenario, results, paths, simulated=False)
    results = _run_all(points, args, out, show=len(points) > 1)
    paths = write_results(results, out, scenario_file=str(args.scenario))
    summaries = [r.summary for r in results]
    return summaries, _text(scenario, results, paths, simulated=True)


def scenario_points(args: argparse.Namespace
                    ) -> tuple[list[tuple[dict[str, Any], dict[str, Any]]], list[str]]:
    """The scenario's points after ``--trace``, then ``--set`` and ``--vary``; and those
    overrides."""
    raw = load_scenario(args.scenario)
    if getattr(args, "trace", None):
        raw = with_trace(raw, args.trace, own_arrivals=True)
    overrides = list(args.overrides) + _vary(getattr(args, "vary", []))
    return expand_sweep(apply_overrides(raw, overrides)), overrides


def _run_all(points: list[tuple[dict[str, Any], dict[str, Any]]], args: argparse.Namespace,
             out: Path, show: bool) -> list[PointResult]:
    """Run on the executor asked for; ``sweep`` keeps finished points in ``<out>/cache``."""
    use_cache = args.command == "sweep" and not getattr(args, "no_cache", False)
    if len(points) == 1 and not use_cache and not getattr(args, "dask", None):
        # one point runs here, where its requests' progress can be shown
        with request_progress() as progress:
            return [run_point(*points[0], progress=progress)]
    cache = PointCache(out / "cache" if use_cache else None)
    # closed however the sweep ends: a bad point's error then starts a line of its own
    with tqdm(total=len(points), desc="simulating", unit="point", disable=not show,
              file=sys.stderr, leave=False) as bar, \
            open_executor(args.workers, getattr(args, "dask", None), len(points)) as ex:
        results = run_sweep(points, ex, cache, progress=lambda: bar.update())
    if use_cache and cache.reused:
        print(f"servesim: note: {cache.reused} point(s) read from {out / 'cache'}, "
              f"{cache.computed} computed (--no-cache to recompute)", file=sys.stderr)
    return results


def _point_notes(r: PointResult) -> list[str]:
    """Lines on what a point lost and why (refusals counted by cause) and why it missed
    its SLO, so the table's "NO" is explained without opening the JSON."""
    where = ", ".join(f"{k}={v}" for k, v in r.labels.items())
    rejected, in_flight = (r.summary.get(k) or 0 for k in ("num_rejected", "num_in_flight"))
    out = []
    if rejected or in_flight:
        causes = r.summary.get("rejected_by_cause") or refusal_causes(r.result.requests)
        requests = r.result.requests
        reasons = requests.loc[requests["status"] == "rejected", "reason"]
        first = str(reasons.iloc[0]).split(": ") if len(reasons) else []
        eg = [f"e.g. {first[min(1, len(first) - 1)]}"] if first else []
        why = "; ".join([*(f"{n} {cause}" for cause, n in causes.items()), *eg])
        out.append(f"note: {where}: {rejected} refused" + (f" ({why})" if why else "")
                   + f", {in_flight} unfinished at the horizon")
    if r.summary.get("slo_met") is False:
        missed = [f"{k} {format_ms(c.get('value'))} ms > {c['target']:g} ms"
                  for k, c in (r.summary.get("slo") or {}).items() if not c.get("met")]
        if rejected or in_flight:
            missed.append("requests lost (above)")
        out.append(f"note: {where}: SLO not met: {'; '.join(missed)}")
    return out


def _lockstep_note(results: list[PointResult]) -> list[str]:
    """A note for the points whose closed-loop clients start together with equal lengths:
    their rounds stay in lockstep (simulator/workload/clients.py ``lockstep_lengths``)."""
    where, shape = [], None
    for r in results:
        wl = r.deployment.workload
        found = lockstep_lengths(wl.arrival, wl.client_start, wl.concurrency,
                                 r.result.requests)
        if found is not None:
            where.append(", ".join(f"{k}={v}" for k, v in r.labels.items()))
            shape = found
    if shape is None:
        return []
    points = f" ({'; '.join(w for w in where if w)})" if any(where) else ""
    return [f"note{points}: {lockstep_text(*shape)}"]


def _margin_lines(results: list[PointResult], cover: float = DEFAULT_COVER) -> list[str]:
    """For the points with an SLO: their targets less servesim's error on ``cover`` of the
    published runs like each deployment, measured within them (as ``plan --record-margin``
    sizes a candidate), and which points still meet them; one line per deployment."""
    groups: dict[tuple[Any, ...], list[PointResult]] = {}
    for r in results:
        dep, wl = r.deployment, r.deployment.workload
        if dep.slo is None or not dep.slo.targets_ms:
            continue
        key = (dep.stack, dep.hardware.name, dep.gpus, load_kind(wl.arrival, wl.rate), dep.slo)
        groups.setdefault(key, []).append(r)
    out = []
    for (stack, gpu, gpus, load, slo), points in groups.items():
        records = deployment_record(stack, gpu, load, gpus, limits=record_limits(slo))
        if not records:
            continue
        planned, _ = margined_slo(slo, records, cover)
        targets = ", ".join(f"{m} {v:.4g} ms" for m, v in planned.targets_ms.items())
        met = [r for r in points if r.summary.get("slo_met")]
        flips = []
        for r in met:  # the points meeting their SLO as given that the margin would fail
            checks = r.summary.get("slo") or {}
            over = [f"{k} {c['value']:.4g} ms" for k, c in checks.items()
                    if c.get("value") is not None and k != "mean_queue_ms"
                    and c["value"] > planned.targets_ms.get(k.split("_")[1], math.inf)]
            if over:
                where = ", ".join(f"{k}={v}" for k, v in r.labels.items()) or "the point"
                flips.append(f"{where} ({', '.join(over)})")
        verdict = ("no point meets the SLO as given" if not met
                   else f"of the {len(met)} point(s) meeting the SLO, "
                        + (f"these would not: {'; '.join(flips)}" if flips
                           else "all still would"))
        out.append(f"with servesim's margin (the targets less its error on {cover:.0%} of "
                   f"published runs like this, measured within them; plan --record-margin "
                   f"{cover:g}): P{slo.percentile:g} {targets}; {verdict}")
    return out


def _track_records(results: list[PointResult]) -> list[str]:
    """How far to trust the figures: the record of servesim's replays of published runs
    like each deployment (stack, GPU, GPUs a replica, kind of load), once for each."""
    seen: dict[tuple[str, str, int, str], list[str]] = {}
    for r in results:  # a sweep over rates is one deployment: the kind of load is the same
        dep, wl = r.deployment, r.deployment.workload
        key = (dep.stack, dep.hardware.name, dep.gpus, load_kind(wl.arrival, wl.rate))
        seen.setdefault(key, []).append(", ".join(f"{k}={v}" for k, v in r.labels.items()))
    blocks: dict[tuple[FigureRecord, ...], list[str]] = {}
    for (stack, gpu, gpus, load), where in seen.items():
        records = tuple(deployment_record(stack, gpu, load, gpus))
        blocks.setdefault(records, []).extend(where)
    if len(blocks) == 1:
        return record_lines(next(iter(blocks)))
    out = []
    for records, where in blocks.items():
        out += record_lines(records, "; ".join(w for w in where if w) or "every point")
    return out


def _text(scenario: Scenario, results: list[PointResult], paths: list[Path],
          simulated: bool) -> str:
    first = results[0]
    dep = first.deployment
    lines = [
        f"{scenario.name}: {scenario.description}".rstrip(": "),
        f"model {dep.model.name} ({dep.weight_dtype} weights, {dep.kv_dtype} KV) on "
        f"{dep.replicas} x {dep.gpus} {dep.hardware.name}"
        f"{f' (attention DP x {dep.attention_dp})' if dep.attention_dp > 1 else ''}; "
        f"KV cache {dep.kv_blocks} blocks of "
        f"{dep.block_size} tokens per replica",
        f"step costs: {dep.cost_source}",
    ]
    if dep.disaggregated is not None:  # the pools replace the one replica kind
        lines[1] = pools_line(dep.model.name, dep.weight_dtype, dep.kv_dtype, dep.disaggregated)
    if dep.stack != "none":
        lines.insert(2, f"stack: {dep.stack} (its scheduler defaults, KV layout, kernels and "
                        "host costs, under what the scenario sets)")
    if dep.slo is not None:
        targets = ", ".join(f"{k} {v:g} ms" for k, v in dep.slo.targets_ms.items())
        lines.append(f"SLO at P{dep.slo.percentile:g}: {targets}")
    counts = {k: v for k, v in first.summary.get("workload_counts", {}).items() if v}
    if counts:
        lines.append(f"workload adjustments: {counts}")
    lines += [f"workload: {note}" for note in first.summary.get("workload_notes", [])]
    lines.append("")
    labels = [k for k in first.labels if k != "policy"]
    by_policy: dict[str, list[dict[str, Any]]] = {}
    for r in results:
        by_policy.setdefault(r.deployment.policy_name, []).append(r.summary)
    for policy, rows in by_policy.items():
        lines.append(format_summary_table(rows, f"policy: {policy}", labels=labels or ["policy"]))
    for r in results:
        lines += _point_notes(r)
        lines += fleet_lines(r.summary, ", ".join(f"{k}={v}" for k, v in r.labels.items()))
        lines += disagg_lines(r.summary, ", ".join(f"{k}={v}" for k, v in r.labels.items()))
    lines += _lockstep_note(results)
    if simulated:
        lines += _track_records(results)
        lines += _margin_lines(results)
    lines.append("results: " + ", ".join(str(p) for p in paths))
    return "\n".join(lines)
