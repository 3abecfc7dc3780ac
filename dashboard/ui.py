"""Streamlit pieces shared by the pages: cached runs with progress, uploads, KPI tiles.

Runs are cached with ``st.cache_data`` keyed by the scenario dict, so moving a control
back to an earlier value answers from the cache at once.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

import plotly.graph_objects as go
import streamlit as st

from dashboard.logic.run import RunOutput, percentile_value, simulate
from dashboard.logic.uploads import UploadError, save_upload

T = TypeVar("T")
BAD_INPUT = (ValueError, OSError, KeyError)  # ConfigError, TraceError, UploadError are ValueErrors


@st.cache_data(show_spinner=False, max_entries=512)
def cached_run(scenario: dict[str, Any], labels: dict[str, Any] | None = None) -> RunOutput:
    """``simulate`` cached by its arguments (the scenario dict and the point's labels)."""
    return simulate(scenario, labels)


def run_all(points: Sequence[tuple[dict[str, Any], dict[str, Any]]],
            what: str = "Simulating") -> list[RunOutput]:
    """Run every ``(labels, scenario)`` point (cached), with a progress bar while it runs."""
    bar = st.progress(0.0, text=f"{what}: 0 of {len(points)} points")
    out = []
    for i, (labels, point) in enumerate(points):
        out.append(cached_run(point, labels))
        bar.progress((i + 1) / len(points), text=f"{what}: {i + 1} of {len(points)} points")
    bar.empty()
    return out


def guarded(what: str, fn: Callable[[], T]) -> T:
    """Call ``fn``; on bad input show ``st.error`` naming the problem and stop this rerun."""
    try:
        return fn()
    except BAD_INPUT as e:
        st.error(f"{what}: {e}")
        st.stop()
        raise  # st.stop raises; this keeps type checkers content


def upload_many(label: str, types: Sequence[str], key: str, help: str | None = None
                ) -> list[Path]:
    """A file uploader of several files, each saved under its own name; a refused one is
    named in an error and left out."""
    out = []
    for f in st.file_uploader(label, type=list(types), key=key, help=help,
                              accept_multiple_files=True) or []:
        try:
            out.append(save_upload(f.name, f.getvalue()))
        except UploadError as e:
            st.error(str(e))
    return out


def upload(label: str, types: Sequence[str], key: str, help: str | None = None,
           where: Any = st) -> Path | None:
    """A file uploader (in ``where``: ``st`` or ``st.sidebar``) whose file is saved under its
    own name; None when nothing is uploaded or the upload is refused (with an error shown)."""
    f = where.file_uploader(label, type=list(types), key=key, help=help)
    if f is None:
        return None
    try:
        return save_upload(f.name, f.getvalue())
    except UploadError as e:
        st.error(str(e))
        return None


def plot(fig: go.Figure, key: str) -> None:
    """Show a plotly figure at full width."""
    st.plotly_chart(fig, key=key, width="stretch")


def fmt_ms(value: float | None) -> str:
    """A latency in ms for a tile (``n/a`` when undefined)."""
    if value is None:
        return "n/a"
    return f"{value / 1000:.2f} s" if value >= 10_000 else f"{value:.0f} ms"


def kpi_tiles(summary: dict[str, Any], targets_ms: dict[str, float], q: float) -> None:
    """P<q> TTFT/TPOT/ITL/E2E tiles marked met or missed against the targets, then throughput."""
    cols = st.columns(4)
    for col, metric, label in zip(cols, ("ttft", "tpot", "itl", "e2el"),
                                  ("TTFT", "TPOT", "ITL", "E2E"), strict=True):
        value = percentile_value(summary, metric, q)
        target = targets_ms.get(metric)
        if target is None or value is None:
            col.metric(f"P{q:g} {label}", fmt_ms(value))
            continue
        met = value <= target
        col.metric(f"P{q:g} {label}", fmt_ms(value),
                   delta=f"{'met' if met else 'missed'}: target {target:g} ms",
                   delta_color="normal" if met else "inverse",
                   delta_arrow="off")
    cols = st.columns(4)
    cols[0].metric("Throughput", f"{summary.get('request_throughput') or 0:.2f} req/s")
    cols[1].metric("Output tokens", f"{summary.get('output_throughput') or 0:.0f} tok/s")
    good = summary.get("request_goodput")
    cols[2].metric("Goodput", "n/a" if good is None else f"{good:.2f} req/s")
    slo_met = summary.get("slo_met")
    cols[3].metric("SLO", {True: "met", False: "missed", None: "n/a"}[slo_met])


def _pct(value: float | None) -> str:
    return "n/a" if value is None else f"{value * 100:.1f}%"


def feature_tiles(summary: dict[str, Any]) -> None:
    """Tiles for prefix caching and speculative decoding, for the features the run had on
    (their summary keys: docs/prefix-caching.md, docs/speculative.md)."""
    tiles: list[tuple[str, str, str]] = []
    if "prefix_hit_rate" in summary:
        tiles += [("Prefix hit rate", _pct(summary["prefix_hit_rate"]),
                   f"cached prompt tokens / prompt tokens; by blocks "
                   f"{_pct(summary.get('prefix_block_hit_rate'))}"),
                  ("Prefill tokens saved", f"{summary.get('prefill_tokens_saved') or 0:,}",
                   f"{summary.get('prefix_evictions') or 0:,} cached blocks evicted")]
    if "spec_mean_accepted_tokens_per_step" in summary:
        mean = summary["spec_mean_accepted_tokens_per_step"]
        tiles += [("Accepted tokens per step", "n/a" if mean is None else f"{mean:.2f}",
                   "tokens a speculative row emits per step (1 to k + 1), mean"),
                  ("Draft acceptance rate", _pct(summary.get("spec_acceptance_rate")),
                   "accepted drafts / drafts verified")]
    if not tiles:
        return
    cols = st.columns(4)
    for col, (label, value, help_text) in zip(cols, tiles, strict=False):
        col.metric(label, value, help=help_text)
