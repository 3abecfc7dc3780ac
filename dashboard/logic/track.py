"""A track record for the dashboard (servesim's replays of the published serving runs most
like a deployment: simulator/track_record.py), as table rows."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from dashboard.logic.run import percentile_value
from simulator.capacity.margin import DEFAULT_COVER, margined_slo, record_query
from simulator.slo import SLO
from simulator.track_record import FIGURE_LABELS, FigureRecord, point_record, scope_text


def record_rows(records: Sequence[FigureRecord]) -> list[dict[str, Any]]:
    """One row per figure (the headline's, then the tails runs like it published): runs,
    share within 15%, median error and |error| (as text in %), and the group of runs that
    answered."""
    return [{
        "figure": FIGURE_LABELS[r.figure],
        "published runs": r.cases,
        "within 15%": f"{r.share:.1%}",
        "median error": _percent(r.signed_median, signed=True),
        "median |error|": _percent(r.median_abs),
        "runs like this: stack, GPU, load": scope_text(r.scope),
    } for r in records]


def _percent(value: float | None, signed: bool = False) -> str:
    """``-2.6%`` (``+`` shown when ``signed``), or ``-`` for no value."""
    if value is None:
        return "-"
    return f"{value:+.1%}" if signed else f"{value:.1%}"


def margin_line(point: Mapping[str, Any], summary: Mapping[str, Any],
                targets_ms: Mapping[str, float], percentile: float,
                cover: float = DEFAULT_COVER) -> str | None:
    """The point's TTFT and TPOT percentiles against its targets tightened by servesim's
    error on the published runs like it, measured within the targets (as ``servesim plan
    --record-margin`` sizes a candidate: simulator/capacity/margin.py); None without
    targets or a record (a CPU)."""
    wanted = {m: t for m, t in targets_ms.items() if m in ("ttft", "tpot") and t}
    if not wanted:
        return None
    slo = SLO(**{f"{m}_ms": t for m, t in wanted.items()}, percentile=percentile)
    records = point_record(point, **record_query(slo))
    if not records:
        return None
    planned, _ = margined_slo(slo, records, cover)
    parts = []
    for metric, target in planned.targets_ms.items():
        value = percentile_value(summary, metric, percentile)
        if value is None:
            continue
        verdict = "within" if value <= target else "over"
        parts.append(f"P{percentile:g} {metric.upper()} {value:.4g} ms {verdict} "
                     f"{target:.4g} ms ({wanted[metric]:g} less "
                     f"{1 - target / wanted[metric]:.0%})")
    if not parts:
        return None
    return (f"With servesim's margin, the targets less its error on {cover:.0%} of the "
            f"published runs like this one measured within them (servesim plan "
            f"--record-margin {cover:g}): {'; '.join(parts)}.")

