"""Plain-text tables of run summaries for the terminal (standard library only).

``format_summary_table`` prints one row per summary dict (``simulator.metrics.summarize``),
with any label keys a caller added (``policy``, ``rate``, ...) as the first columns, then
queue / TTFT / TPOT / ITL / E2E latency at P50/P90/P99 in ms grouped as ``a/b/c``,
request and output-token throughput, goodput and whether the SLO was met.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from typing import Any

from simulator.metrics_classes_table import format_class_table

GROUPS = (("queue", "queue"), ("TTFT", "ttft"), ("TPOT", "tpot"), ("ITL", "itl"), ("E2E", "e2el"))
"""Latency column groups: (header, metric key in the summary)."""

PERCENTILES = ("50", "90", "99")

RATES = (
    ("req/s", "", "request_throughput", 2),
    ("out tok/s", "", "output_throughput", 0),
    ("goodput", "req/s", "request_goodput", 2),
)
"""Throughput columns: (header, second header line, summary key, decimals)."""

PREFIX = (
    ("prefix hit", "% tokens", "prefix_hit_rate", 100.0, 1),
    ("prefill", "tok saved", "prefill_tokens_saved", 1.0, 0),
)
"""Prefix-caching columns, shown when some row has them: (header, second line, summary
key, scale, decimals)."""

_SUMMARY_KEY = re.compile(r"^(mean|median|std|p[\d.]+)_[a-z0-9]+_ms$")
_SUMMARY_NAMES = frozenset(
    {
        "summary_version", "duration", "completed", "total_input_tokens",
        "total_output_tokens", "request_throughput", "request_goodput",
        "output_throughput", "total_token_throughput", "num_rejected", "rejected_by_cause",
        "num_in_flight",
        "num_preemptions", "goodput_fraction", "slo_met", "slo", "mean_kv_usage",
        "max_kv_usage", "utilisation", "prefix_hit_rate", "prefix_block_hit_rate",
        "prefix_cached_tokens", "prefill_tokens_saved", "prefix_evictions",
    }
)  # fmt: skip


def format_ms(value: Any) -> str:
    """A latency in ms in at most 5 characters: 0, 1.23, 12.3, 123, 1234, 12.3k, 123k."""
    if not _is_number(value):
        return "-"
    x = float(value)
    if x == 0:
        return "0"
    if abs(x) < 10:
        return f"{x:.2f}"
    if abs(x) < 100:
        return f"{x:.1f}"
    if abs(x) < 10_000:
        return f"{x:.0f}"
    if abs(x) < 100_000:
        return f"{x / 1000:.1f}k"
    return f"{x / 1000:.0f}k" if abs(x) < 1e6 else f"{x:.2g}"


def label_keys(rows: Sequence[dict[str, Any]]) -> list[str]:
    """Keys that are not summary figures, in order of first appearance (the label columns)."""
    found: dict[str, None] = {}
    for row in rows:
        for key, value in row.items():
            if key in _SUMMARY_NAMES or _SUMMARY_KEY.match(key) or isinstance(value, dict | list):
                continue
            found.setdefault(key, None)
    return list(found)


def format_summary_table(
    rows: list[dict[str, Any]], title: str, labels: Sequence[str] | None = None
) -> str:
    """A fixed-width text table, one line per summary; ``labels`` default to ``label_keys``.

    A missing or undefined figure prints as ``-``; P50 falls back to the median key.
    """
    labels = label_keys(rows) if labels is None else list(labels)
    prefix = [c for c in PREFIX if any(c[2] in row for row in rows)]
    header = [*labels, *(f"{name} ms" for name, _ in GROUPS), *(r[0] for r in RATES),
              *(c[0] for c in prefix), "SLO"]
    sub = [*("" for _ in labels), *("p50/p90/p99" for _ in GROUPS), *(r[1] for r in RATES),
           *(c[1] for c in prefix), "met"]
    body = [_cells(row, labels, prefix) for row in rows]
    widths = [max(len(r[i]) for r in (header, sub, *body)) for i in range(len(header))]
    left = len(labels)  # label columns are left-aligned, figures right-aligned

    def line(cells: list[str]) -> str:
        pairs = enumerate(zip(cells, widths, strict=True))
        return "  ".join(c.ljust(w) if i < left else c.rjust(w) for i, (c, w) in pairs).rstrip()

    rule = "-" * len(line(header))
    out = [title, rule, line(header), line(sub), rule, *(line(b) for b in body)]
    if not body:
        out.append("(no runs)")
    classes = format_class_table(rows, labels, format_ms)  # runs with priority classes
    return "\n".join(out) + "\n" + ("\n" + classes if classes else "")


def _cells(row: dict[str, Any], labels: Sequence[str],
           prefix: Sequence[tuple[str, str, str, float, int]] = ()) -> list[str]:
    cells = [_label(row.get(key)) for key in labels]
    for _, metric in GROUPS:
        figures = [_percentile(row, metric, q) for q in PERCENTILES]
        cells.append("/".join(format_ms(f) for f in figures))
    for _, _, key, decimals in RATES:
        value: Any = row.get(key)
        cells.append(f"{float(value):,.{decimals}f}" if _is_number(value) else "-")
    for _, _, key, scale, places in prefix:
        value = row.get(key)
        cells.append(f"{float(value) * scale:,.{places}f}" if _is_number(value) else "-")
    met = row.get("slo_met")
    cells.append("-" if met is None else ("yes" if met else "NO"))
    return cells


def _percentile(row: dict[str, Any], metric: str, q: str) -> Any:
    value = row.get(f"p{q}_{metric}_ms")
    if value is None and q == "50":
        value = row.get(f"median_{metric}_ms")
    return value


def _label(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)


def _is_number(value: Any) -> bool:
    if isinstance(value, bool) or value is None:
        return False
    try:
        return math.isfinite(float(value))
    except (TypeError, ValueError):
        return False
