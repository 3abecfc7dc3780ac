"""Running one scenario point for the dashboard, and shaping its results for plots and files.

``simulate`` returns plain data (summary dict and two DataFrames) so Streamlit can cache
it by the scenario dict. Plots get downsampled views: a CDF of at most a few hundred
points and a step-log time series in a few hundred time bins, so a run of 80,000 steps
does not ship 80,000 points to the browser.
"""

from __future__ import annotations

import io
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from simulator.metrics import itl_samples, request_metrics
from simulator.metrics_stats import percentile_word
from simulator.runner import run_point

CDF_POINTS = 400
SERIES_BINS = 300
METRIC_LABELS = {"ttft": "TTFT", "tpot": "TPOT", "itl": "ITL", "e2el": "End-to-end"}


@dataclass(slots=True)
class RunOutput:
    """One simulated point: what the pages plot and export."""

    summary: dict[str, Any]  # summary JSON (contract 5) with labels and provenance
    requests: pd.DataFrame  # request records (contract 4) + queue/ttft/tpot/e2el in ms
    steps: pd.DataFrame  # step log (contract 4)
    kv_blocks: int  # KV blocks per replica


def simulate(scenario: dict[str, Any], labels: dict[str, Any] | None = None) -> RunOutput:
    """Resolve and simulate one (non-sweep) scenario point."""
    res = run_point(dict(labels or {}), scenario)
    return RunOutput(res.summary, request_metrics(res.result.requests), res.result.steps,
                     res.deployment.kv_blocks)


def percentile_value(summary: Mapping[str, Any], metric: str, q: float) -> float | None:
    """The run's P<q> of ``metric`` (``ttft``, ``tpot``, ``itl``, ``e2el``), ms: from the
    summary's percentiles (50, 90, 99 by default), else from its SLO check at ``q`` (the
    scenario's percentile, e.g. 95 or 99.9); None when neither has it."""
    key = f"p{percentile_word(q)}_{metric}_ms"
    value = summary.get(key)
    if value is None:
        value = ((summary.get("slo") or {}).get(key) or {}).get("value")
    return None if value is None else float(value)


def latency_samples(requests: pd.DataFrame, steps: pd.DataFrame | None
                    ) -> dict[str, tuple[np.ndarray, np.ndarray | None]]:
    """Values (ms) and weights per metric over finished requests; ITL from the step log."""
    done = requests[requests["status"] == "finished"] if "status" in requests else requests
    out: dict[str, tuple[np.ndarray, np.ndarray | None]] = {}
    for metric in ("ttft", "tpot", "e2el"):
        values = done[f"{metric}_ms"].to_numpy(dtype=float)
        out[metric] = (values[np.isfinite(values)], None)
    if steps is not None:
        out["itl"] = itl_samples(steps)
    return out


def cdf(values: np.ndarray, weights: np.ndarray | None = None,
        max_points: int = CDF_POINTS) -> tuple[np.ndarray, np.ndarray]:
    """Empirical CDF ``(x, F(x))`` of (weighted) values, thinned to ``max_points``."""
    v = np.asarray(values, dtype=float)
    w = np.ones_like(v) if weights is None else np.asarray(weights, dtype=float)
    keep = np.isfinite(v) & (w > 0)
    v, w = v[keep], w[keep]
    if v.size == 0:
        return np.array([]), np.array([])
    order = np.argsort(v, kind="stable")
    x, cum = v[order], np.cumsum(w[order])
    y = cum / cum[-1]
    if x.size > max_points:
        idx = np.unique(np.linspace(0, x.size - 1, max_points).round().astype(int))
        x, y = x[idx], y[idx]
    return x, y


def step_series(steps: pd.DataFrame, kv_blocks: int, bins: int = SERIES_BINS) -> pd.DataFrame:
    """Queue depth, running batch and KV usage over time, in ``bins`` time bins.

    Per replica the last step ending in a bin gives that bin's value (carried forward
    through bins with no step end); replicas are then summed (queue, running) or
    averaged (KV usage in percent of each replica's blocks).
    """
    cols = ["t_s", "queue_len", "num_running", "kv_usage_pct"]
    if steps.empty:
        return pd.DataFrame({c: pd.Series(dtype=float) for c in cols})
    end = steps["end_s"].to_numpy(dtype=float)
    edges = np.linspace(end.min(), end.max(), bins + 1)
    which = np.clip(np.searchsorted(edges, end, side="left") - 1, 0, bins - 1)
    frame = steps.assign(bin=which)
    last = frame.groupby(["replica", "bin"])[["queue_len", "num_running", "kv_blocks_used"]].last()
    full = pd.MultiIndex.from_product([last.index.levels[0], range(bins)], names=["replica", "bin"])
    last = last.reindex(full).groupby(level="replica").ffill().fillna(0.0)
    per_bin = last.groupby(level="bin")
    out = pd.DataFrame({
        "t_s": edges[1:],
        "queue_len": per_bin["queue_len"].sum().to_numpy(),
        "num_running": per_bin["num_running"].sum().to_numpy(),
        "kv_usage_pct": per_bin["kv_blocks_used"].mean().to_numpy() / max(kv_blocks, 1) * 100,
    })
    return out


def requests_csv(out: RunOutput) -> bytes:
    """Request records with per-request latencies, as CSV bytes."""
    return out.requests.to_csv(index=False).encode()


def requests_parquet(out: RunOutput) -> bytes:
    """Request records with per-request latencies, as Parquet bytes."""
    buf = io.BytesIO()
    out.requests.to_parquet(buf, index=False)
    return buf.getvalue()


def summary_json(out: RunOutput) -> bytes:
    """The summary (contract 5) as JSON bytes."""
    return (json.dumps(out.summary, indent=2) + "\n").encode()
