"""A replay's latencies as exact linear functions of the calibration, for a fixed schedule.

With the schedule held (which requests run in which step), every step's duration is
linear in the parameters: ``dur_i = F_i . theta`` with ``theta = (time_scale, step_s,
admit_s, finish_s, token_s, seq_s, request_s, stream_s, intake_s)`` and ``F_i = (base_i,
1, admitted_i, finished_i, D_i + admitted_i, D_i, 0, 0, 0)`` (costs/host.py; the API
server's queue is no step's cost, and its columns of the latencies' derivatives are a
replay's finite difference: calibrate/from_run.py). A request reaches the engine
``request_s`` after it was sent, during step j (or as the idle engine starts step j), and
its first token comes at the end of step k:

    TTFT = request_s + (end_j - seen) + dur_{j+1} + ... + dur_k

The wait for step j to end is taken as the same fraction of that step (``phi``), so
``d TTFT = e_request + phi F_j + F_{j+1} + ... + F_k``; and ``d TPOT`` is the sum of F over
the steps after the first token to the last, over ``n - 1``. This is a smoothed derivative:
the exact pathwise one at a fixed schedule would charge a request arriving late in a busy
period with every step since the period began, but a slower engine does not delay it by
all of them, it only moves which step admits it (the expected wait for the step in
progress is a fraction of that step). With the pathwise derivative the fit stalled far
from the answer; with this one it converges (calibrate/from_run.py).

``admitted_i`` is the number of requests whose ``scheduled_s`` is the step's start and
``finished_i`` those whose ``finish_s`` is its end (the step log does not keep them).

Under an overlap scheduler a step is ``max(serial_i, seq_s D_i)`` (costs/host.py: the rows'
host work beside the kernels and the other host terms), piecewise linear: at the candidate
``theta`` each step is on one side, and its row of F is that side's (the serial terms with
no ``seq_s``, or ``D_i`` in the ``seq_s`` column alone).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from simulator.costs.base import CostModel
from simulator.costs.host import FIT_TERMS
from simulator.records import count_at
from simulator.shapes import StepShapes


def step_features(steps: pd.DataFrame, records: pd.DataFrame, base: CostModel,
                  beside: np.ndarray | None = None) -> np.ndarray:
    """F (steps x FIT_TERMS): each step's duration is ``F @ theta`` (one replica, time order);
    ``beside``: the candidate theta of an overlap scheduler's steps (module docstring)."""
    start = steps["start_s"].to_numpy(np.float64)
    end = steps["end_s"].to_numpy(np.float64)
    admitted = count_at(records["scheduled_s"].to_numpy(np.float64), start)
    finished = count_at(records["finish_s"].to_numpy(np.float64), end)
    d = steps["num_decode_seqs"].to_numpy(np.int64)
    base_s = base.step_times(StepShapes.from_table(
        steps.assign(num_admitted=admitted, num_finished=finished)))
    ones = np.ones(len(d))
    # request_s and the API server's queue (stream_s, intake_s) are no step's cost
    # (latency_jacobians, calibrate/from_run.py)
    feats = np.column_stack([base_s, ones, admitted, finished, d + admitted, d, 0 * ones,
                             0 * ones, 0 * ones])
    return feats if beside is None else _beside(feats, beside)


def _beside(feats: np.ndarray, theta: np.ndarray) -> np.ndarray:
    """F of steps whose per-row host work runs beside them: each row the side of
    ``max(serial, seq_s D)`` that ``theta`` makes the longer (module docstring)."""
    seq = FIT_TERMS.index("seq_s")
    rows = feats[:, seq] * theta[seq]
    cpu_bound = rows > feats @ theta - rows
    out = np.where(cpu_bound[:, None], 0.0, feats)
    out[:, seq] = np.where(cpu_bound, feats[:, seq], 0.0)
    return out


def latency_jacobians(records: pd.DataFrame, steps: pd.DataFrame, base: CostModel,
                      request_ids: np.ndarray, request_s: float,
                      beside: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(d TTFT / d theta, d TPOT / d theta), rows in ``request_ids`` order (module docstring;
    ``beside``: the candidate theta, when the steps' per-row host work runs beside them)."""
    n = len(request_ids)
    ttft, tpot = np.zeros((n, len(FIT_TERMS))), np.zeros((n, len(FIT_TERMS)))
    rec = records.set_index("request_id").reindex(request_ids)
    for replica, own in steps.groupby("replica", sort=False):
        own = own.sort_values("start_s", kind="stable")
        feats = step_features(own, rec[rec["replica"] == replica], base, beside)
        cum = np.cumsum(feats, axis=0)
        start, ends = own["start_s"].to_numpy(np.float64), own["end_s"].to_numpy(np.float64)
        mine = (rec["replica"] == replica).to_numpy() & rec["finish_s"].notna().to_numpy()
        last_step = len(ends) - 1
        first = np.minimum(np.searchsorted(ends, rec["first_token_s"].to_numpy()[mine]), last_step)
        last = np.minimum(np.searchsorted(ends, rec["finish_s"].to_numpy()[mine]), last_step)
        seen = rec["arrival_s"].to_numpy(np.float64)[mine] + request_s  # reached the engine
        during = np.minimum(np.searchsorted(ends, seen, side="left"), last_step)
        dur = ends[during] - start[during]
        left = np.clip((ends[during] - seen) / np.where(dur > 0, dur, 1.0), 0.0, 1.0)
        ttft[mine] = left[:, None] * feats[during] + cum[first] - cum[during]
        ttft[mine, FIT_TERMS.index("request_s")] += 1.0
        out = rec["output_tokens"].to_numpy(np.float64)[mine]
        per = np.where(out > 1, 1.0 / np.maximum(out - 1, 1), 0.0)[:, None]
        tpot[mine] = (cum[last] - cum[first]) * per
    return ttft, tpot
