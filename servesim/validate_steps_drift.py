"""validate's view of the engine's own steps: how the profile priced them, and ``--drift steps``.

The engine's step log records every step it served, with its shape and measured duration.
:func:`priced_rows` prices those very steps with each point's cost model
(calibrate/validate_steps.py: one ``steps priced_total`` row a point), so a report shows how
much of a latency error is the profile's price of this machine's steps rather than the
simulator's scheduling. :func:`steps_drift_corrected` (``validate --drift steps``) goes one
step further: it scales each point's kernel-level step times so that the engine's steps,
priced with their host work, add up to what they measured, and simulates with that. What is
left is the simulator's error at the speed the machine actually served at; the scale is
printed, and the priced row stays the one of the profile as chosen, so a profile that is
off still shows.

The cost model is ``host + time_scale x kernel`` (simulator/costs/from_config.py), so two
pricings of the same steps at ``time_scale`` t and 2t give the kernel part (their
difference) and the host part exactly; the factor is ``(measured - host) / kernel``.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pandas as pd

from calibrate.validate_steps import measured_and_priced, priced_steps_row
from simulator.costs.base import CostModel
from simulator.deployment import resolve

Point = tuple[dict[str, Any], dict[str, Any]]
STEP_COLUMNS = {"point", "start_s", "end_s", "num_decode_seqs"}
FACTOR_RANGE = (0.5, 2.0)  # beyond it the profile is for other steps: not a drift


def measured_steps(folder: Path, n_points: int) -> pd.DataFrame | None:
    """The measured side's step log (all points), or None where it has none (a client's
    file or an endpoint's measurement records no steps)."""
    path = folder / "steps.parquet"
    if not folder.is_dir() or not path.is_file():
        return None
    steps = pd.read_parquet(path)
    if not STEP_COLUMNS <= set(steps.columns) or steps.empty \
            or int(steps["point"].max()) >= n_points:
        return None
    return steps


def unjittered(point: dict[str, Any], time_scale: float | None = None) -> CostModel:
    """The point's cost model with its step jitter off (mean step times), optionally at
    another ``cost.time_scale``."""
    section = {**point.get("cost", {}), "jitter_cv": 0}
    if time_scale is not None:
        section["time_scale"] = time_scale
    return resolve({**point, "cost": section}).cost


def priced_rows(points: list[Point], steps: pd.DataFrame, requests: list[pd.DataFrame],
                names: list[tuple[str, Any]]) -> list[dict[str, Any] | None]:
    """Each point's ``steps priced_total`` row (None without steps); ``names`` are the
    (policy, load) labels of the report."""
    return [priced_steps_row(steps[steps["point"] == i], req, unjittered(point),
                             policy=policy, load=load)
            for i, ((_, point), req, (policy, load)) in enumerate(
                zip(points, requests, names, strict=True))]


def steps_factor(point: dict[str, Any], steps: pd.DataFrame, requests: pd.DataFrame
                 ) -> float | None:
    """The multiplier of the point's kernel-level step times that makes its priced steps
    add up to the measured ones; None without steps."""
    if steps.empty:
        return None
    scale = float(point.get("cost", {}).get("time_scale", 1.0))
    measured, once = measured_and_priced(steps, requests, unjittered(point, scale))
    _, twice = measured_and_priced(steps, requests, unjittered(point, 2 * scale))
    kernel, host = twice - once, 2 * once - twice
    return (measured - host) / kernel if kernel > 0 else None


def steps_drift_corrected(points: list[Point], steps: pd.DataFrame,
                          requests: list[pd.DataFrame], names: list[tuple[str, Any]]
                          ) -> tuple[list[Point], list[str]]:
    """Each point with its ``cost.time_scale`` multiplied by :func:`steps_factor`, and a
    note a point (``names``: its policy and load); a point without steps, or a factor
    outside :data:`FACTOR_RANGE`, is left as it is (and says so)."""
    out, notes = [], []
    for i, ((labels, point), req, (policy, load)) in enumerate(
            zip(points, requests, names, strict=True)):
        where = f"{policy} {load}"
        factor = steps_factor(point, steps[steps["point"] == i], req)
        if factor is None or not FACTOR_RANGE[0] <= factor <= FACTOR_RANGE[1]:
            what = "no steps" if factor is None else f"{factor:.2f}x"
            notes.append(f"{where}: --drift steps not applied ({what}: the profile is for "
                         "other steps or another machine)")
            out.append((labels, point))
            continue
        new = copy.deepcopy(point)
        scale = float(point.get("cost", {}).get("time_scale", 1.0)) * factor
        new["cost"] = {**point.get("cost", {}), "time_scale": scale}
        notes.append(f"{where}: the engine's own steps ran at {factor:.3f}x the profile's "
                     "kernel time; simulated with that as cost.time_scale (--drift steps)")
        out.append((labels, new))
    return out, notes
