"""Fit a cost model (design.md, "Cost models") to a profile table.

Two fitted forms (simulator/costs; docs/calibration.md says why the second exists):

- ``"piecewise"`` (:class:`~simulator.costs.PiecewiseCost`, the default of
  ``servesim calibrate``): a fixed cost per step kind (prefill only, decode only, mixed,
  one token), the linear terms below, and two knees in the step's token count T = P + D::

      t = fixed(kind) + b1*P + k1*max(T - K1, 0) + k2*max(T - K2, 0)
          + b2*A + b3*D + b4*C + b5a*admitted + b5f*finished

  The knees K1 < K2 are chosen from a power-of-two grid (KNEE_GRID) by the smallest
  in-sample relative error; for each pair the rest is one linear fit. The fixed costs are
  fitted as the one-token step's plus a non-negative extra per kind, so no kind is cheaper
  than a one-token step; kinds the table has no rows of are set by stated rules
  (``FitReport.unmeasured``), as are admission and finishing costs it cannot see (0).
- ``"linear"`` (:class:`~simulator.costs.LinearCost`)::

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
once by a model that did not see its shape (knees included: each fold chooses its own);
the coefficients shipped are then fitted on all points.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from itertools import combinations
from typing import Any

import numpy as np
import pandas as pd
from scipy.optimize import nnls

from simulator.costs.base import RowsFactorCost
from simulator.costs.profile import FITTED, LINEAR_COEFFICIENTS, CostProfile
from simulator.errors import ConfigError
from simulator.profile_table import ProfileTable, validate_profile_table

TARGET_MAPE = 0.03  # issue 4: held-out mean absolute percentage error per shipped profile
REGION_WARN_MAPE = 0.05  # a phase whose held-out MAPE exceeds this is called out
SHAPE_COLUMNS = ("num_prefill_tokens", "prefill_attn_work", "num_decode_seqs",
                 "decode_context_tokens", "num_admitted", "num_finished")
RANGE_COLUMNS = ("num_prefill_tokens", "prefill_attn_work", "num_decode_seqs",
                 "decode_context_tokens", "batch_size", "time_s")
KNEE_GRID = tuple(float(2**k) for k in range(3, 21))  # candidate knees: 8 ... 1,048,576 tokens
FIXED_COSTS = ("prefill_step_s", "decode_step_s", "mixed_step_s", "single_token_step_s")
# Fixed costs of step kinds the table has no rows of, from measured ones (first found); a
# one-token step instead gets the least measured fixed cost, a mixed one max(prefill, decode).
FIXED_FALLBACK = {
    "decode_step_s": ("single_token_step_s", "prefill_step_s", "mixed_step_s"),
    "prefill_step_s": ("decode_step_s", "single_token_step_s", "mixed_step_s"),
}

@dataclass(slots=True)
class FitReport:
    """Coefficients and how well they predict points they were not fitted on."""

    coefficients: dict[str, float]  # the form's fields (seconds per unit; knees in tokens)
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
    form: str = "linear"  # "linear" or "piecewise"
    unmeasured: dict[str, str] = field(default_factory=dict)  # coefficient -> rule that set it
    step_time_cv: float | None = None  # median over shapes of the repeats' std / mean
    rows_factor: dict[str, float] = field(default_factory=dict)  # decode rows -> factor

    def fit_dict(self) -> dict[str, Any]:
        """The ``fit`` object of a cost profile (data contract 3)."""
        out: dict[str, Any] = {
            "mape": round(self.mape, 5), "max_ape": round(self.max_ape, 5),
            "r2": round(self.r2, 5), "n_points": self.n_points, "n_shapes": self.n_shapes,
            "heldout": f"{self.folds}-fold over distinct step shapes",
            "weighting": "relative: rows weighted by 1/time_s",
            "insample_mape": round(self.insample_mape, 5),
            "by_phase": self.by_phase, "worst": self.worst, "ranges": self.ranges,
            "warnings": self.warnings,
        }
        if self.step_time_cv is not None:
            out["step_time_cv"] = round(self.step_time_cv, 5)
            out["step_time_cv_note"] = ("median over shapes of std/mean of one shape's repeats; "
                                        "the simulator draws each step's time with this CV "
                                        "(cost.jitter_cv overrides, 0 turns it off)")
        if self.form == "piecewise":
            out["knees"] = ("K1 < K2 from powers of two 8..2^20 tokens, least in-sample "
                            "relative error; each held-out fold chooses its own")
            out["unmeasured"] = self.unmeasured
        return out

    def summary(self) -> str:
        """A few lines for a terminal: held-out error, per phase, factors and warnings."""
        lines = [f"{self.form} form, held-out ({self.folds}-fold over {self.n_shapes} shapes, "
                 f"{self.n_points} points): mean APE {self.mape:.2%}, max APE "
                 f"{self.max_ape:.2%}, R^2 {self.r2:.4f}; in-sample mean APE "
                 f"{self.insample_mape:.2%}"]
        for phase, q in self.by_phase.items():
            lines.append(f"  {phase:8s} n={q['n']:<4d} mean APE {q['mape']:.2%}  "
                         f"max APE {q['max_ape']:.2%}")
        if self.form == "piecewise":
            c = self.coefficients
            knees = [f"{c[f'knee{i}_tokens']:g} tokens (+{c[f'knee{i}_token_s'] * 1e6:.3g} "
                     "us/token)" for i in (1, 2) if c[f"knee{i}_token_s"] > 0]
            lines.append(f"  knees: {', '.join(knees) or 'none'}")
        if self.rows_factor:
            lines.append("  decode rows factor: " + ", ".join(
                f"{k}: {v:.3f}" for k, v in self.rows_factor.items()))
        if self.step_time_cv is not None:
            lines.append(f"  step-to-step variation (median CV of repeats): "
                         f"{self.step_time_cv:.1%}")
        lines += [f"note: {k} not measured: {v}" for k, v in self.unmeasured.items()]
        lines += [f"warning: {w}" for w in self.warnings]
        return "\n".join(lines)


def design_matrix(steps: pd.DataFrame) -> np.ndarray:
    """Columns 1, P, A, D, C, admitted + finished: the terms of LINEAR_COEFFICIENTS."""
    s = steps
    return np.column_stack([
        np.ones(len(s)), s["num_prefill_tokens"], s["prefill_attn_work"],
        s["num_decode_seqs"], s["decode_context_tokens"], s["num_admitted"] + s["num_finished"],
    ]).astype(np.float64)


def step_kinds(steps: pd.DataFrame) -> dict[str, np.ndarray]:
    """Per fixed cost of the piecewise form, which rows pay it (PiecewiseCost's rule)."""
    p = steps["num_prefill_tokens"].to_numpy(np.float64)
    d = steps["num_decode_seqs"].to_numpy(np.float64)
    one = p + d == 1
    return {"prefill_step_s": (p > 0) & (d == 0) & ~one, "decode_step_s": (p == 0) & ~one,
            "mixed_step_s": (p > 0) & (d > 0), "single_token_step_s": one}


@dataclass(frozen=True)
class PiecewiseColumns:
    """The piecewise form's design matrix for a step table: base (every row, when the
    table has one-token steps; else none), extra fixed cost of prefill, decode and mixed
    steps, P, the two hinges, A, D, C, admitted, finished. All but the hinges are read
    from the table once: the fit tries every pair of knees on the same table."""

    before: np.ndarray  # base, the three extra fixed costs, P
    tokens: np.ndarray  # P + D a row, which the hinges are of
    after: np.ndarray  # A, D, C, admitted, finished

    @classmethod
    def of(cls, steps: pd.DataFrame) -> PiecewiseColumns:
        s = steps
        p = s["num_prefill_tokens"].to_numpy(np.float64)
        tokens = p + s["num_decode_seqs"].to_numpy(np.float64)
        kinds = step_kinds(s)
        base = np.ones(len(s)) if kinds["single_token_step_s"].any() else np.zeros(len(s))
        before = np.column_stack([base, *(kinds[k].astype(np.float64) for k in FIXED_COSTS[:3]),
                                  p]).astype(np.float64)
        after = np.column_stack([s["prefill_attn_work"], s["num_decode_seqs"],
                                 s["decode_context_tokens"], s["num_admitted"],
                                 s["num_finished"]]).astype(np.float64)
        return cls(before, tokens, after)

    def matrix(self, knees: tuple[float, float]) -> np.ndarray:
        """The form's design matrix at knees (K1, K2)."""
        return np.column_stack([self.before, np.maximum(self.tokens - knees[0], 0.0),
                                np.maximum(self.tokens - knees[1], 0.0), self.after])


def nnls_relative(x: np.ndarray, t: np.ndarray) -> np.ndarray:
    """Non-negative b minimising sum(((x @ b - t) / t)^2)."""
    xw = x / t[:, None]
    # Columns span ~1 to ~1e8 (A is tokens^2): scale each to unit norm for conditioning.
    # A positive scale keeps the sign constraint, so non-negativity is preserved.
    norms = np.linalg.norm(xw, axis=0)
    norms[norms == 0] = 1.0
    b, _ = nnls(xw / norms, np.ones_like(t))
    return np.maximum(b / norms, 0.0)


def knee_pairs(steps: pd.DataFrame) -> list[tuple[float, float]]:
    """Candidate (K1, K2): grid knees below the largest step's token count, K1 < K2."""
    top = float((steps["num_prefill_tokens"] + steps["num_decode_seqs"]).max())
    grid = [k for k in KNEE_GRID if k < top]
    return list(combinations(grid, 2)) or [(k, k) for k in grid] or [(0.0, 0.0)]


def fit_piecewise_coefficients(steps: pd.DataFrame) -> tuple[dict[str, float], dict[str, str]]:
    """PiecewiseCost coefficients for ``steps``, and those set by rule, not by data."""
    t = steps["time_s"].to_numpy(np.float64)
    best: tuple[float, tuple[float, float], np.ndarray] | None = None
    columns = PiecewiseColumns.of(steps)
    for knees in knee_pairs(steps):
        x = columns.matrix(knees)
        b = nnls_relative(x, t)
        err = float(np.sum((x @ b / t - 1.0) ** 2))
        if best is None or err < best[0] * (1 - 1e-9):
            best = (err, knees, b)
    assert best is not None
    _, (k1, k2), b = best
    (base, pre, dec, mix, b1, h1, h2, b2, b3, b4, admit, finish) = (float(v) for v in b)
    if k1 == k2:  # a degenerate grid (tiny steps only): both hinges are one
        h1, h2 = h1 + h2, 0.0
    coef = {"prefill_step_s": base + pre, "decode_step_s": base + dec,
            "mixed_step_s": base + mix, "single_token_step_s": base, "prefill_token_s": b1,
            "knee1_tokens": k1 if h1 > 0 else 0.0, "knee1_token_s": h1,
            "knee2_tokens": k2 if h2 > 0 else 0.0, "knee2_token_s": h2,
            "prefill_attn_s": b2, "decode_seq_s": b3, "decode_context_s": b4,
            "admit_s": admit, "finish_s": finish}
    present = {k: bool(m.any()) for k, m in step_kinds(steps).items()}
    present.update(admit_s=bool((steps["num_admitted"] > 0).any()),
                   finish_s=bool((steps["num_finished"] > 0).any()))
    return _fill_unmeasured(coef, present)


def _fill_unmeasured(coef: dict[str, float], present: dict[str, bool]
                     ) -> tuple[dict[str, float], dict[str, str]]:
    """Set what the table cannot show, by the rules in FIXED_FALLBACK's comment."""
    out, rules = dict(coef), {}
    if not present["single_token_step_s"]:
        measured = [k for k in FIXED_COSTS[:3] if present[k]]
        if measured:
            out["single_token_step_s"] = min(coef[k] for k in measured)
            rules["single_token_step_s"] = ("no one-token steps in the table; set to the "
                                            "least measured fixed cost")
    for name, order in FIXED_FALLBACK.items():
        if not present[name]:
            source = next((k for k in order if present[k]), None)
            if source is not None:
                out[name] = out[source]
                rules[name] = f"no such steps in the table; set to {source}"
    if not present["mixed_step_s"]:
        out["mixed_step_s"] = max(out["prefill_step_s"], out["decode_step_s"])
        rules["mixed_step_s"] = ("no mixed steps in the table; set to max(prefill_step_s, "
                                 "decode_step_s): one forward pass pays one fixed cost")
    for name, what in (("admit_s", "admits"), ("finish_s", "finishes")):
        if not present[name]:
            rules[name] = f"no step in the table {what} a request; set to 0"
    return out, rules


def fit_coefficients(steps: pd.DataFrame, form: str) -> tuple[dict[str, float], dict[str, str]]:
    """The form's coefficients fitted to ``steps`` (validated), and rule-set ones."""
    if form == "piecewise":
        return fit_piecewise_coefficients(steps)
    if form != "linear":
        raise ConfigError(f"form={form!r}: the fit knows {tuple(FITTED)}")
    b = nnls_relative(design_matrix(steps), steps["time_s"].to_numpy(np.float64))
    return {k: float(v) for k, v in zip(LINEAR_COEFFICIENTS, b, strict=True)}, {}


def predict(form: str, coefficients: dict[str, float], steps: pd.DataFrame,
            rows_factor: dict[str, float] | None = None) -> np.ndarray:
    """Step times the fitted cost model gives ``steps``: the simulator's own ``step_times``."""
    cost: Any = FITTED[form][0](**coefficients)
    if rows_factor:
        cost = RowsFactorCost.from_mapping(cost, rows_factor)
    return np.asarray(cost.step_times(ProfileTable(steps=steps).shapes()))


def fit_rows_factor(steps: pd.DataFrame, predicted_s: np.ndarray) -> dict[str, float]:
    """Per decode row count: the median of measured / predicted over the steps with that
    many decode rows (the form's smooth terms cannot follow kernel or CUDA-graph steps in
    D; see ``simulator.costs.base.RowsFactorCost``). Empty when no step decodes."""
    d = steps["num_decode_seqs"].to_numpy(np.int64)
    ratio = steps["time_s"].to_numpy(np.float64) / predicted_s
    return {str(r): round(float(np.median(ratio[d == r])), 5)
            for r in sorted(set(d[d > 0].tolist()))}


def shape_folds(steps: pd.DataFrame, k: int) -> np.ndarray:
    """Fold index per row: distinct shapes in sorted order dealt round-robin into k folds."""
    keys = steps[list(SHAPE_COLUMNS)].astype(np.float64)
    _, inverse = np.unique(keys.to_numpy(), axis=0, return_inverse=True)
    return np.asarray(inverse).reshape(-1) % k


def _ape(pred: np.ndarray, t: np.ndarray) -> np.ndarray:
    return np.asarray(np.abs(pred / t - 1.0))


def fit_steps(steps: pd.DataFrame, form: str = "piecewise", folds: int = 5,
              source: str = "profile table", rows_factor: bool = False) -> FitReport:
    """Fit ``form`` to a profile table and measure it on held-out shapes.

    ``rows_factor``: also fit a factor per decode row count (each fold fits its own).
    """
    if form not in FITTED:
        raise ConfigError(f"form={form!r}: the fit knows {tuple(FITTED)}")
    steps = validate_profile_table(steps, source).reset_index(drop=True)
    t = steps["time_s"].to_numpy(np.float64)
    fold = shape_folds(steps, folds)
    n_shapes = int(len(np.unique(steps[list(SHAPE_COLUMNS)].to_numpy(np.float64), axis=0)))
    if n_shapes < 2 * folds:
        raise ConfigError(f"{source}: {n_shapes} distinct step shapes; need at least "
                          f"{2 * folds} for a {folds}-fold held-out fit")
    heldout = np.empty_like(t)
    for f in range(folds):
        test = fold == f
        train = steps[~test]
        coef, _ = fit_coefficients(train, form)
        factor = fit_rows_factor(train, predict(form, coef, train)) if rows_factor else None
        heldout[test] = predict(form, coef, steps[test], factor)
    coefficients, unmeasured = fit_coefficients(steps, form)
    factors = fit_rows_factor(steps, predict(form, coefficients, steps)) if rows_factor else {}
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
    insample = _ape(predict(form, coefficients, steps, factors), t)
    report = FitReport(
        coefficients=coefficients, n_points=len(t), n_shapes=n_shapes, folds=folds,
        mape=float(ape.mean()), max_ape=float(ape.max()), r2=r2,
        insample_mape=float(insample.mean()),
        ranges={c: [float(steps[c].min()), float(steps[c].max())] for c in RANGE_COLUMNS},
        by_phase=by_phase, worst=worst, heldout_pred_s=heldout, form=form,
        unmeasured=unmeasured,
        step_time_cv=(float(steps["time_cv"].median()) if "time_cv" in steps
                      and steps["time_cv"].notna().any() else None),
        rows_factor=factors,
    )
    report.warnings = region_warnings(report)
    return report


def region_warnings(report: FitReport) -> list[str]:
    """Say where the form misses: phases above REGION_WARN_MAPE, the worst point."""
    out = []
    hint = ("a piecewise form (--form piecewise) may be needed" if report.form == "linear" else
            "look for repeat spread or irregular points there (docs/calibration.md)")
    for phase, q in report.by_phase.items():
        if q["mape"] > REGION_WARN_MAPE:
            out.append(f"the {report.form} form misses {phase} steps: held-out mean APE "
                       f"{q['mape']:.1%} (max {q['max_ape']:.1%}); {hint}")
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
    form: str = "linear", rows_factor: bool = False,
) -> tuple[CostProfile, FitReport]:
    """Fit ``steps`` and wrap the result as a cost profile of ``form`` (data contract 3).

    ``servesim calibrate`` and ``calibrate.splitwise`` pass ``form="piecewise"``; the
    default stays "linear" for callers that have not moved to it yet.
    """
    report = fit_steps(steps, form, folds, source, rows_factor)
    profile = CostProfile(
        hardware=hardware, model=model, weight_dtype=weight_dtype, kv_dtype=kv_dtype, tp=tp,
        form=form, coefficients=report.coefficients, fit=report.fit_dict(),
        provenance=provenance, decode_rows_factor=report.rows_factor,
    )
    return profile, report
