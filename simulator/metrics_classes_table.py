"""The per-class text table under the run table, for runs with priority classes.

One line per run and class (the summary's ``classes`` block, simulator/metrics_classes.py):
the run's label columns, the class and its priority, request counts, TTFT and TPOT at
P50/P90/P99, goodput against the class's own SLO and whether the class met it.
Standard library only, as simulator/report.py.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

_PCTS = ("50", "90", "99")
HEADER = ("class", "prio", "requests", "done", "rejected", "TTFT ms", "TPOT ms",
          "goodput", "good", "SLO")
SUB = ("", "", "", "", "", "p50/p90/p99", "p50/p90/p99", "req/s", "%", "met")


def format_class_table(rows: Sequence[dict[str, Any]], labels: Sequence[str],
                       fmt_ms: Any) -> str:
    """The table, or "" when no row has classes; ``fmt_ms`` formats one latency."""
    body: list[list[str]] = []
    for row in rows:
        for name, c in (row.get("classes") or {}).items():
            body.append([*(_text(row.get(k)) for k in labels), *_cells(name, c, fmt_ms)])
    if not body:
        return ""
    header = [*labels, *HEADER]
    sub = [*("" for _ in labels), *SUB]
    widths = [max(len(r[i]) for r in (header, sub, *body)) for i in range(len(header))]
    left = len(labels) + 1  # labels and the class name left-aligned

    def line(cells: list[str]) -> str:
        pairs = enumerate(zip(cells, widths, strict=True))
        return "  ".join(c.ljust(w) if i < left else c.rjust(w) for i, (c, w) in pairs).rstrip()

    rule = "-" * len(line(header))
    out = ["Per priority class", rule, line(header), line(sub), rule, *(line(b) for b in body)]
    return "\n".join(out) + "\n"


def _cells(name: str, c: dict[str, Any], fmt_ms: Any) -> list[str]:
    lat = ["/".join(fmt_ms(c.get(f"p{q}_{m}_ms")) for q in _PCTS) for m in ("ttft", "tpot")]
    goodput, met = c.get("request_goodput"), c.get("slo_met")
    share: Any = c.get("goodput_fraction")
    return [name, str(c.get("priority", "-")), str(c.get("requests", "-")),
            str(c.get("completed", "-")), str(c.get("rejected", "-")), *lat,
            f"{goodput:,.2f}" if _finite(goodput) else "-",
            f"{100 * share:.1f}" if _finite(share) else "-",
            "-" if met is None else ("yes" if met else "NO")]


def _finite(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def _text(value: Any) -> str:
    if value is None:
        return "-"
    return f"{value:g}" if isinstance(value, float) else str(value)
