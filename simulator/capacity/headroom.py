"""How much of each SLO target a plan's answer leaves unused, against servesim's own
typical error on published runs like it (docs/capacity.md, "How far to trust the answer")."""

from __future__ import annotations

from collections.abc import Sequence

from simulator.capacity.margin import TARGET_FIGURES, target_figures
from simulator.capacity.results import CandidateResult
from simulator.metrics_slo import check_parts, check_target
from simulator.slo import SLO
from simulator.track_record import FIGURE_LABELS, FigureRecord


def _targets(best: CandidateResult, given: SLO | None) -> dict[str, float]:
    """Each check's target (``p99_ttft_ms`` -> ms): the plan's, or ``given``'s (the SLO as
    the user gave it, where the plan sized against tightened targets)."""
    checks = best.at_target.get("slo") or {}
    out = {key: c["target"] for key, c in checks.items()
           if c.get("target") and c.get("value") is not None}
    if given is not None:
        for key in out:
            target = check_target(given, key)
            out[key] = target if target is not None else out[key]
    return out


def headroom(best: CandidateResult, given: SLO | None = None) -> dict[str, float]:
    """Per SLO target at the target rate (``p99_ttft_ms``, ...): 1 - value / target, the
    share of the target the best candidate leaves unused (of ``given``'s targets where
    the plan sized against tightened ones)."""
    checks = best.at_target.get("slo") or {}
    return {key: 1.0 - checks[key]["value"] / t for key, t in _targets(best, given).items()}


def headroom_lines(best: CandidateResult, rate: float, records: Sequence[FigureRecord],
                   given: SLO | None = None) -> list[str]:
    """The best candidate's headroom under each target, and a note where it is less than
    servesim's median error of that figure on published runs like it (the track record):
    there the plan's answer rests on a margin the simulator does not hold. With ``given``
    (a plan sized against targets tightened by the record, capacity/margin.py) the
    headroom is under the targets as given, and no note: the margin is in the plan."""
    checks = best.at_target.get("slo") or {}
    targets = _targets(best, given)
    room = headroom(best, given)
    if not room:
        return []
    parts = [f"{_target_label(k)} {checks[k]['value']:.3g} ms of {targets[k]:g} "
             f"({room[k]:.0%})" for k in room]
    lines = [f"headroom of {best.name} at {rate:g} req/s: {', '.join(parts)}"]
    if given is not None:
        return lines
    for key, share in room.items():
        named = check_parts(key)  # p99_ttft_ms -> (99.0, "ttft")
        if named is None or named[0] is None:  # a mean's target: no percentile to suggest
            continue
        quantile, metric = named[0], named[1]
        error, label = _typical_error(records, metric, quantile)
        if error is None or share >= error:
            continue
        tighter = checks[key]["target"] * (1.0 - error)
        value = f"{tighter:.0f}" if tighter >= 10 else f"{tighter:.3g}"  # no e-notation
        lines.append(
            f"note: {_target_label(key)}'s headroom ({share:.0%}) is less than servesim's "
            f"median {label} error on published runs like it ({error:.0%}): the "
            f"answer may need more replicas; to plan with that margin, --slo "
            f"{metric}_p{quantile:g}_ms={value} (and the other targets), or --record-margin "
            f"0.8 to size each candidate with its own")
    return lines


def _typical_error(records: Sequence[FigureRecord], metric: str, quantile: float
                   ) -> tuple[float | None, str]:
    """servesim's median |error| on a target's latency in the record, and its label: the
    first figure of the record the margin reads for that target
    (:func:`simulator.capacity.margin.target_figures`: at P90 or above the latency's tail
    nearest the target's percentile, else the mean's or median's record; ITL reads TPOT's);
    none for E2E, which two latencies bound."""
    bounds = target_figures(metric, quantile) if metric in TARGET_FIGURES else []
    if len(bounds) != 1:
        return None, ""
    by_figure = {r.figure: r.median_abs for r in records if r.median_abs is not None}
    figure = next((f for f in bounds[0] if f in by_figure), None)
    if figure is None:
        return None, ""
    return by_figure[figure], FIGURE_LABELS[figure]


def _target_label(key: str) -> str:
    """``p99_ttft_ms`` -> ``P99 TTFT``."""
    parts = key.split("_")
    return f"{parts[0].upper()} {parts[1].upper()}" if len(parts) == 3 else key
