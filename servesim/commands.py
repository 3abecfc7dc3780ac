"""What ``servesim run`` and ``servesim sweep`` do, apart from parsing arguments."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from tqdm import tqdm

from simulator.cached_runs import run_sweep
from simulator.deployment import resolve
from simulator.errors import ConfigError
from simulator.executors import open_executor
from simulator.point_cache import PointCache
from simulator.report import format_summary_table
from simulator.runner import PointResult, write_results
from simulator.scenario import apply_overrides, expand_sweep, load_scenario


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
    raw = load_scenario(args.scenario)
    overrides = list(args.overrides) + _vary(getattr(args, "vary", []))
    raw = apply_overrides(raw, overrides)
    points = expand_sweep(raw)
    if args.command == "sweep" and len(points) < 2 and not overrides:
        print("servesim: note: the scenario holds no lists; running its single point",
              file=sys.stderr)
    if args.workers is not None and args.workers < 1:
        raise ConfigError(f"--workers = {args.workers}: must be >= 1")
    for _, point in points:  # every point valid before any runs: a bad one loses nothing
        resolve(point)
    out = Path(args.out) if args.out else Path("results") / str(raw.get("name", "scenario"))
    if getattr(args, "backend", "sim") == "engine":
        from servesim.engine_run import run_on_engine

        results, paths = run_on_engine(points, out, threads=getattr(args, "threads", 1))
        return [r.summary for r in results], _text(raw, results, paths)
    results = _run_all(points, args, out, show=len(points) > 1)
    paths = write_results(results, out)
    summaries = [r.summary for r in results]
    return summaries, _text(raw, results, paths)


def _run_all(points: list[tuple[dict[str, Any], dict[str, Any]]], args: argparse.Namespace,
             out: Path, show: bool) -> list[PointResult]:
    """Run on the executor asked for; ``sweep`` keeps finished points in ``<out>/cache``."""
    use_cache = args.command == "sweep" and not getattr(args, "no_cache", False)
    cache = PointCache(out / "cache" if use_cache else None)
    bar = tqdm(total=len(points), desc="simulating", unit="point", disable=not show,
               file=sys.stderr, leave=False)
    with open_executor(args.workers, getattr(args, "dask", None), len(points)) as ex:
        results = run_sweep(points, ex, cache, progress=lambda: bar.update())
    bar.close()
    if use_cache and cache.reused:
        print(f"servesim: note: {cache.reused} point(s) read from {out / 'cache'}, "
              f"{cache.computed} computed (--no-cache to recompute)", file=sys.stderr)
    return results


def _text(raw: dict[str, Any], results: list[PointResult], paths: list[Path]) -> str:
    first = results[0]
    dep = first.deployment
    lines = [
        f"{raw.get('name', '')}: {raw.get('description', '')}".rstrip(": "),
        f"model {dep.model.name} ({dep.weight_dtype} weights, {dep.kv_dtype} KV) on "
        f"{dep.replicas} x {dep.tp} {dep.hardware.name}; KV cache {dep.kv_blocks} blocks of "
        f"{dep.block_size} tokens per replica",
        f"step costs: {dep.cost_source}",
    ]
    if dep.slo is not None:
        targets = ", ".join(f"{k} {v:g} ms" for k, v in dep.slo.targets_ms.items())
        lines.append(f"SLO at P{dep.slo.percentile:g}: {targets}")
    counts = {k: v for k, v in first.summary.get("workload_counts", {}).items() if v}
    if counts:
        lines.append(f"workload adjustments: {counts}")
    lines.append("")
    labels = [k for k in first.labels if k != "policy"]
    by_policy: dict[str, list[dict[str, Any]]] = {}
    for r in results:
        by_policy.setdefault(r.deployment.policy_name, []).append(r.summary)
    for policy, rows in by_policy.items():
        lines.append(format_summary_table(rows, f"policy: {policy}", labels=labels or ["policy"]))
    for r in results:
        lost = {k: r.summary.get(k) for k in ("num_rejected", "num_in_flight")}
        if any(lost.values()):
            where = ", ".join(f"{k}={v}" for k, v in r.labels.items())
            reasons = r.result.requests.loc[r.result.requests["status"] == "rejected", "reason"]
            why = f"; e.g. {reasons.iloc[0]}" if len(reasons) else ""
            lines.append(f"note: {where}: {lost['num_rejected']} rejected, "
                         f"{lost['num_in_flight']} unfinished at the horizon{why}")
    lines.append("results: " + ", ".join(str(p) for p in paths))
    return "\n".join(lines)
