"""Plotly figures for validation (measured vs simulated) and calibration (cost surface)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from dashboard.figures import HEIGHT
from dashboard.logic.run import METRIC_LABELS, cdf

Samples = dict[str, tuple[np.ndarray, np.ndarray | None]]
SIDES = (("measured", "black", "solid"), ("simulated", "royalblue", "dash"))


def overlay_cdfs(measured: Samples, simulated: Samples) -> go.Figure:
    """Measured and simulated CDFs per metric both sides have (traces ``measured TTFT``...)."""
    metrics = [m for m in ("ttft", "tpot", "itl", "e2el") if m in measured and m in simulated]
    cols = 2 if len(metrics) == 4 else max(len(metrics), 1)  # no empty, untitled panel
    rows = (len(metrics) + cols - 1) // cols
    fig = make_subplots(rows=max(rows, 1), cols=cols,
                        subplot_titles=[METRIC_LABELS[m] for m in metrics])
    for i, metric in enumerate(metrics):
        row, col = i // cols + 1, i % cols + 1
        for (side, color, dash), samples in zip(SIDES, (measured, simulated), strict=True):
            x, y = cdf(*samples[metric])
            fig.add_trace(go.Scatter(x=x, y=y, mode="lines", name=f"{side} {METRIC_LABELS[metric]}",
                                     line={"color": color, "dash": dash}), row=row, col=col)
        fig.update_xaxes(title_text=f"{METRIC_LABELS[metric]} (ms)", row=row, col=col)
        fig.update_yaxes(title_text="cumulative fraction (0-1)", range=[0, 1], row=row, col=col)
    fig.update_layout(height=rows * (HEIGHT - 60) + 60, title="Measured vs simulated CDFs")
    return fig


def decode_surface(batch: np.ndarray, context: np.ndarray, ms: np.ndarray) -> go.Figure:
    """Heatmap of a pure-decode step's time against batch size and context per sequence."""
    fig = go.Figure(go.Heatmap(x=batch, y=context, z=ms, name="decode step",
                               colorbar={"title": {"text": "step time (ms)"}}))
    fig.update_layout(title="Decode step time surface", height=HEIGHT,
                      xaxis_title="batch size (sequences)",
                      yaxis_title="context per sequence (tokens)")
    return fig


def curves(x: np.ndarray, lines: dict[str, np.ndarray], x_title: str, title: str) -> go.Figure:
    """Lines of predicted step time (ms) against ``x``."""
    fig = go.Figure([go.Scatter(x=x, y=y, mode="lines", name=name) for name, y in lines.items()])
    fig.update_layout(title=title, height=HEIGHT, xaxis_title=x_title,
                      yaxis_title="step time (ms)")
    return fig


def measured_vs_predicted(table: pd.DataFrame) -> go.Figure:
    """Measured against predicted step time per phase, with the y = x line."""
    fig = go.Figure()
    for phase, part in table.groupby("phase"):
        fig.add_trace(go.Scatter(x=part["predicted_s"] * 1000, y=part["time_s"] * 1000,
                                 mode="markers", name=str(phase), marker={"size": 6}))
    top = float(max(table["predicted_s"].max(), table["time_s"].max()) * 1000)
    fig.add_trace(go.Scatter(x=[0, top], y=[0, top], mode="lines", name="y = x",
                             line={"dash": "dash", "color": "gray"}))
    fig.update_layout(title="Measured vs predicted", height=HEIGHT,
                      xaxis_title="predicted step time (ms)", yaxis_title="measured step time (ms)")
    return fig


def residuals(table: pd.DataFrame) -> go.Figure:
    """Relative residual (measured / predicted - 1, %) against batch size, per phase."""
    fig = go.Figure()
    for phase, part in table.groupby("phase"):
        fig.add_trace(go.Scatter(x=part["batch_size"], y=part["residual_pct"], mode="markers",
                                 name=str(phase)))
    fig.add_hline(y=0, line_color="gray")
    fig.update_layout(title="Residuals", height=HEIGHT, xaxis_title="batch size (sequences)",
                      yaxis_title="residual (% of predicted)")
    return fig
