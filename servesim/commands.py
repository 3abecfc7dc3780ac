"""What ``servesim run`` and ``servesim sweep`` do, apart from parsing arguments."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any

from tqdm import tqdm

from servesim.progress import request_progress
from servesim.run_notes import lockstep_note, margin_lines, point_notes, track_records
from simulator.cached_runs import run_sweep
from simulator.deployment import resolve
from simulator.errors import ConfigError
from simulator.executors import open_executor
from simulator.fleet.disagg_summary import disagg_lines, pools_line
from simulator.fleet.summary import fleet_lines
from simulator.point_cache import PointCache
from simulator.report import format_summary_table
from simulator.results_folder import default_out
from simulator.results_manifest import ENGINE, SIMULATED, prepare_results
from simulator.runner import PointResult, preflight, run_point, write_results
from simulator.scenario import apply_overrides, expand_sweep, load_scenario, with_trace
from simulator.scenario_types import Scenario


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
        lines += point_notes(r)
        lines += fleet_lines(r.summary, ", ".join(f"{k}={v}" for k, v in r.labels.items()))
        lines += disagg_lines(r.summary, ", ".join(f"{k}={v}" for k, v in r.labels.items()))
    lines += lockstep_note(results)
    if simulated:
        lines += track_records(results)
        lines += margin_lines(results)
    lines.append("results: " + ", ".join(str(p) for p in paths))
    return "\n".join(lines)
