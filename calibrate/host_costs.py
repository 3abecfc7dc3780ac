"""The serving loop's host work, measured: what a step costs beyond its forward passes.

The profiler (engine/sweep.py) times forward passes of fixed shapes. A served step also
runs the loop around them, and that work is per request, not per token:

- admitting a request: its prompt ids, a slot in the KV cache (grown when it is full), the
  scheduler's bookkeeping;
- finishing one: its KV row is compacted out of the slot cache (rows behind it move down),
  its record written; this lands in the step after its last token;
- every step: scheduling, building the batch's inputs, handing out tokens.

On the 2-vCPU AMD EPYC VM this is ~0.1 ms per step, ~0.3 ms per admission and ~0.9 ms per
finished request, against 10-25 ms steps; on a machine whose forward passes are 3-4x
faster (an Intel Xeon with AMX), the same Python work is a much larger share of a prefill
step, which is how continuous batching's TTFT came out 11-15% optimistic there.

:func:`serve_synthetic` serves a short synthetic workload of its own (not a scenario's:
calibration never sees the workload it is validated on) through the real serving loop with
continuous batching, and fits, per step, ``wall - forward = step_s + admit_s * admitted +
finish_s * finished_before + seq_s * decode_rows`` by non-negative least squares.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy.optimize import nnls

from engine.models import EngineModel
from engine.serving import EngineRun, replay
from simulator.costs.base import CostModel
from simulator.policies import make_policy
from simulator.records import count_at
from simulator.shapes import StepShapes

HOST_TERMS = ("step_s", "admit_s", "finish_s", "seq_s")


@dataclass(frozen=True, slots=True)
class HostCosts:
    """Per-step host work of the serving loop (seconds), fitted from a served run."""

    step_s: float  # every step: schedule, inputs, bookkeeping
    admit_s: float  # per request admitted in the step
    finish_s: float  # per request that finished in the step before (KV row compaction)
    seq_s: float  # per decode row in the step
    num_steps: int  # steps the fit used
    residual_ms: float  # median |fit - measured| host time per step, ms

    def overhead(self) -> dict[str, float]:
        """The terms as a cost profile's ``overhead`` object."""
        return {k: round(float(getattr(self, k)), 9) for k in HOST_TERMS}


def synthetic_workload(num_requests: int = 64, seed: int = 0) -> pd.DataFrame:
    """Poisson arrivals at ~20 req/s, prompts 32-320 tokens, outputs 4-48: many admissions
    and finishes in a few seconds, at the lengths of chat-like tests (contract 1 table).

    A finish's cost grows with the KV rows it moves (their count and length), so the
    lengths here set the average that ``finish_s`` records; docs/calibration.md."""
    rng = np.random.default_rng(seed)
    return pd.DataFrame({
        "request_id": np.arange(num_requests),
        "arrival_s": np.cumsum(rng.exponential(0.05, num_requests)),
        "prompt_tokens": rng.integers(32, 321, num_requests),
        "output_tokens": rng.integers(4, 49, num_requests),
    })


def step_counts(steps: pd.DataFrame, requests: pd.DataFrame) -> pd.DataFrame:
    """Per step: requests admitted in it, and requests that finished in the step before."""
    start = steps["start_s"].to_numpy(np.float64)  # a step starts where the last one ended
    return pd.DataFrame({
        "admitted": count_at(requests["scheduled_s"].to_numpy(np.float64), start),
        "finished_before": count_at(requests["finish_s"].to_numpy(np.float64), start),
        "decode_rows": steps["num_decode_seqs"].to_numpy(np.int64),
    })


def fit_host_costs(host_s: np.ndarray, counts: pd.DataFrame) -> HostCosts:
    """NNLS of per-step host time on [1, admitted, finished before, decode rows].

    Steps whose host time is above the 99th percentile (a garbage collection, the OS
    taking the core) are left out: they are not a cost of any count.
    """
    keep = host_s <= np.percentile(host_s, 99)
    x = np.column_stack([np.ones(len(counts)), counts["admitted"], counts["finished_before"],
                         counts["decode_rows"]]).astype(np.float64)[keep]
    y = host_s[keep]
    scale = np.linalg.norm(x, axis=0)
    scale[scale == 0] = 1.0
    coef, _ = nnls(x / scale, y)
    coef = coef / scale
    resid = float(np.median(np.abs(x @ coef - y))) * 1e3
    step_s, admit_s, finish_s, seq_s = (float(c) for c in coef)
    return HostCosts(step_s, admit_s, finish_s, seq_s, int(keep.sum()), resid)


def serve_synthetic(em: EngineModel, num_requests: int = 64, seed: int = 0) -> EngineRun:
    """Serve :func:`synthetic_workload` on ``em`` (continuous, 8 sequences): ~4 s busy."""
    table = synthetic_workload(num_requests, seed)
    return replay(table, em, make_policy("continuous", max_num_seqs=8), kv_blocks=4096,
                  block_size=16, seed=seed)


def host_costs_of(run: EngineRun) -> HostCosts:
    """Fit the loop's host work from a served run's step log and forward times."""
    steps, requests = run.result.steps, run.result.requests
    host = (steps["end_s"] - steps["start_s"]).to_numpy(np.float64) - run.forward_s
    return fit_host_costs(np.clip(host, 0.0, None), step_counts(steps, requests))


def served_time_scale(run: EngineRun, kernel: CostModel) -> float:
    """Forward time the loop spent serving / what ``kernel`` (fitted on the profiler's fixed
    shapes) predicts for the same steps.

    A check of the profile against the loop's own steps, seconds later: on this project's
    VM it read 1.02 for one calibration and 0.92-0.95 an hour before (docs/calibration.md,
    "Issue 10"): the machine's drift between windows, not a bias.
    """
    steps, requests = run.result.steps, run.result.requests
    counts = step_counts(steps, requests)
    shapes = StepShapes.from_table(steps.assign(num_admitted=counts["admitted"].to_numpy()))
    return float(run.forward_s.sum() / kernel.step_times(shapes).sum())
