"""Judging runs against an SLO: per-request goodput and the scenario's percentile check.

Definitions (docs/metrics.md, "Goodput" and "SLO check"):

- a finished request is good when ``ttft_ms <= slo.ttft_ms``, ``tpot_ms <= slo.tpot_ms``
  and ``e2el_ms <= slo.e2el_ms`` for each target that is set; a 1-token output has no
  TPOT and, as in vLLM, counts as meeting a TPOT target;
- the SLO is met when, for every target set, the ``slo.percentile``-th percentile of that
  metric is within it; a percentile with no data (NaN) does not meet its target;
- ``slo.mean_queue_ms`` is judged on the mean queue time of finished requests;
- the SLO is met (:func:`slo_met`) when every target is met *and* no request was lost:
  refused (``rejected``) or unfinished at the horizon. A refused request got no answer,
  so no latency target holds for it. ``servesim run``'s summary and ``servesim plan``'s
  search both ask this one function, and :func:`miss_reason` says in words why not.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd

from simulator.metrics_stats import percentile_of, percentile_word
from simulator.slo import SLO

Samples = tuple[np.ndarray, np.ndarray | None]
"""A metric's values in ms and its weights (None: each value counts once)."""


def good_mask(finished: pd.DataFrame, slo: SLO) -> np.ndarray:
    """Boolean per row of ``finished`` (with ttft_ms, tpot_ms, e2el_ms): meets every target."""
    good = np.ones(len(finished), dtype=bool)
    for metric, target_ms in slo.per_request_targets_ms.items():
        value = finished[f"{metric}_ms"].to_numpy(dtype=float)
        if metric == "tpot":
            value = np.where(np.isnan(value), 0.0, value)  # vLLM: no TPOT counts as 0
        good &= value <= target_ms
    return good


def percentile_checks(samples: dict[str, Samples], slo: SLO) -> dict[str, dict[str, object]]:
    """Per target: ``{"p<q>_<metric>_ms": {"target": ms, "value": ms, "met": bool}}``."""
    out: dict[str, dict[str, object]] = {}
    for metric, target_ms in slo.targets_ms.items():
        values, weights = samples[metric]
        value = percentile_of(values, slo.percentile, weights)
        key = f"p{percentile_word(slo.percentile)}_{metric}_ms"
        out[key] = {"target": target_ms, "value": value, "met": bool(value <= target_ms)}
    if slo.mean_queue_ms is not None:
        queue_ms = samples["queue"][0]
        mean = float(np.mean(queue_ms)) if len(queue_ms) else float("nan")
        out["mean_queue_ms"] = {"target": slo.mean_queue_ms, "value": mean,
                                "met": bool(mean <= slo.mean_queue_ms)}
    return out


def check_parts(key: str) -> tuple[float | None, str] | None:
    """(percentile, metric) of the check named ``key`` (a key :func:`percentile_checks`
    writes): ``p99_ttft_ms`` -> (99.0, "ttft"), ``p99.9_itl_ms`` -> (99.9, "itl"),
    ``mean_queue_ms`` -> (None, "mean_queue"); None for any other key."""
    if key == "mean_queue_ms":
        return None, "mean_queue"
    parts = key.split("_")
    if len(parts) != 3 or parts[2] != "ms" or not parts[0].startswith("p"):
        return None
    try:
        return float(parts[0][1:]), parts[1]
    except ValueError:
        return None


def check_target(slo: SLO, key: str) -> float | None:
    """``slo``'s target for the check named ``key`` (a key :func:`percentile_checks` writes:
    ``p99_ttft_ms``, ``mean_queue_ms``), None where ``slo`` sets none."""
    parts = check_parts(key)
    if parts is None:
        return None
    if parts[1] == "mean_queue":
        return slo.mean_queue_ms
    return slo.targets_ms.get(parts[1])


def refusal_causes(requests: pd.DataFrame) -> dict[str, int]:
    """Rejected requests counted by cause (the ``reason`` up to its first ": "), most first."""
    if "reason" not in requests or "status" not in requests:
        return {}
    reasons = requests.loc[requests["status"] == "rejected", "reason"].astype(str)
    causes = reasons.str.split(": ", n=1).str[0].replace("", "no reason given")
    counts = causes.value_counts()
    return {str(k): int(v) for k, v in counts.items()}


def slo_met(checks: Mapping[str, Mapping[str, Any]], num_rejected: int,
            num_in_flight: int) -> bool | None:
    """The one judge of an SLO: every target met and no request lost (None: no target)."""
    if not checks:
        return None
    return num_rejected == 0 and num_in_flight == 0 and all(c["met"] for c in checks.values())


def miss_reason(summary: Mapping[str, Any]) -> str:
    """Why ``summary`` misses its SLO, in words ('' when it meets it or has none): lost
    requests by cause first, then each target missed with its value."""
    if not summary.get("slo"):
        return ""
    parts = []
    rejected = int(summary.get("num_rejected") or 0)
    if rejected:
        causes = summary.get("rejected_by_cause") or {}
        detail = "; ".join(f"{n} {cause}" for cause, n in causes.items())
        parts.append(f"{rejected} request(s) refused" + (f" ({detail})" if detail else ""))
    in_flight = int(summary.get("num_in_flight") or 0)
    if in_flight:
        parts.append(f"{in_flight} request(s) unfinished at the horizon")
    for key, check in (summary.get("slo") or {}).items():
        if not check.get("met"):
            value = check.get("value")
            shown = "no data" if value is None or value != value else f"{float(value):.1f} ms"
            parts.append(f"{key} {shown} > {float(check['target']):g} ms")
    return "; ".join(parts)
