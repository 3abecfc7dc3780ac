"""How well the simulation's cost model priced the engine's own steps: one validate row.

A validate run compares two timelines, and a latency error has two sources: the cost
model priced steps wrongly (the profile is for another machine, or the machine drifted
since it was calibrated: a shared VM moves 5-10% in minutes, docs/calibration.md), or the
simulator scheduled them differently (batching, queueing, host work). This row separates
the first. It prices the engine's *measured* steps, with their measured shapes and the
requests each admitted and finished, with the same cost model the simulation used (its
step jitter off: the row is about means), and compares the total with the measured total::

    measured  = sum of the engine's step durations (ms)
    simulated = the cost model's time for those same steps (ms)

so ``relative_error`` below zero means the profile prices this machine's steps too cheap
and every latency the simulation printed inherits about that much. A latency error much
larger than this row's is the simulator's own.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from simulator.costs.base import CostModel
from simulator.shapes import StepShapes

METRIC, STATISTIC = "steps", "priced_total"
TOLERANCE = 0.05  # as the mean latencies' (calibrate/validate.py)


def step_counts(steps: pd.DataFrame, requests: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """(admitted, finished) per step: a request is admitted by the step that starts at its
    ``scheduled_s`` and finished by the one that ends at its ``finish_s`` (the engine's
    records share those clocks); steps are in start order."""
    start = steps["start_s"].to_numpy(dtype=float)
    end = steps["end_s"].to_numpy(dtype=float)
    n = len(start)
    admitted, finished = np.zeros(n, dtype=np.int64), np.zeros(n, dtype=np.int64)
    done = requests[requests["status"] == "finished"] if "status" in requests else requests
    sched = requests["scheduled_s"].to_numpy(dtype=float) if "scheduled_s" in requests \
        else np.array([])
    sched = sched[np.isfinite(sched)]
    at = np.searchsorted(start, sched, side="right") - 1
    np.add.at(admitted, at[(at >= 0) & (at < n)], 1)
    fin = done["finish_s"].to_numpy(dtype=float)
    fin = fin[np.isfinite(fin)]
    at = np.searchsorted(end, fin, side="left")
    np.add.at(finished, at[(at >= 0) & (at < n)], 1)
    return admitted, finished


def measured_and_priced(steps: pd.DataFrame, requests: pd.DataFrame, cost: CostModel
                        ) -> tuple[float, float]:
    """(measured seconds, ``cost``'s seconds) of the steps, each step priced with the
    requests it admitted and finished (per replica, where the tables name several)."""
    if "replica" in steps and "replica" in requests and steps["replica"].nunique() > 1:
        parts = [measured_and_priced(part, requests[requests["replica"] == r], cost)
                 for r, part in steps.groupby("replica", sort=True)]
        return sum(m for m, _ in parts), sum(p for _, p in parts)
    steps = steps.sort_values("start_s", kind="stable")
    admitted, finished = step_counts(steps, requests)
    shapes = StepShapes.from_table(steps.assign(num_admitted=admitted, num_finished=finished))
    measured = float((steps["end_s"] - steps["start_s"]).sum())
    return measured, float(np.sum(cost.step_times(shapes)))


def priced_steps_row(steps: pd.DataFrame, requests: pd.DataFrame, cost: CostModel, *,
                     policy: str, load: Any) -> dict[str, Any] | None:
    """The row (calibrate.validate.ROW_KEYS) for one point's measured steps priced by
    ``cost``; None when there are no steps (a client's file records none)."""
    if steps.empty:
        return None
    measured, priced = measured_and_priced(steps, requests, cost)
    measured, priced = measured * 1e3, priced * 1e3
    error = priced / measured - 1.0 if measured > 0 else float("nan")
    return {"policy": policy, "load": load, "metric": METRIC, "statistic": STATISTIC,
            "measured": measured, "simulated": priced, "relative_error": error,
            "tolerance": TOLERANCE, "ok": bool(abs(error) <= TOLERANCE)}


def inherited_note(row: dict[str, Any]) -> str:
    """What the row means, in words, for the report's notes."""
    return (f"{row['policy']} {row['load']}: the cost model priced the engine's own steps at "
            f"{row['relative_error']:+.1%} of their measured time; the latency errors inherit "
            "about that much (the machine since calibrating, or a profile for other steps): "
            "the rest is the simulator's")
