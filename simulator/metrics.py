"""Metrics over request records and the step log: per-request latencies and the summary.

The summary (data contract 5, ``SUMMARY_VERSION``) uses vLLM ``bench serve`` key names
(``completed``, ``duration``, ``request_throughput``, ``mean_ttft_ms``,
``median_ttft_ms``, ``std_ttft_ms``, ``p99_ttft_ms``, ... for ttft, tpot, itl and e2el)
plus ours (``*_queue_ms``, request counts by status, goodput fraction, the SLO check,
KV usage and utilisation). Every metric is defined once, with its formula, in
docs/metrics.md; this module only computes them. Undefined figures are NaN (no data)
or None (not asked for, e.g. goodput without an SLO); ``to_json_safe`` turns NaN into
JSON ``null``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from simulator.itl_gaps import itl_gaps
from simulator.metrics_resources import busy_fraction, kv_usage, require_columns, run_window
from simulator.metrics_slo import Samples, good_mask, percentile_checks, refusal_causes, slo_met
from simulator.metrics_stats import check_percentiles, describe, weighted_percentile
from simulator.metrics_steps import ITL_REL_ERROR, StepStats
from simulator.slo import SLO

__all__ = [
    "SUMMARY_VERSION",
    "itl_samples",
    "request_metrics",
    "summarize",
    "to_json_safe",
    "weighted_percentile",
]

SUMMARY_VERSION = 1

LATENCY_METRICS = ("ttft", "tpot", "itl", "e2el", "queue")
"""Metrics with a distribution in the summary (vLLM's four, then our queue time)."""

_TIMES = ("arrival_s", "scheduled_s", "first_token_s", "finish_s", "output_tokens")
_SUMMARY_NEEDS = (*_TIMES, "prompt_tokens", "preemptions", "status")
_STEP_NEEDS = ("start_s", "end_s", "num_decode_tokens", "kv_blocks_used", "replica")


def request_metrics(requests: pd.DataFrame) -> pd.DataFrame:
    """A copy of the request records with ``queue_ms``, ``ttft_ms``, ``tpot_ms``, ``e2el_ms``.

    queue = scheduled - arrival; ttft = first_token - arrival; e2el = finish - arrival;
    tpot = (e2el - ttft) / (output_tokens - 1), NaN when output_tokens <= 1 (vLLM). Rows
    of any status are kept; a timestamp that is NaN gives NaN.
    """
    require_columns(requests, _TIMES, "request records")
    out = requests.copy()
    arrival_s = out["arrival_s"].to_numpy(dtype=float)
    out["queue_ms"] = (out["scheduled_s"].to_numpy(dtype=float) - arrival_s) * 1000.0
    ttft_ms = (out["first_token_s"].to_numpy(dtype=float) - arrival_s) * 1000.0
    e2el_ms = (out["finish_s"].to_numpy(dtype=float) - arrival_s) * 1000.0
    n = out["output_tokens"].to_numpy(dtype=float)
    tpot_ms = np.full(len(out), np.nan)
    np.divide(e2el_ms - ttft_ms, n - 1.0, out=tpot_ms, where=n > 1)
    out["ttft_ms"], out["tpot_ms"], out["e2el_ms"] = ttft_ms, tpot_ms, e2el_ms
    return out


def itl_samples(steps: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """ITL samples from the step log: ``(values_ms, weights)``.

    Each step that emitted tokens after some request's first contributes its duration
    ``(end_s - start_s) * 1000`` with weight ``num_decode_tokens``; where steps that
    emitted nothing (prefill batches run on their own) lie between it and the replica's
    previous emitting step, the tokens carried across them get the whole gap since that
    step's end (simulator/itl_gaps.py; docs/metrics.md). Steps with no such tokens are left
    out. Approximation (docs/metrics.md): the step log does not say whose tokens a step
    emitted, so the carried tokens are counted, not followed.
    """
    require_columns(steps, ("start_s", "end_s", "num_decode_tokens", "num_running"),
                    "step log")
    replica = (steps["replica"].to_numpy(dtype=np.int64) if "replica" in steps
               else np.zeros(len(steps), np.int64))
    start = steps["start_s"].to_numpy(dtype=float)
    order = None
    if len(steps) > 1 and (np.any(np.diff(replica) < 0) or np.any(
            (np.diff(start) < 0) & (np.diff(replica) == 0))):
        order = np.lexsort((start, replica))  # per replica, in time order
    cols = [steps[c].to_numpy() for c in ("start_s", "end_s", "num_decode_tokens",
                                          "num_running")]
    if order is not None:
        cols, replica = [c[order] for c in cols], replica[order]
    cuts = np.flatnonzero(np.diff(replica)) + 1
    parts = [itl_gaps(*(c[a:b] for c in cols))[:2]
             for a, b in zip(np.r_[0, cuts], np.r_[cuts, len(replica)], strict=True)]
    if not parts:
        return np.empty(0), np.empty(0, np.int64)
    return (np.concatenate([p[0] for p in parts]),
            np.concatenate([p[1] for p in parts]).astype(np.int64))


def summarize(
    requests: pd.DataFrame,
    steps: pd.DataFrame,
    slo: SLO | None = None,
    *,
    duration_s: float | None = None,
    kv_blocks_total: int | dict[int, int] | None = None,
    num_replicas: int = 1,
    percentiles: Sequence[float] = (50, 90, 99),
    step_stats: StepStats | None = None,
) -> dict[str, Any]:
    """The summary dict of one run (keys in docs/metrics.md); values are plain Python.

    Latency figures are over finished requests (ITL over all decode steps); rejected
    and in-flight requests are only counted. ``duration_s`` defaults to first arrival
    to last finish. ``kv_blocks_total`` (one count, or one per replica id) enables the
    KV usage figures. ``step_stats`` (a run with ``step_log`` "summary" or "none")
    takes the place of ``steps`` for the ITL, utilisation and KV figures, and adds the
    keys ``step_log`` and ``step_log_note``.
    """
    qs = check_percentiles(percentiles)
    require_columns(requests, _SUMMARY_NEEDS, "request records")
    require_columns(steps, _STEP_NEEDS, "step log")
    if step_stats is not None and len(steps):
        raise ValueError("pass the step log or its step_stats, not both")
    per = request_metrics(requests)
    status = per["status"].to_numpy()
    finished = per[status == "finished"]
    start_s, dur_s = run_window(requests, duration_s)
    n_in = int(finished["prompt_tokens"].sum())
    n_out = int(finished["output_tokens"].sum())
    samples = _samples(finished, steps, step_stats)
    good = None if slo is None or not slo.per_request_targets_ms else good_mask(finished, slo)
    summary: dict[str, Any] = {
        "summary_version": SUMMARY_VERSION,
        "duration": dur_s,
        "completed": len(finished),
        "total_input_tokens": n_in,
        "total_output_tokens": n_out,
        "request_throughput": len(finished) / dur_s,
        "request_goodput": None if good is None else int(good.sum()) / dur_s,
        "output_throughput": n_out / dur_s,
        "total_token_throughput": (n_in + n_out) / dur_s,
    }
    for metric in LATENCY_METRICS:
        values, weights = samples[metric]
        stats = describe(values, qs, weights)
        if metric == "itl" and step_stats is not None and step_stats.itl is not None:
            stats = step_stats.itl.describe(qs)  # exact mean and std beside the bins
        for stat, value in stats.items():
            summary[f"{stat}_{metric}_ms"] = value
    checks = {} if slo is None else percentile_checks(samples, slo)
    num_rejected = int(np.sum(status == "rejected"))
    num_in_flight = int(np.sum(status == "in_flight"))
    summary |= {
        "num_rejected": num_rejected,
        "rejected_by_cause": refusal_causes(requests),
        "num_in_flight": num_in_flight,
        "num_preemptions": int(per["preemptions"].sum()),
        "goodput_fraction": None if good is None else _ratio(int(good.sum()), len(per)),
        "slo_met": slo_met(checks, num_rejected, num_in_flight),
        "slo": checks,
        "mean_kv_usage": None,
        "max_kv_usage": None,
        "utilisation": None,
    }
    if step_stats is None:
        summary["utilisation"] = busy_fraction(steps, start_s, dur_s, num_replicas)
        if kv_blocks_total is not None:
            summary["mean_kv_usage"], summary["max_kv_usage"] = kv_usage(steps, kv_blocks_total)
        return summary
    summary |= {"step_log": step_stats.kept, "step_log_note": _STEP_LOG_NOTES[step_stats.kept]}
    if step_stats.kept == "summary":
        summary["utilisation"] = step_stats.busy_fraction(start_s, dur_s, num_replicas)
        if kv_blocks_total is not None:
            summary["mean_kv_usage"], summary["max_kv_usage"] = step_stats.kv_usage(
                kv_blocks_total)
    return summary


_STEP_LOG_NOTES = {
    "summary": (f"step log kept as a summary: ITL percentiles within "
                f"{ITL_REL_ERROR:.1%} (docs/metrics.md), no steps.parquet"),
    "none": "no step log kept (run.step_log = 'none'): ITL, utilisation and KV usage unknown",
}


def _samples(finished: pd.DataFrame, steps: pd.DataFrame,
             step_stats: StepStats | None = None) -> dict[str, Samples]:
    """Each metric's values (ms) and weights: per finished request, ITL per step (from
    the ITL histogram's bins when the steps were summarised; none when not kept)."""
    tpot_ms = finished["tpot_ms"].to_numpy(dtype=float)
    if step_stats is None:
        itl_ms, itl_weights = itl_samples(steps)
    elif step_stats.itl is None:
        itl_ms, itl_weights = np.empty(0), np.empty(0, np.int64)
    else:
        itl_ms, itl_weights = step_stats.itl.samples()
    return {
        "ttft": (finished["ttft_ms"].to_numpy(dtype=float), None),
        "tpot": (tpot_ms[~np.isnan(tpot_ms)], None),
        "itl": (itl_ms, itl_weights),
        "e2el": (finished["e2el_ms"].to_numpy(dtype=float), None),
        "queue": (finished["queue_ms"].to_numpy(dtype=float), None),
    }


def _ratio(num: int, den: int) -> float:
    return num / den if den else math.nan


def to_json_safe(summary: Any) -> Any:
    """A copy that ``json.dumps`` accepts strictly: NaN/inf -> None, numpy -> Python."""
    if isinstance(summary, dict):
        return {str(k): to_json_safe(v) for k, v in summary.items()}
    if isinstance(summary, list | tuple | np.ndarray):
        return [to_json_safe(v) for v in summary]
    if isinstance(summary, bool | np.bool_):
        return bool(summary)
    if isinstance(summary, int | np.integer):
        return int(summary)
    if isinstance(summary, float | np.floating):
        return float(summary) if math.isfinite(summary) else None
    return summary
