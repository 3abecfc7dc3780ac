"""Plotly figures for the Fleet page (no streamlit here): replicas over time against the
offered load, refusals by cause, and per-class TTFT distributions. Traces are named (tests
look them up by name) and every axis says its unit.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from dashboard.figures import HEIGHT, SLO_COLOR
from dashboard.logic.run import cdf


def replica_timeline(steps: pd.DataFrame, rate: pd.DataFrame, rate_label: str) -> go.Figure:
    """Replicas billed and serving (steps, left axis) over the offered rate (right axis)."""
    fig = make_subplots(specs=[[{"secondary_y": True}]])
    fig.add_trace(go.Scatter(x=rate["t_s"], y=rate["rate"], mode="lines", line_shape="hv",
                             name=f"offered (req/s, {rate_label})", opacity=0.45,
                             fill="tozeroy", line={"color": "gray"}), secondary_y=True)
    for col, dash in (("billed", "solid"), ("serving", "dot")):
        fig.add_trace(go.Scatter(x=steps["time_s"], y=steps[col], mode="lines",
                                 line_shape="hv", name=f"replicas {col}",
                                 line={"dash": dash, "width": 3}), secondary_y=False)
    fig.update_xaxes(title_text="simulated time (s)")
    fig.update_yaxes(title_text="replicas", rangemode="tozero", dtick=1, secondary_y=False)
    fig.update_yaxes(title_text="offered rate (req/s)", rangemode="tozero", secondary_y=True)
    fig.update_layout(height=HEIGHT, title="Replicas over time, over the offered load")
    return fig


def refusals_bar(table: pd.DataFrame) -> go.Figure:
    """Refused requests per cause (horizontal bars)."""
    fig = go.Figure(go.Bar(x=table["requests"], y=table["cause"], orientation="h",
                           name="refused"))
    fig.update_xaxes(title_text="refused requests")
    fig.update_yaxes(title_text="cause", autorange="reversed")
    fig.update_layout(height=max(200, 80 + 40 * len(table)), title="Refusals by cause")
    return fig


def class_ttft_cdfs(samples: dict[str, np.ndarray],
                    targets_ms: dict[str, float | None] | None = None) -> go.Figure:
    """TTFT CDF per class (one trace per class name); each class's TTFT target dashed."""
    return _cdfs(samples, "TTFT by priority class", "TTFT (ms, log scale)", targets_ms)


def ttft_split_cdfs(parts: dict[str, np.ndarray], target_ms: float | None = None) -> go.Figure:
    """CDFs of the prefill side, the wait for decode KV (when any), the KV transfer and
    the whole TTFT (disaggregated)."""
    return _cdfs(parts, "TTFT split: prefill pool and KV transfer", "time (ms, log scale)",
                 {"TTFT": target_ms})


def _cdfs(samples: dict[str, np.ndarray], title: str, x_title: str,
          targets_ms: dict[str, float | None] | None) -> go.Figure:
    fig = go.Figure()
    for name, values in samples.items():
        x, y = cdf(values)
        fig.add_trace(go.Scatter(x=x, y=y, mode="lines", name=name))
        target = (targets_ms or {}).get(name)
        if target:
            fig.add_vline(x=target, line_dash="dash", line_color=SLO_COLOR,
                          annotation_text=f"{name} target")
    fig.update_xaxes(title_text=x_title, type="log")
    fig.update_yaxes(title_text="cumulative fraction (0-1)", range=[0, 1])
    fig.update_layout(height=HEIGHT, title=title)
    return fig
