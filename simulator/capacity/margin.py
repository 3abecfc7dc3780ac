"""A plan's targets tightened by servesim's own error on published runs like each candidate.

``servesim plan --record-margin Q`` sizes each candidate against targets that hold even
had servesim erred on it as it did on a share ``Q`` of the published runs most like it
(its track record, simulator/track_record.py: the stack, GPU, GPUs a replica and kind of
load). A replay's signed error is ``e = simulated / published - 1``, so a measured value
is ``simulated / (1 + e)``. Take ``u``, the error that ``Q`` of the record's errors are at
or above (:func:`under_reading`); then for every one of them ``published <= simulated /
(1 + u)``, and a simulated value within ``target x (1 + u)`` keeps the measured one within
the target. Where ``u >= 0`` (servesim read that figure high on at least ``Q`` of the runs)
the target is kept as given, never loosened.

Which record a target reads: TTFT (and the mean queue time, part of it) the TTFT record;
TPOT and ITL the TPOT record; end-to-end latency the tighter of the two. A target judged
at P90 or above (:data:`simulator.track_record.TAIL_FROM`) reads the tail of the same
latency first, where published runs under its kind of load report one, the percentile
nearest the target's first: for a P99 target their P99 (else P95, else P90) TTFT, P99
(else P90) TPOT and P99 (else P95, else P90) ITL (:func:`simulator.track_record.tail_records`);
servesim's tails and means err differently (on NIM's closed loops it read P95 TTFT lower
than mean TTFT, on vLLM's Poisson runs P99 TTFT nearer than the mean), so a P99 target is
margined by how servesim read P99s where it can be. And which runs:
those whose published figure was within the target (:func:`record_limits`: a run whose
measured TTFT was already past a 500 ms target is not one a plan at that target could be
choosing; overloaded runs, queueing for seconds, read servesim's worst errors and would
set the margin otherwise). Where no run like the deployment published a tail, the margin
is of means and medians, and says so. Either way it is a reading of how far servesim has
been off on runs like it, not a bound on a P99 (docs/capacity.md, "How far to trust the
answer").
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from simulator.errors import ConfigError
from simulator.slo import SLO
from simulator.track_record import (
    FIGURE_LABELS,
    TAIL_FROM,
    TAILS,
    FigureRecord,
    scope_text,
    tail_order,
)

DEFAULT_COVER = 0.8
"""The share of published runs a margin covers where a report shows one unasked (``servesim
run``, the Explorer): four of five."""

# which record figure(s) bound each target (the tightest factor wins)
TARGET_FIGURES: dict[str, tuple[str, ...]] = {
    "ttft": ("ttft",), "tpot": ("tpot",), "itl": ("tpot",), "e2el": ("ttft", "tpot"),
    "mean_queue": ("ttft",),
}
# a tail target's: the latencies of simulator.track_record.TAILS whose tails bound it, each
# beside TARGET_FIGURES' figure read where runs like it published no tail
TARGET_TAILS: dict[str, tuple[str, ...]] = {
    "ttft": ("ttft",), "tpot": ("tpot",), "itl": ("itl",), "e2el": ("ttft", "tpot"),
}


def reads_tails(slo: SLO) -> bool:
    """Whether ``slo``'s targets are tails' (judged at P90 or above), which a margin reads
    off the tail records first."""
    return slo.percentile >= TAIL_FROM


def record_limits(slo: SLO) -> dict[str, float]:
    """Per record figure, the largest published value a run may have to count in a margin:
    the TTFT target for TTFT and its tails, the TPOT target (else the ITL one) for TPOT and
    its tail, the ITL target (else the TPOT one) for ITL's tails."""
    tpot = slo.tpot_ms if slo.tpot_ms is not None else slo.itl_ms
    itl = slo.itl_ms if slo.itl_ms is not None else slo.tpot_ms
    limits = {"ttft": slo.ttft_ms, "tpot": tpot}
    for latency, bound in (("ttft", slo.ttft_ms), ("tpot", tpot), ("itl", itl)):
        limits.update(dict.fromkeys(TAILS[latency], bound))
    return {k: v for k, v in limits.items() if v is not None}


def target_figures(metric: str, percentile: float) -> list[tuple[str, ...]]:
    """The record figures that bound ``metric``'s target (a key of :data:`TARGET_FIGURES`)
    judged at ``percentile``: per bound, its figures in the order asked (at P90 or above
    its latency's tails, the percentile nearest the target's first, then the mean's or
    median's; below, the mean's or median's alone)."""
    if percentile < TAIL_FROM or metric not in TARGET_TAILS:
        return [(f,) for f in TARGET_FIGURES[metric]]
    return [(*tail_order(t, percentile), f)
            for t, f in zip(TARGET_TAILS[metric], TARGET_FIGURES[metric], strict=True)]


def record_query(slo: SLO) -> dict[str, Any]:
    """What a margin for ``slo`` asks the track record for (keyword arguments of
    :func:`simulator.track_record.point_record` and ``deployment_record``): the runs
    within its targets, and the tails nearest its percentile where its targets are tails'."""
    return {"limits": record_limits(slo), "tails": reads_tails(slo),
            "percentile": slo.percentile}


