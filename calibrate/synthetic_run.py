"""A run folder written from a simulation, as the engine writes one: a known answer to fit.

``servesim calibrate --from-run`` is checked by fitting runs whose host costs we chose: a
scenario point simulated with ``[cost] overhead`` (and a ``time_scale``, and step jitter)
is written as ``summary.json``, ``requests.parquet`` and ``tokens.parquet`` exactly like
``servesim run --backend engine``. Per-token times come from the step log: a request's
first token at its ``first_token_s``, then one at the end of every later step with decode
rows up to its ``finish_s``. That holds on one replica when every running request decodes
in every such step (continuous batching without preemption, static and dynamic batches);
:func:`token_times` checks the count against ``output_tokens`` and refuses otherwise.

    python -m calibrate.synthetic_run   # prints the recovery figures of docs/calibration.md
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from simulator.atomic import atomic_write
from simulator.records import token_table
from simulator.runner import PointResult, run_point, write_results


def token_times(requests: pd.DataFrame, steps: pd.DataFrame) -> pd.DataFrame:
    """request_id, token_index, time_s for every finished request (module docstring)."""
    if steps["replica"].nunique() > 1:
        raise ValueError("per-token times from a step log need a single replica")
    ends = np.sort(steps.loc[steps["num_decode_seqs"] > 0, "end_s"].to_numpy(np.float64))
    times: dict[int, list[float]] = {}
    for r in requests[requests["status"] == "finished"].itertuples():
        lo, hi = np.searchsorted(ends, [r.first_token_s, r.finish_s], side="right")
        later = ends[lo:hi].tolist()
        if len(later) != r.output_tokens - 1 or r.preemptions:
            raise ValueError(f"request {r.request_id}: {len(later) + 1} decode ends for "
                             f"{r.output_tokens} tokens; per-token times are not recoverable")
        times[int(r.request_id)] = [float(r.first_token_s), *later]
    return token_table(times)


def write_run(points: list[tuple[dict[str, Any], dict[str, Any]]], out: str | Path
              ) -> list[PointResult]:
    """Simulate each point and write it as an engine run folder (three files)."""
    results = [run_point(labels, point) for labels, point in points]
    write_results(results, out)
    tokens = pd.concat([token_times(r.result.requests, r.result.steps).assign(point=i)
                        for i, r in enumerate(results)], ignore_index=True)
    atomic_write(Path(out) / "tokens.parquet", lambda p: tokens.to_parquet(p))
    return results
