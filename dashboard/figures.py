"""Plotly figure builders for the explorer and the comparison pages (no streamlit here).

Every figure names its traces (tests look them up by name) and titles every axis with
its unit.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from dashboard.logic.run import METRIC_LABELS, cdf

Samples = dict[str, tuple[np.ndarray, np.ndarray | None]]
SLO_COLOR = "crimson"
HEIGHT = 420


def latency_cdfs(samples: Samples, slo_ms: dict[str, float] | None = None) -> go.Figure:
    """2x2 CDFs of TTFT, TPOT, ITL and end-to-end latency; SLO targets as dashed lines."""
    metrics = ("ttft", "tpot", "itl", "e2el")
    fig = make_subplots(rows=2, cols=2, subplot_titles=[METRIC_LABELS[m] for m in metrics])
    for i, metric in enumerate(metrics):
        row, col = i // 2 + 1, i % 2 + 1
        values, weights = samples.get(metric, (np.array([]), None))
        x, y = cdf(values, weights)
        fig.add_trace(go.Scatter(x=x, y=y, mode="lines", name=METRIC_LABELS[metric]),
                      row=row, col=col)
        target = (slo_ms or {}).get(metric)
        if target:
            fig.add_vline(x=target, line_dash="dash", line_color=SLO_COLOR, row=row, col=col)
        fig.update_xaxes(title_text=f"{METRIC_LABELS[metric]} (ms)", row=row, col=col)
        fig.update_yaxes(title_text="cumulative fraction (0-1)", range=[0, 1], row=row, col=col)
    fig.update_layout(height=2 * HEIGHT - 100, showlegend=False, title="Latency CDFs")
    return fig


def step_series_figure(series: pd.DataFrame) -> go.Figure:
    """Queue depth, running batch size and KV-cache usage against simulated time."""
    fig = make_subplots(rows=3, cols=1, shared_xaxes=True, vertical_spacing=0.06)
    rows = (("queue_len", "Queue depth", "waiting (requests)"),
            ("num_running", "Running batch", "running (requests)"),
            ("kv_usage_pct", "KV-cache usage", "KV usage (%)"))
    for i, (col, name, unit) in enumerate(rows, start=1):
        fig.add_trace(go.Scatter(x=series["t_s"], y=series[col], mode="lines", name=name),
                      row=i, col=1)
        fig.update_yaxes(title_text=unit, row=i, col=1)
        fig.update_xaxes(title_text="simulated time (s)", row=i, col=1)
    fig.update_layout(height=HEIGHT + 180, title="Over time (from the step log)")
    return fig


def prompt_ttft_scatter(requests: pd.DataFrame, ttft_slo_ms: float | None = None) -> go.Figure:
    """One point per finished request: prompt length against TTFT."""
    done = requests[requests["status"] == "finished"]
    fig = go.Figure(go.Scattergl(x=done["prompt_tokens"], y=done["ttft_ms"], mode="markers",
                                 marker={"size": 4, "opacity": 0.6}, name="requests"))
    if ttft_slo_ms:
        fig.add_hline(y=ttft_slo_ms, line_dash="dash", line_color=SLO_COLOR,
                      annotation_text="TTFT target")
    fig.update_layout(title="Prompt length vs TTFT", height=HEIGHT,
                      xaxis_title="prompt length (tokens)", yaxis_title="TTFT (ms)")
    return fig


def against_rate(table: pd.DataFrame, columns: Sequence[tuple[str, str]], y_title: str,
                 title: str, target: float | None = None, log_y: bool = False) -> go.Figure:
    """Lines per policy (``series`` column) of ``columns`` (column, label) against rate."""
    fig = go.Figure()
    for series, part in table.groupby("series", sort=False):
        part = part.sort_values("rate")
        for col, label in columns:
            dash = "dot" if label.startswith("P50") else "solid"
            fig.add_trace(go.Scatter(x=part["rate"], y=part[col], mode="lines+markers",
                                     name=f"{series} {label}", line={"dash": dash}))
    if target and not table.empty:
        # a trace, not a shape: shapes on a log axis take log10 coordinates
        lo, hi = float(table["rate"].min()), float(table["rate"].max())
        fig.add_trace(go.Scatter(x=[lo, hi], y=[target, target], mode="lines",
                                 name=f"SLO {target:g} ms",
                                 line={"dash": "dash", "color": SLO_COLOR}))
    fig.update_layout(title=title, height=HEIGHT, xaxis_title="request rate (req/s)",
                      yaxis_title=y_title, yaxis_type="log" if log_y else "linear")
    return fig


def bars(table: pd.DataFrame, x: str, columns: Sequence[tuple[str, str]], y_title: str,
         title: str, target: float | None = None) -> go.Figure:
    """Grouped bars of ``columns`` (column, label) per ``x`` category."""
    fig = go.Figure([go.Bar(x=table[x], y=table[col], name=label) for col, label in columns])
    if target:
        fig.add_hline(y=target, line_dash="dash", line_color=SLO_COLOR,
                      annotation_text=f"SLO {target:g}")
    fig.update_layout(title=title, height=HEIGHT, barmode="group", xaxis_title="GPU",
                      yaxis_title=y_title)
    return fig
