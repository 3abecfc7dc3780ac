"""A replay's latencies as exact linear functions of the calibration, for a fixed schedule.

With the schedule held (which requests run in which step), every step's duration is
linear in the parameters: ``dur_i = F_i . theta`` with ``theta = (time_scale, step_s,
admit_s, finish_s, token_s, seq_s, request_s)`` and ``F_i = (base_i, 1, admitted_i,
finished_i, D_i + admitted_i, D_i, 0)`` (costs/host.py). A step's end is the start of its
busy period plus the durations since; a busy period starts when the idle engine sees a
request, ``request_s`` after it was sent, so its start moves 1:1 with ``request_s``. Hence
TTFT = end(first-token step) - sent and TPOT = (end(last) - end(first)) / (n - 1) are
``J theta + c`` with J read off the step log. A Gauss-Newton fit (calibrate/from_run.py)
solves the linear problem, replays at the answer (the schedule may change), and repeats.

``admitted_i`` is the number of requests whose ``scheduled_s`` is the step's start and
``finished_i`` those whose ``finish_s`` is its end (the step log does not keep them). In a
closed loop a send time depends on an earlier finish; that chain is left out of J (the
fit's line search, on true replays, absorbs it).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from simulator.costs.base import CostModel
from simulator.shapes import StepShapes

PARAMS = ("time_scale", "step_s", "admit_s", "finish_s", "token_s", "seq_s", "request_s")


def step_features(steps: pd.DataFrame, records: pd.DataFrame, base: CostModel) -> np.ndarray:
    """F (steps x PARAMS): each step's duration is ``F @ theta`` (one replica, time order)."""
    start = steps["start_s"].to_numpy(np.float64)
    end = steps["end_s"].to_numpy(np.float64)
    sched = np.sort(records["scheduled_s"].dropna().to_numpy(np.float64))
    fin = np.sort(records["finish_s"].dropna().to_numpy(np.float64))
    admitted = (np.searchsorted(sched, start, "right") - np.searchsorted(sched, start, "left"))
    finished = (np.searchsorted(fin, end, "right") - np.searchsorted(fin, end, "left"))
    d = steps["num_decode_seqs"].to_numpy(np.int64)
    shapes = StepShapes(
        num_prefill_tokens=steps["num_prefill_tokens"].to_numpy(np.int64),
        prefill_attn_work=steps["prefill_attn_work"].to_numpy(np.float64),
        num_decode_seqs=d, decode_context_tokens=steps["decode_context_tokens"].to_numpy(np.int64),
        num_admitted=admitted.astype(np.int64), num_finished=finished.astype(np.int64))
    base_s = base.step_times(shapes)
    ones = np.ones(len(d))
    return np.column_stack([base_s, ones, admitted, finished, d + admitted, d, 0 * ones])


def end_jacobian(steps: pd.DataFrame, features: np.ndarray) -> np.ndarray:
    """d end_s / d theta per step (steps x PARAMS), for one replica's steps in time order."""
    start = steps["start_s"].to_numpy(np.float64)
    end = steps["end_s"].to_numpy(np.float64)
    idle = np.ones(len(start), dtype=bool)
    idle[1:] = start[1:] > end[:-1] + 1e-12  # the engine waited before this step
    period = np.cumsum(idle) - 1
    cum = np.cumsum(features, axis=0)
    before = np.vstack([np.zeros((1, features.shape[1])), cum])[np.flatnonzero(idle)]
    jac = cum - before[period]
    jac[:, PARAMS.index("request_s")] += 1.0  # each busy period starts at a delivery
    return jac


def latency_jacobians(records: pd.DataFrame, steps: pd.DataFrame, base: CostModel,
                      request_ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(d TTFT / d theta, d TPOT / d theta), rows in ``request_ids`` order."""
    n = len(request_ids)
    ttft, tpot = np.zeros((n, len(PARAMS))), np.zeros((n, len(PARAMS)))
    rec = records.set_index("request_id").reindex(request_ids)
    for replica, own in steps.groupby("replica", sort=False):
        own = own.sort_values("start_s", kind="stable")
        jac = end_jacobian(own, step_features(own, rec[rec["replica"] == replica], base))
        ends = own["end_s"].to_numpy(np.float64)
        mine = (rec["replica"] == replica).to_numpy() & rec["finish_s"].notna().to_numpy()
        first = np.searchsorted(ends, rec["first_token_s"].to_numpy(np.float64)[mine])
        last = np.searchsorted(ends, rec["finish_s"].to_numpy(np.float64)[mine])
        first, last = np.minimum(first, len(ends) - 1), np.minimum(last, len(ends) - 1)
        out = rec["output_tokens"].to_numpy(np.float64)[mine]
        ttft[mine] = jac[first]
        per = np.where(out > 1, 1.0 / np.maximum(out - 1, 1), 0.0)[:, None]
        tpot[mine] = (jac[last] - jac[first]) * per
    return ttft, tpot
