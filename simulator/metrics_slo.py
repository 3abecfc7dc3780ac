"""Judging runs against an SLO: per-request goodput and the scenario's percentile check.

Definitions (docs/metrics.md, "Goodput" and "SLO check"):

- a finished request is good when ``ttft_ms <= slo.ttft_ms``, ``tpot_ms <= slo.tpot_ms``
  and ``e2el_ms <= slo.e2el_ms`` for each target that is set; a 1-token output has no
  TPOT and, as in vLLM, counts as meeting a TPOT target;
- the SLO is met when, for every target set, the ``slo.percentile``-th percentile of that
  metric is within it; a percentile with no data (NaN) does not meet its target;
- ``slo.mean_queue_ms`` is judged on the mean queue time of finished requests.
"""

from __future__ import annotations

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
