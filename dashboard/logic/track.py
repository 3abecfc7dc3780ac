"""A track record for the dashboard (servesim's replays of the published serving runs most
like a deployment: simulator/track_record.py), as table rows."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from simulator.track_record import FIGURES, FigureRecord, scope_text


def record_rows(records: Sequence[FigureRecord]) -> list[dict[str, Any]]:
    """One row per headline figure: runs, share within 15%, median error and |error| (as
    text in %), and the group of runs that answered."""
    labels = dict(FIGURES)
    return [{
        "figure": labels[r.figure],
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