def check_cover(cover: object, where: str = "--record-margin") -> float:
    """``cover`` as a share in (0, 1], else a ConfigError naming ``where``."""
    if isinstance(cover, bool) or not isinstance(cover, int | float) or not (
            math.isfinite(cover) and 0 < cover <= 1):
        raise ConfigError(f"{where} = {cover!r}: must be a share in (0, 1], e.g. 0.8 (the "
                          "share of published runs like each candidate the answer covers)")
    return float(cover)


def under_reading(errors: Sequence[float], cover: float) -> float | None:
    """The largest error ``u`` that at least ``cover`` of ``errors`` (signed, sorted or not)
    are at or above: with n errors in increasing order, the k-th, k = floor(n (1 - cover))
    + 1. None for no errors."""
    if not errors:
        return None
    ordered = sorted(errors)
    k = math.floor(round(len(ordered) * (1.0 - cover), 9)) + 1
    return ordered[min(k, len(ordered)) - 1]


@dataclass(frozen=True, slots=True)
class TargetMargin:
    """How one target was tightened: the factor on it and the record that set it."""

    metric: str  # "ttft", "tpot", "itl", "e2el" or "mean_queue"
    factor: float  # planned target = target x factor, in (0, 1]
    figure: str | None  # the record figure that set the factor (None: no record)
    under: float | None  # that record's under-reading at the cover (u), None: no errors
    cases: int  # the record's cases with a result
    scope: tuple[tuple[str, str], ...]  # the group that answered
    limit: float | None = None  # only its runs published at or under this (ms) counted

    def to_json(self) -> dict[str, Any]:
        """As ``plan.json`` keeps it (``CandidateResult.margins``)."""
        return {"factor": self.factor, "figure": self.figure, "under_reading": self.under,
                "cases": self.cases, "scope": dict(self.scope), "published_at_most": self.limit}

    @classmethod
    def from_json(cls, metric: str, data: Mapping[str, Any]) -> TargetMargin:
        """Back from :meth:`to_json` (the plan's report reads its results)."""
        return cls(metric, float(data["factor"]), data["figure"], data["under_reading"],
                   int(data["cases"]), tuple(dict(data["scope"]).items()),
                   data.get("published_at_most"))


def _factor(record: FigureRecord | None, cover: float) -> tuple[float, float | None]:
    """(factor, u) of one figure's record: 1 + u where u < 0, else 1."""
    u = None if record is None else under_reading(record.errors, cover)
    return (1.0 + u if u is not None and u < 0 else 1.0), u


def margined_slo(slo: SLO, records: Sequence[FigureRecord], cover: float
                 ) -> tuple[SLO, dict[str, TargetMargin]]:
    """``slo`` with each target times its factor (module docstring), and how each was set.
    ``records``: the deployment's track record, read with :func:`record_limits` (each
    record says which runs it counted). No records (a CPU deployment): the SLO as given,
    every factor 1."""
    by_figure = {r.figure: r for r in records}
    targets = dict(slo.targets_ms)
    if slo.mean_queue_ms is not None:
        targets["mean_queue"] = slo.mean_queue_ms
    margins: dict[str, TargetMargin] = {}
    planned: dict[str, float] = {}
    for metric, target in targets.items():
        found = [next((by_figure[f] for f in figures if f in by_figure), None)
                 for figures in target_figures(metric, slo.percentile)]
        options = [(*_factor(record, cover), record) for record in found]
        factor, u, record = min(options, key=lambda o: o[0])  # the tightest
        margins[metric] = (TargetMargin(metric, factor, record.figure, u, len(record.errors),
                                        record.scope, record.limit)
                           if record is not None
                           else TargetMargin(metric, 1.0, None, None, 0, ()))
        planned[metric] = target * factor
    queue = planned.pop("mean_queue", None)
    return SLO(**{f"{m}_ms": v for m, v in planned.items()}, percentile=slo.percentile,
               mean_queue_ms=queue), margins


def margin_text(margins: Mapping[str, TargetMargin], slo: SLO, cover: float) -> str:
    """``P99 ttft <= 412 ms (500 less 17.6%: TTFT read -17.6% or more on 80% of 20 runs
    [scope])``: one candidate's planned targets, ``; ``-separated."""
    parts = []
    for metric, m in margins.items():
        target = slo.mean_queue_ms if metric == "mean_queue" else slo.targets_ms[metric]
        assert target is not None
        label = "mean queue" if metric == "mean_queue" else f"P{slo.percentile:g} {metric}"
        planned = target * m.factor
        if m.figure is None or m.under is None:
            why = "as given: no track record here"
        else:
            within = "" if m.limit is None else f", measured within {m.limit:g} ms"
            figure = FIGURE_LABELS.get(m.figure, m.figure.upper())
            if reads_tails(slo) and metric in TARGET_TAILS and not any(
                    m.figure in figures for figures in TAILS.values()):  # no tail here
                figure += " (its mean or median: no run like it published a tail)"
            read = (f"{figure} read {m.under:+.1%} or more on {cover:.0%} of "
                    f"{m.cases} runs [{scope_text(m.scope)}{within}]")
            why = (f"as given: {read}" if m.factor == 1.0
                   else f"{target:g} less {-m.under:.1%}: {read}")
        parts.append(f"{label} <= {planned:.4g} ms ({why})")
    return "; ".join(parts)
