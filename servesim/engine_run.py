"""``servesim run --backend engine``: every point of a scenario served by the real engine.

Points run one after another in this process (the machine is the thing being measured;
running two at once would make each slower). The model is built once per distinct
model and dtype. Results go where the simulator's go, plus ``tokens.parquet`` with the
time of every output token, and a ``manifest.json`` of kind ``engine``.

Each finished point is saved at once under ``<out>/partial/`` (a
:class:`~simulator.point_cache.PointCache`: summary plus requests, steps and tokens tables,
keyed by the point, its labels, this machine's fingerprint and the device), so a Ctrl-C in
point 2 keeps point 1. A rerun of the same points into the same folder reads the finished
ones back instead of serving them again (and says so); once every point is written to the
results, ``partial/`` is removed, so a later run measures afresh.
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path
from typing import Any

import pandas as pd
from tqdm import tqdm

from simulator.cluster import SimResult
from simulator.point_cache import PointCache, point_key
from simulator.results_manifest import ENGINE
from simulator.runner import PointResult, write_results

CHECKPOINT = "partial"
Point = tuple[dict[str, Any], dict[str, Any]]


def run_on_engine(points: list[Point], out: Path, *, threads: int = 1,
                  scenario_file: str | None = None) -> tuple[list[PointResult], list[Path]]:
    """Serve each point on the engine; write summary, requests, steps and tokens tables."""
    try:
        from engine.backend import engine_device
    except ImportError as e:  # torch/transformers missing
        raise OSError(f"--backend engine needs the engine extra ({e}); "
                      "pip install torch==2.13.0 -e '.[engine]'") from e
    from simulator.deployment import resolve
    from simulator.fingerprint import this_machine

    # a point this machine cannot run fails before any runs
    devices = [str(engine_device(resolve(point))) for _, point in points]
    machine = this_machine("cpu", threads)["id"]
    cache = PointCache(out / CHECKPOINT)
    # measured_here=[]: the per-user profile cache prices simulations, not engine runs
    keys = [point_key(_material(labels, point, device, threads, machine), "engine", [])
            for (labels, point), device in zip(points, devices, strict=True)]
    results: list[PointResult] = []
    token_tables = []
    em = None
    for i, (labels, point) in enumerate(points):
        saved = cache.load(keys[i])
        if saved is not None:
            result, tokens = _reload(cache, keys[i], labels, point, saved)
            cache.reused += 1
        else:
            result, tokens, em = _serve(i, len(points), labels, point, threads, em)
            cache.save(keys[i], _material(labels, point, devices[i], threads, machine),
                       result.summary, {"requests": result.result.requests,
                                        "steps": result.result.steps, "tokens": tokens})
        results.append(result)
        token_tables.append(tokens.assign(point=i))
    if cache.reused:
        print(f"servesim: note: {cache.reused} of {len(points)} point(s) read back from "
              f"{out / CHECKPOINT} (finished before an interruption); delete that folder to "
              "serve them again", file=sys.stderr)
    tokens = pd.concat(token_tables, ignore_index=True)
    paths = write_results(results, out, kind=ENGINE, tables={"tokens": tokens},
                          scenario_file=scenario_file)
    shutil.rmtree(out / CHECKPOINT, ignore_errors=True)
    return results, paths


def _material(labels: dict[str, Any], point: dict[str, Any], device: str, threads: int,
              machine: str) -> dict[str, Any]:
    """What an engine point's result depends on: not its ``[cost]`` (the engine is timed,
    not priced), but the machine, device and threads it ran with."""
    served = {k: v for k, v in point.items() if k != "cost"}
    return {"labels": labels, "point": served, "device": device, "threads": threads,
            "machine": machine}


def _serve(i: int, total: int, labels: dict[str, Any], point: dict[str, Any], threads: int,
           em: Any) -> tuple[PointResult, pd.DataFrame, Any]:
    """Serve one point with a progress bar; (result, tokens table, the engine model)."""
    from engine.backend import run_point_engine

    desc = f"engine {i + 1}/{total} " + " ".join(f"{k}={v}" for k, v in labels.items())
    with tqdm(desc=desc.strip(), unit="req", file=sys.stderr, leave=False) as bar:
        def progress(done: int, count: int, bar: tqdm = bar) -> None:
            bar.total = count
            bar.update(done - bar.n)

        result, run = run_point_engine(labels, point, threads=threads, em=em,
                                       progress=progress)
    return result, run.tokens, run.model


def _reload(cache: PointCache, key: str, labels: dict[str, Any], point: dict[str, Any],
            summary: dict[str, Any]) -> tuple[PointResult, pd.DataFrame]:
    """A checkpointed point as :func:`_serve` returned it."""
    from simulator.deployment import resolve

    dep = resolve(point)
    res = SimResult(cache.table(key, "requests"), cache.table(key, "steps"), dep.kv_blocks,
                    1, int(summary.get("sim_events") or 0),
                    float((summary.get("engine") or {}).get("wall_s") or 0.0))
    head = {"policy": dep.policy_name, **labels}
    return PointResult(head, dep, summary, res), cache.table(key, "tokens")
