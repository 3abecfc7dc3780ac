"""Calibration views: shipped and cached profiles' provenance (and whether each was measured
on this machine), a profile's cost surface, and an uploaded profile table (contract 2)
against the profile's predictions.

Profile tables (contract 2, one row per measured step) are read by
:mod:`simulator.profile_table`, the one reader of that format.
Residual: ``measured / predicted - 1`` (positive: the step was slower than predicted).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from simulator import profile_table
from simulator.costs.base import CostModel
from simulator.costs.machine import machine_note, profile_fingerprint
from simulator.costs.profile import CostProfile, load_profile, shipped_profiles
from simulator.fingerprint import short
from simulator.profile_cache import cache_root
from simulator.shapes import StepShapes
from simulator.specs import get_hardware, get_model

PROFILE_TABLE_COLUMNS = profile_table.REQUIRED_COLUMNS


def provenance_table(paths: list[Path] | None = None) -> pd.DataFrame:
    """One row per cost profile (default: the shipped ones): what it prices, its form, fit
    and provenance, the machine it was measured on and whether that is this one."""
    rows = []
    for path in shipped_profiles() if paths is None else paths:
        p = load_profile(path)
        fp = profile_fingerprint(p)
        rows.append({"file": path.name, "hardware": p.hardware, "model": p.model,
                     "weight_dtype": p.weight_dtype, "tp": p.tp, "form": p.form,
                     "source": p.provenance.get("source", ""),
                     "measured_by": p.provenance.get("measured_by", ""),
                     "date": p.provenance.get("date", ""),
                     "mape": p.fit.get("mape"), "n_points": p.fit.get("n_points"),
                     "measured_on": short(fp) if fp else "",
                     "this_machine": machine_note(p)})
    return pd.DataFrame(rows)


def cached_table() -> pd.DataFrame:
    """The profiles ``servesim calibrate --here`` stored in the per-user cache (any machine's
    folder), with the same columns as :func:`provenance_table`, plus their path."""
    root = cache_root()
    paths = sorted(root.glob("*/*.json")) if root.is_dir() else []
    table = provenance_table(paths)
    return table.assign(path=[str(p) for p in paths]) if len(table) else table


def profile_cost(path: str | Path) -> tuple[CostProfile, CostModel]:
    """A profile file and the cost model it builds (catalogue model and hardware)."""
    profile = load_profile(path)
    return profile, profile.build(get_model(profile.model), get_hardware(profile.hardware))


def _shapes(p: np.ndarray, a: np.ndarray, d: np.ndarray, c: np.ndarray) -> StepShapes:
    zeros = np.zeros(len(d), dtype=np.int64)
    return StepShapes(num_prefill_tokens=p.astype(np.int64), prefill_attn_work=a.astype(float),
                      num_decode_seqs=d.astype(np.int64), decode_context_tokens=c.astype(np.int64),
                      num_admitted=zeros, num_finished=zeros)


def decode_surface(cost: CostModel, batch: np.ndarray, context: np.ndarray) -> np.ndarray:
    """Pure-decode step time (ms), shape (len(context), len(batch)): D = b, C = b * ctx."""
    b, ctx = np.meshgrid(batch, context)
    zeros = np.zeros(b.size)
    shapes = _shapes(zeros, zeros, b.ravel(), (b * ctx).ravel())
    return cost.step_times(shapes).reshape(b.shape) * 1000


def prefill_curve(cost: CostModel, tokens: np.ndarray) -> np.ndarray:
    """Step time (ms) of one whole prompt of each length from an empty cache: A = n^2 / 2."""
    n = np.asarray(tokens, dtype=float)
    zeros = np.zeros(n.size)
    return cost.step_times(_shapes(n, n * n / 2, zeros, zeros)) * 1000


def read_profile_table(path: Path) -> tuple[pd.DataFrame, str | None]:
    """The steps of an uploaded profile table, read by the simulator's reader of contract 2
    (:mod:`simulator.profile_table`), and its warning when ``time_s`` looks like ms."""
    steps = profile_table.read_profile_table(path).steps
    return steps, profile_table.millisecond_warning(steps, path.name)


def predict(cost: CostModel, table: pd.DataFrame) -> pd.DataFrame:
    """The table with ``predicted_s`` and ``residual_pct`` (measured / predicted - 1, %)."""
    predicted = cost.step_times(StepShapes.from_table(table))
    return table.assign(predicted_s=predicted,
                        residual_pct=(table["time_s"].to_numpy() / predicted - 1) * 100)


def fit_quality(table: pd.DataFrame) -> dict[str, float]:
    """MAPE (%) and R^2 of the predictions over the measured step times, and the row count."""
    y, f = table["time_s"].to_numpy(float), table["predicted_s"].to_numpy(float)
    ss_res, ss_tot = float(np.sum((y - f) ** 2)), float(np.sum((y - y.mean()) ** 2))
    return {"mape_pct": float(np.mean(np.abs(f - y) / y) * 100),
            "r2": 1 - ss_res / ss_tot if ss_tot > 0 else float("nan"), "n_points": len(y)}


def synthetic_table(cost: CostModel, scale: float = 1.1, noise: float = 0.02,
                    seed: int = 0) -> pd.DataFrame:
    """A profile table as if measured on a device ``scale`` x slower than ``cost`` predicts."""
    rng = np.random.default_rng(seed)
    prompts = np.array([128, 256, 512, 1024, 2048, 4096])
    batches = np.array([1, 2, 4, 8, 16, 32, 64, 128])
    ctx = 1024
    rows = [("prefill", n, 0, n * n / 2, 0, 1) for n in prompts]
    rows += [("decode", 0, b, 0.0, b * ctx, b) for b in batches]
    df = pd.DataFrame(rows, columns=list(PROFILE_TABLE_COLUMNS[:-1]))
    base = predict(cost, df.assign(time_s=1.0))["predicted_s"].to_numpy()
    return df.assign(time_s=base * scale * (1 + noise * rng.standard_normal(len(df))))
