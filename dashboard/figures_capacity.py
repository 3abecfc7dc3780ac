"""Plotly figures for the capacity page: cost against latency, and each candidate's limit.

Both read ``dashboard.logic.capacity.plan_table``'s columns; traces are named (the tests
look them up by name) and every axis is titled with its unit.
"""

from __future__ import annotations

import pandas as pd
import plotly.graph_objects as go

from dashboard.figures import HEIGHT, SLO_COLOR

STATUS_COLORS = {"meets SLO": "seagreen", "misses SLO": "darkorange", "infeasible": "grey"}


def pareto_figure(table: pd.DataFrame, target_rps: float,
                  ttft_target_ms: float | None = None) -> go.Figure:
    """$/hour against P99 TTFT at the target rate; the Pareto front as a highlighted line.

    Candidates that miss the SLO are drawn (as crosses) where their last cluster check
    landed, so the page shows what meeting the SLO costs; infeasible ones have no point.
    """
    fig = go.Figure()
    priced = table.dropna(subset=["usd_per_hour", "p99_ttft_ms"])
    for status, symbol in (("meets SLO", "circle"), ("misses SLO", "x")):
        part = priced[priced["status"] == status]
        fig.add_trace(go.Scatter(
            x=part["usd_per_hour"], y=part["p99_ttft_ms"], mode="markers",
            name=f"{'meet' if status == 'meets SLO' else 'miss'} the SLO",
            text=part["candidate"], marker={"size": 10, "symbol": symbol,
                                            "color": STATUS_COLORS[status]},
            hovertemplate="%{text}<br>$%{x:.2f}/h, P99 TTFT %{y:.0f} ms<extra></extra>"))
    front = priced[priced["on_pareto_front"]].sort_values("usd_per_hour")
    fig.add_trace(go.Scatter(
        x=front["usd_per_hour"], y=front["p99_ttft_ms"], mode="lines+markers+text",
        name="Pareto front", text=front["candidate"], textposition="top right",
        line={"color": "royalblue", "width": 3},
        marker={"size": 14, "color": "rgba(0,0,0,0)", "line": {"color": "royalblue",
                                                              "width": 3}}))
    if ttft_target_ms and not priced.empty:
        lo, hi = float(priced["usd_per_hour"].min()), float(priced["usd_per_hour"].max())
        fig.add_trace(go.Scatter(x=[lo, hi], y=[ttft_target_ms] * 2, mode="lines",
                                 name=f"TTFT target {ttft_target_ms:g} ms",
                                 line={"dash": "dash", "color": SLO_COLOR}))
    fig.update_layout(title="Cost vs P99 TTFT", height=HEIGHT,
                      xaxis_title="cost of the deployment (US$ per hour)",
                      yaxis_title=f"P99 TTFT at {target_rps:g} req/s (ms)")
    return fig


def max_rate_bars(table: pd.DataFrame, target_rps: float) -> go.Figure:
    """Highest rate one replica sustains within the SLO, per candidate, coloured by status."""
    order = table.sort_values("max_rate_per_replica_rps", ascending=False)
    fig = go.Figure(go.Bar(
        x=order["candidate"], y=order["max_rate_per_replica_rps"],
        name="max rate per replica",
        marker={"color": [STATUS_COLORS[s] for s in order["status"]]},
        text=[f"{v:.1f}" if v > 0 else s for v, s in zip(order["max_rate_per_replica_rps"],
                                                         order["status"], strict=True)],
        textposition="outside", hovertext=order["status"]))
    fig.update_layout(title="Max sustainable rate per replica", height=HEIGHT,
                      xaxis_title="candidate (GPU x TP, dtype, policy)",
                      yaxis_title="max rate within the SLO, one replica (req/s)")
    fig.add_annotation(text=f"replicas needed ≈ {target_rps:g} req/s ÷ this rate, rounded up",
                       xref="paper", yref="paper", x=1, y=1.08, showarrow=False)
    return fig
