"""A black-box fit and its checks, as ``servesim calibrate --from-run`` and the dashboard's
Fit report them: the terms (given, or chosen by leave-one-run-out error), the fit, each run
predicted by a fit on the others, how firmly the runs pin each term
(calibrate/fit_spread.py) and, where one is loose, the runs to measure next
(calibrate/next_run.py).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from calibrate.fit_spread import TermSpread, term_spread
from calibrate.from_run import (
    Calibration,
    FitResult,
    Target,
    fit,
    leave_one_out_fits,
    select_terms,
)
from calibrate.next_run import Candidate, candidates


@dataclass(frozen=True, slots=True)
class CheckedFit:
    """A fit with its checks (module docstring)."""

    result: FitResult
    scores: dict[tuple[str, ...], float]  # each candidate term set's held-out score, if chosen
    loo: dict[str, tuple[dict[str, float], Calibration]]  # per run: held-out errors, the fit
    spread: list[TermSpread]  # per fitted term, in order
    nexts: list[Candidate]  # runs to measure next (none when no term is loose)

    @property
    def heldout(self) -> dict[str, dict[str, float]]:
        """Per run: its errors as predicted by a fit on the others."""
        return {name: errs for name, (errs, _) in self.loo.items()}


def assess(targets: Sequence[Target], result: FitResult, loo: Sequence[Calibration] = ()
           ) -> tuple[list[TermSpread], list[Candidate]]:
    """How firmly ``targets`` pin each term of ``result`` (``loo``: the leave-one-run-out
    fits, for the ranges) and, where one is loose, the candidate runs to measure next."""
    spread = term_spread(targets, result.calibration, result.terms, loo)
    if not any(s.loose() for s in spread):
        return spread, []
    return spread, candidates(targets, result.calibration, result.terms)


def fit_checked(targets: Sequence[Target], start: Calibration,
                terms: Sequence[str] | None, one_run: Sequence[str]) -> CheckedFit:
    """Fit ``terms`` (None: chosen by leave-one-run-out error with two runs or more, else
    ``one_run``) from ``start``, then check the answer (module docstring)."""
    scores: dict[tuple[str, ...], float] = {}
    chosen = tuple(one_run) if terms is None else tuple(terms)
    if terms is None and len(targets) >= 2:
        chosen, scores = select_terms(targets, start)
    result = fit(targets, chosen, start)
    loo = leave_one_out_fits(targets, chosen, start) if len(targets) >= 2 else {}
    spread, nexts = assess(targets, result, [cal for _, cal in loo.values()])
    return CheckedFit(result, scores, loo, spread, nexts)
