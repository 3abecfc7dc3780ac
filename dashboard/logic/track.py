"""The track record of a scenario point for the dashboard: servesim's replays of the
published serving runs most like it (simulator/track_record.py), as table rows."""

from __future__ import annotations

from typing import Any

from simulator.track_record import FIGURES, NO_STACK, deployment_record, scope_text


def track_record_rows(point: dict[str, Any]) -> list[dict[str, Any]]:
    """One row per headline figure: runs, share within 15%, median error and |error| (in
    %), and the group of runs that answered; [] when the record is not shipped."""
    stack = point.get("stack") or {}
    name = f"{stack.get('name', NO_STACK)} {stack.get('version', '')}".strip()
    workload = point.get("workload") or {}
    rate = workload.get("rate")
    records = deployment_record(
        name, str((point.get("hardware") or {}).get("gpu", "")),
        str(workload.get("arrival", "poisson")),
        float(rate) if isinstance(rate, int | float) and not isinstance(rate, bool) else None)
    labels = dict(FIGURES)
    return [{
        "figure": labels[r.figure],
        "published runs": r.cases,
        "within 15% (%)": round(100 * r.share, 1),
        "median error (%)": None if r.signed_median is None else round(100 * r.signed_median, 1),
        "median |error| (%)": None if r.median_abs is None else round(100 * r.median_abs, 1),
        "runs like this: stack, GPU, load": scope_text(r.scope),
    } for r in records]
