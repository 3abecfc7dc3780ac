"""Fit the linear cost model (design.md, "Cost models") to a profile table.

    t = b0 + b1*P + b2*A + b3*D + b4*C + b5*(admitted + finished)

Non-negative least squares (``scipy.optimize.nnls``): every coefficient is a physical time
per unit of work, so a negative one would be a fitting artefact that prices some step
below zero. Rows are weighted by ``1 / time_s``, so the fit minimises the sum of squared
*relative* errors: decode steps (tens of ms) and long prefills (seconds) differ by 100x,
and unweighted least squares would fit the prefills and leave decode, which is most of the
steps a server runs, with large relative errors.

Fit quality is measured on points held out from the fit: k-fold cross-validation over
distinct step shapes (shape i goes to fold i mod k in sorted order, so it is deterministic
and repeated measurements of one shape never sit on both sides). Every point is predicted
once by a model that did not see its shape; the coefficients shipped are then fitted on all
points.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd
from scipy.optimize import nnls

from simulator.costs.profile import LINEAR_COEFFICIENTS, CostProfile
from simulator.errors import ConfigError
from simulator.profile_table import validate_profile_table

TARGET_MAPE = 0.03  # issue 4: held-out mean absolute percentage error per shipped profile
REGION_WARN_MAPE = 0.05  # a phase whose held-out MAPE exceeds this is called out
SHAPE_COLUMNS = ("num_prefill_tokens", "prefill_attn_work", "num_decode_seqs",
                 "decode_context_tokens", "num_admitted", "num_finished")
RANGE_COLUMNS = ("num_prefill_tokens", "prefill_attn_work", "num_decode_seqs",
                 "decode_context_tokens", "batch_size", "time_s")


@dataclass(slots=True)
class FitReport:
    """Coefficients and how well they predict points they were not fitted on."""

    coefficients: dict[str, float]  # LinearCost fields, seconds per unit
    n_points: int  # rows fitted
    n_shapes: int  # distinct step shapes among them
    folds: int  # k of the k-fold split over shapes
    mape: float  # held-out mean |predicted / measured - 1|
    max_ape: float  # held-out max of the same
    r2: float  # held-out coefficient of determination of time_s
    insample_mape: float  # the same MAPE with the final coefficients on all points
    ranges: dict[str, list[float]]  # column -> [min, max] covered by the points
    by_phase: dict[str, dict[str, float]]  # phase -> n, held-out mape and max_ape
    worst: dict[str, Any]  # the held-out point with the largest error
    heldout_pred_s: np.ndarray = field(repr=False)  # held-out prediction per row
    warnings: list[str] = field(default_factory=list)  # regions the form misses

    def fit_dict(self) -> dict[str, Any]:
        """The ``fit`` object of a cost profile (data contract 3)."""
        return {
            "mape": round(self.mape, 5), "max_ape": round(self.max_ape, 5),
            "r2": round(self.r2, 5), "n_points": self.n_points, "n_shapes": self.n_shapes,
            "heldout": f"{self.folds}-fold over distinct step shapes",
            "weighting": "relative: rows weighted by 1/time_s",
            "insample_mape": round(self.insample_mape, 5),
            "by_phase": self.by_phase, "worst": self.worst, "ranges": self.ranges,
            "warnings": self.warnings,
        }

    def summary(self) -> str:
        """A few lines for a terminal: held-out error, per phase, and warnings."""
        lines = [f"held-out ({self.folds}-fold over {self.n_shapes} shapes, "
                 f"{self.n_points} points): mean APE {self.mape:.2%}, max APE "
                 f"{self.max_ape:.2%}, R^2 {self.r2:.4f}; in-sample mean APE "
                 f"{self.insample_mape:.2%}"]
        for phase, q in self.by_phase.items():
            lines.append(f"  {phase:8s} n={q['n']:<4d} mean APE {q['mape']:.2%}  "
                         f"max APE {q['max_ape']:.2%}")
        lines += [f"warning: {w}" for w in self.warnings]
        return "\n".join(lines)


def design_matrix(steps: pd.DataFrame) -> np.ndarray:
    """Columns 1, P, A, D, C, admitted + finished: the terms of LINEAR_COEFFICIENTS."""
    s = steps
    return np.column_stack([
        np.ones(len(s)), s["num_prefill_tokens"], s["prefill_attn_work"],
        s["num_decode_seqs"], s["decode_context_tokens"], s["num_admitted"] + s["num_finished"],
    ]).astype(np.float64)


def nnls_relative(x: np.ndarray, t: np.ndarray) -> np.ndarray:
    """Non-negative b minimising sum(((x @ b - t) / t)^2)."""
    xw = x / t[:, None]
    # Columns span ~1 to ~1e8 (A is tokens^2): scale each to unit norm for conditioning.
    # A positive scale keeps the sign constraint, so non-negativity is preserved.
    norms = np.linalg.norm(xw, axis=0)
    norms[norms == 0] = 1.0
    b, _ = nnls(xw / norms, np.ones_like(t))
    return np.maximum(b / norms, 0.0)


def shape_folds(steps: pd.DataFrame, k: int) -> np.ndarray:
    """Fold index per row: distinct shapes in sorted order dealt round-robin into k folds."""
    keys = steps[list(SHAPE_COLUMNS)].astype(np.float64)
    _, inverse = np.unique(keys.to_numpy(), axis=0, return_inverse=True)
    return np.asarray(inverse).reshape(-1) % k


def _ape(pred: np.ndarray, t: np.ndarray) -> np.ndarray:
    return np.asarray(np.abs(pred / t - 1.0))


def fit_linear(steps: pd.DataFrame, folds: int = 5, source: str = "profile table") -> FitReport:
    """Fit the linear form to a profile table and measure it on held-out shapes."""
    steps = validate_profile_table(steps, source).reset_index(drop=True)
    x, t = design_matrix(steps), steps["time_s"].to_numpy(np.float64)
    fold = shape_folds(steps, folds)
    n_shapes = int(len(np.unique(steps[list(SHAPE_COLUMNS)].to_numpy(np.float64), axis=0)))
    if n_shapes < 2 * folds:
        raise ConfigError(f"{source}: {n_shapes} distinct step shapes; need at least "
                          f"{2 * folds} for a {folds}-fold held-out fit")
    heldout = np.empty_like(t)
    for f in range(folds):
        test = fold == f
        heldout[test] = x[test] @ nnls_relative(x[~test], t[~test])
    b = nnls_relative(x, t)
    ape = _ape(heldout, t)
    ss_tot = float(np.sum((t - t.mean()) ** 2))
    r2 = 1.0 - float(np.sum((heldout - t) ** 2)) / ss_tot if ss_tot > 0 else float("nan")
    by_phase = {
        str(ph): {"n": int(m.sum()), "mape": round(float(ape[m].mean()), 5),
                  "max_ape": round(float(ape[m].max()), 5)}
        for ph in ("prefill", "decode", "mixed")
        if (m := (steps["phase"] == ph).to_numpy()).any()
    }
    i = int(np.argmax(ape))
    worst = {"row": i, "phase": str(steps.at[i, "phase"]),
             **{c: float(steps.at[i, c]) for c in SHAPE_COLUMNS[:4]},
             "measured_s": float(t[i]), "predicted_s": float(heldout[i]), "ape": float(ape[i])}
    report = FitReport(
        coefficients={k: float(v) for k, v in zip(LINEAR_COEFFICIENTS, b, strict=True)},
        n_points=len(t), n_shapes=n_shapes, folds=folds, mape=float(ape.mean()),
        max_ape=float(ape.max()), r2=r2, insample_mape=float(_ape(x @ b, t).mean()),
        ranges={c: [float(steps[c].min()), float(steps[c].max())] for c in RANGE_COLUMNS},
        by_phase=by_phase, worst=worst, heldout_pred_s=heldout,
    )
    report.warnings = region_warnings(report)
    return report


def region_warnings(report: FitReport) -> list[str]:
    """Say where the linear form misses: phases above REGION_WARN_MAPE, the worst point."""
    out = []
    for phase, q in report.by_phase.items():
        if q["mape"] > REGION_WARN_MAPE:
            out.append(f"the linear form misses {phase} steps: held-out mean APE "
                       f"{q['mape']:.1%} (max {q['max_ape']:.1%}); a piecewise or "
                       "per-phase form may be needed")
    if report.mape > TARGET_MAPE:
        w = report.worst
        out.append(f"held-out mean APE {report.mape:.1%} is above the {TARGET_MAPE:.0%} "
                   f"target; worst: {w['phase']} row {w['row']} (P={w['num_prefill_tokens']:g}, "
                   f"D={w['num_decode_seqs']:g}) measured {w['measured_s'] * 1e3:.1f} ms, "
                   f"predicted {w['predicted_s'] * 1e3:.1f} ms")
    return out


def fit_profile(
    steps: pd.DataFrame, *, hardware: str, model: str, weight_dtype: str, kv_dtype: str,
    tp: int, provenance: dict[str, Any], folds: int = 5, source: str = "profile table",
) -> tuple[CostProfile, FitReport]:
    """Fit ``steps`` and wrap the result as a linear cost profile (data contract 3)."""
    report = fit_linear(steps, folds, source)
    profile = CostProfile(
        hardware=hardware, model=model, weight_dtype=weight_dtype, kv_dtype=kv_dtype, tp=tp,
        form="linear", coefficients=report.coefficients, fit=report.fit_dict(),
        provenance=provenance,
    )
    return profile, report
