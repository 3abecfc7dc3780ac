"""How much of each SLO target a plan's answer leaves unused, against servesim's own
typical error on published runs like it (docs/capacity.md, "How far to trust the answer")."""

from __future__ import annotations

from collections.abc import Sequence

from simulator.capacity.results import CandidateResult
from simulator.track_record import FigureRecord


def headroom(best: CandidateResult) -> dict[str, float]:
    """Per SLO target at the target rate (``p99_ttft_ms``, ...): 1 - value / target, the
    share of the target the best candidate leaves unused."""
    checks = best.at_target.get("slo") or {}
    return {key: 1.0 - c["value"] / c["target"] for key, c in checks.items()
            if c.get("target") and c.get("value") is not None}


def headroom_lines(best: CandidateResult, rate: float, records: Sequence[FigureRecord]
                   ) -> list[str]:
    """The best candidate's headroom under each target, and a note where it is less than
    servesim's median error of that figure on published runs like it (the track record):
    there the plan's answer rests on a margin the simulator does not hold."""
    checks = best.at_target.get("slo") or {}
    room = headroom(best)
    if not room:
        return []
    parts = [f"{_target_label(k)} {checks[k]['value']:.3g} ms of {checks[k]['target']:g} "
             f"({room[k]:.0%})" for k in room]
    lines = [f"headroom of {best.name} at {rate:g} req/s: {', '.join(parts)}"]
    errors = {r.figure: r.median_abs for r in records if r.median_abs is not None}
    for key, share in room.items():
        metric = key.split("_")[1]  # p99_ttft_ms -> ttft
        error = errors.get(metric)
        if error is None or share >= error:
            continue
        quantile = key.split("_")[0][1:]
        tighter = checks[key]["target"] * (1.0 - error)
        value = f"{tighter:.0f}" if tighter >= 10 else f"{tighter:.3g}"  # no e-notation
        lines.append(
            f"note: {_target_label(key)}'s headroom ({share:.0%}) is less than servesim's "
            f"median {metric.upper()} error on published runs like it ({error:.0%}): the "
            f"answer may need more replicas; to plan with that margin, --slo "
            f"{metric}_p{quantile}_ms={value} (and the other targets)")
    return lines


def _target_label(key: str) -> str:
    """``p99_ttft_ms`` -> ``P99 TTFT``."""
    parts = key.split("_")
    return f"{parts[0].upper()} {parts[1].upper()}" if len(parts) == 3 else key
