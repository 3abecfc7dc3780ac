"""``servesim run --backend engine``: every point of a scenario served by the real engine.

Points run one after another in this process (the machine is the thing being measured;
running two at once would make each slower). The model is built once per distinct
model and dtype. Results go where the simulator's go, plus ``tokens.parquet`` with the
time of every output token.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pandas as pd
from tqdm import tqdm

from simulator.atomic import atomic_write
from simulator.runner import PointResult, write_results


def run_on_engine(points: list[tuple[dict[str, Any], dict[str, Any]]], out: Path, *,
                  threads: int = 1) -> tuple[list[PointResult], list[Path]]:
    """Serve each point on the engine; write summary, requests, steps and tokens tables."""
    try:
        from engine.backend import engine_device, run_point_engine
    except ImportError as e:  # torch/transformers missing
        raise OSError(f"--backend engine needs the engine extra ({e}); "
                      "pip install torch==2.13.0 -e '.[engine]'") from e
    from simulator.deployment import resolve

    for _, point in points:  # a point this machine cannot run fails before any runs
        engine_device(resolve(point))
    results: list[PointResult] = []
    token_tables = []
    em = None
    for i, (labels, point) in enumerate(points):
        desc = f"engine {i + 1}/{len(points)} " + " ".join(f"{k}={v}" for k, v in labels.items())
        with tqdm(desc=desc.strip(), unit="req", file=sys.stderr, leave=False) as bar:
            def progress(done: int, total: int, bar: tqdm = bar) -> None:
                bar.total = total
                bar.update(done - bar.n)

            result, run = run_point_engine(labels, point, threads=threads, em=em,
                                           progress=progress)
        em = run.model
        results.append(result)
        token_tables.append(run.tokens.assign(point=i))
    paths = write_results(results, out)
    tokens = pd.concat(token_tables, ignore_index=True)
    path = out / "tokens.parquet"
    atomic_write(path, lambda p: tokens.to_parquet(p))
    return results, [*paths, path]
