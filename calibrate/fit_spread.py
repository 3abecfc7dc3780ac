"""How firmly measured runs pin each term a black-box fit returns.

A fit (calibrate/from_run.py) gives a value for every term it was asked for, whether or not
the runs could tell that term from the others: one load cannot tell slower steps from a
longer queue at the API server, and at light load a request's time before the engine
(``request_s``) and its admission (``admit_s``) move every latency alike. Such a fit reads its
own runs well and a what-if at another load badly. Two measures say which terms the runs
pinned:

- **shared** (0 to 1): how much of the term's effect on the residuals the other fitted terms
  reproduce. At the answer the residuals are linear in the terms while the schedule holds,
  ``r = A @ theta + b`` (:func:`calibrate.from_run.linear_model`), and the soft_l1 loss's
  curvature weighs each row, ``w = (1 + (r / f)^2)^-1.5`` (its Hessian is
  ``A' diag(w) A``). Shared is the R^2 of the term's weighted column regressed on the
  others' (no intercept; ``1 - 1/VIF``). At :data:`SHARED_WARN` or more the fit can trade
  the term against the others at little cost in the loss: the runs pin a combination, not
  the term. Its **partner** is the term whose column is most like its own (the largest
  |cosine|; positive: they move the errors the same way, so one rises as the other falls).
- **spread**: with two or more runs, the term's lowest and highest values over the
  leave-one-run-out fits (each run left out in turn): how far the answer moves with the
  runs it sees.

A term no residual moves (a zero column: ``seq_s`` beside steps it nowhere outlasts,
``intake_s`` where requests never queue at the server) is **not seen**: the runs say nothing
about it, and it keeps its start. The queue terms' columns are finite differences
(``QUEUE_FLOORS_S`` in calibrate/from_run.py), so theirs are a slope over one step, not a
derivative.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from calibrate.from_run import LOSS_SCALE, Calibration, Target, _theta, linear_model, replay
from simulator.costs.host import FIT_TERMS

SHARED_WARN = 0.95  # shared at or above this: the runs hardly tell the term from the others


@dataclass(frozen=True, slots=True)
class TermSpread:
    """How firmly the runs pin one fitted term (module docstring); values in seconds, a
    ratio for ``time_scale``; nan where not measured."""

    term: str
    seen: bool  # some residual moves with the term
    shared: float  # of its effect on the residuals, what the other terms reproduce (0..1)
    partner: str = ""  # the other term whose effect on the residuals is most like this one's
    alike: float = float("nan")  # the cosine of the two effects (weighted as the loss)
    low: float = float("nan")  # its least value over the leave-one-run-out fits
    high: float = float("nan")  # and its largest

    def loose(self) -> bool:
        """Whether the runs left the term loose: not seen, or mostly shared."""
        return not self.seen or self.shared >= SHARED_WARN

    def to_dict(self) -> dict[str, object]:
        """For a profile's fit record (nan as None)."""
        def num(v: float) -> float | None:
            return None if not np.isfinite(v) else round(float(v), 9)

        return {"seen": self.seen, "shared": num(self.shared), "partner": self.partner,
                "alike": num(self.alike),
                "leave_one_out": [num(self.low), num(self.high)]}


def spread_of(a: np.ndarray, residuals: np.ndarray, terms: Sequence[str]) -> list[TermSpread]:
    """Each term's share and partner from the residuals' columns ``a`` (rows x terms, in any
    units: the measures are scale-free) and the residuals at the answer (module docstring)."""
    a = np.asarray(a, dtype=np.float64)
    root_w = (1.0 + (np.asarray(residuals, dtype=np.float64) / LOSS_SCALE) ** 2) ** -0.75
    seen = np.any(a != 0.0, axis=0) & np.all(np.isfinite(a), axis=0)
    out = [TermSpread(t, False, float("nan")) for t in terms]
    idx = [int(i) for i in np.flatnonzero(seen)]
    cols = a[:, idx] * root_w[:, None]  # weighted: cols' cols = H
    cols /= np.linalg.norm(cols, axis=0) if len(idx) else 1.0
    for j, k in enumerate(idx):
        if len(idx) == 1:
            out[k] = TermSpread(terms[k], True, 0.0)
            continue
        others = np.delete(cols, j, axis=1)
        coef = np.linalg.lstsq(others, cols[:, j], rcond=None)[0]
        shared = 1.0 - float(np.sum((cols[:, j] - others @ coef) ** 2))
        cos = others.T @ cols[:, j]
        m = int(np.argmax(np.abs(cos)))
        out[k] = TermSpread(terms[k], True, float(np.clip(shared, 0.0, 1.0)),
                            terms[[i for i in idx if i != k][m]], float(np.clip(cos[m], -1.0, 1.0)))
    return out


def term_spread(targets: Sequence[Target], cal: Calibration, terms: Sequence[str],
                loo: Sequence[Calibration] = ()) -> list[TermSpread]:
    """How firmly ``targets`` pin each of ``terms`` at the answer ``cal``; ``loo``: the
    leave-one-run-out fits, whose range each term's spread reports (one replay a run, and
    one more a queue term)."""
    theta = _theta(cal)
    parts = [linear_model(t.run, replay(t, cal, terms), theta) for t in targets]
    a = np.vstack([p[0] for p in parts])
    r = a @ theta + np.concatenate([p[1] for p in parts])
    out = spread_of(a[:, [FIT_TERMS.index(t) for t in terms]], r, terms)
    if not loo:
        return out
    values = np.array([[c.value(t) for t in terms] for c in loo])
    return [TermSpread(s.term, s.seen, s.shared, s.partner, s.alike,
                       float(values[:, k].min()), float(values[:, k].max()))
            for k, s in enumerate(out)]


def describe_spread(s: TermSpread) -> str:
    """One line for a report: the share, the partner, the leave-one-out range."""
    if not s.seen:
        return "not seen: no error moves with it, so these runs say nothing of it"
    words = f"shared {s.shared:.0%}"
    if s.partner:
        words += f" (most like {s.partner}'s, cos {s.alike:+.2f})"
    if np.isfinite(s.low):
        scale = 1.0 if s.term == "time_scale" else 1e3
        unit = "" if s.term == "time_scale" else " ms"
        words += f"; leave-one-run-out {s.low * scale:.4g} .. {s.high * scale:.4g}{unit}"
    return words + ("  <- loose" if s.loose() else "")
