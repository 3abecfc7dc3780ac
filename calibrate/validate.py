"""Simulated vs measured, metric by metric: the rows ``servesim validate`` prints.

Both sides are summarised by the same function (``simulator.metrics.summarize``) from the
same record formats (contract 4), so a difference is a difference in the timelines, not
in definitions. For each (policy, load) point and each metric (queue time, TTFT, TPOT,
ITL, end-to-end latency) the mean, P50, P90 and P99 are compared, plus request and
output-token throughput::

    relative_error = simulated / measured - 1

A figure is *ok* when ``|simulated - measured| <= tolerance * |measured|``; the
tolerances are issue 4's targets (5% for mean/P50/P90, 10% for P99, 5% for throughput).
Queue time is near zero at light load, where a relative error is noise, so it also
passes within an absolute ``QUEUE_FLOOR_MS`` (docs/calibration.md, "Validation").
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from simulator.metrics import request_metrics

METRICS = ("queue", "ttft", "tpot", "itl", "e2el")
STATISTICS = ("mean", "p50", "p90", "p99")
TOLERANCE = {"mean": 0.05, "p50": 0.05, "p90": 0.05, "p99": 0.10}
THROUGHPUT = {"request_throughput": "req/s", "output_throughput": "tok/s"}
THROUGHPUT_TOLERANCE = 0.05
QUEUE_FLOOR_MS = 1.0  # queue-time differences below this pass whatever their ratio
ROW_KEYS = ("policy", "load", "metric", "statistic", "measured", "simulated",
            "relative_error", "tolerance", "ok")


@dataclass(slots=True, frozen=True)
class WorstRequest:
    """The request whose simulated end-to-end latency is furthest from its measured one."""

    policy: str
    load: Any
    request_id: int
    measured_ms: float
    simulated_ms: float

    @property
    def relative_error(self) -> float:
        """simulated / measured - 1."""
        return self.simulated_ms / self.measured_ms - 1.0


def _relative(measured: float, simulated: float) -> float:
    if measured == 0:
        return 0.0 if simulated == 0 else math.inf
    return simulated / measured - 1.0


def _value(summary: dict[str, Any], key: str) -> float:
    value = summary.get(key)
    return math.nan if value is None else float(value)


def compare_summaries(measured: dict[str, Any], simulated: dict[str, Any], *, policy: str,
                      load: Any) -> list[dict[str, Any]]:
    """Rows (see ROW_KEYS) comparing two summary objects (contract 5) of one point.

    A figure the measured side does not have (null: a client measuring an HTTP endpoint
    cannot see queue time) is not compared and gets no row.
    """
    rows = []
    for metric in METRICS:
        for stat in STATISTICS:
            key = f"{stat}_{metric}_ms"
            m, s = _value(measured, key), _value(simulated, key)
            if key in measured and measured[key] is None:
                continue
            tol = TOLERANCE[stat]
            ok = abs(s - m) <= tol * abs(m)
            if metric == "queue":
                ok = ok or abs(s - m) <= QUEUE_FLOOR_MS
            rows.append(_row(policy, load, metric, stat, m, s, tol, ok))
    for key in THROUGHPUT:
        if key in measured and measured[key] is None:
            continue  # not measured (a client's file without send times or duration)
        m, s = _value(measured, key), _value(simulated, key)
        rows.append(_row(policy, load, "throughput", key, m, s, THROUGHPUT_TOLERANCE,
                         abs(s - m) <= THROUGHPUT_TOLERANCE * abs(m)))
    return rows


def _row(policy: str, load: Any, metric: str, stat: str, m: float, s: float, tol: float,
         ok: bool) -> dict[str, Any]:
    values = (policy, load, metric, stat, m, s, _relative(m, s), tol,
              bool(ok) and math.isfinite(m) and math.isfinite(s))
    return dict(zip(ROW_KEYS, values, strict=True))


def worst_request(measured: pd.DataFrame, simulated: pd.DataFrame, *, policy: str,
                  load: Any) -> WorstRequest | None:
    """The finished request with the largest relative end-to-end latency error."""
    m = request_metrics(measured[measured["status"] == "finished"]).set_index("request_id")
    s = request_metrics(simulated[simulated["status"] == "finished"]).set_index("request_id")
    both = m.index.intersection(s.index)
    if len(both) == 0:
        return None
    me, se = m.loc[both, "e2el_ms"].to_numpy(), s.loc[both, "e2el_ms"].to_numpy()
    i = int(np.nanargmax(np.abs(se / me - 1.0)))
    return WorstRequest(policy, load, int(both[i]), float(me[i]), float(se[i]))


def rows_table(rows: list[dict[str, Any]]) -> pd.DataFrame:
    """The rows as a table in ROW_KEYS order."""
    return pd.DataFrame(rows, columns=list(ROW_KEYS))


def format_rows(rows: list[dict[str, Any]], worst: list[WorstRequest]) -> str:
    """A text report: one block per point, one line per metric, a verdict and the worst request."""
    table = rows_table(rows)
    lines = []
    for (policy, load), part in table.groupby(["policy", "load"], sort=False):
        lines.append(f"policy {policy}, load {load}")
        lines.append(f"  {'metric':<10} {'stat':<18} {'measured':>10} {'simulated':>10} "
                     f"{'error':>8} {'tol':>5}  ok")
        for r in part.itertuples():
            lines.append(f"  {r.metric:<10} {r.statistic:<18} {r.measured:>10.4g} "
                         f"{r.simulated:>10.4g} {r.relative_error:>+8.1%} {r.tolerance:>5.0%}  "
                         f"{'yes' if r.ok else 'NO'}")
        bad = int((~part["ok"]).sum())
        lines.append(f"  -> {len(part) - bad}/{len(part)} within tolerance")
        for w in worst:
            if w.policy == policy and w.load == load:
                lines.append(f"  worst request: id {w.request_id}, end-to-end "
                             f"{w.measured_ms:.1f} ms measured vs {w.simulated_ms:.1f} ms "
                             f"simulated ({w.relative_error:+.1%})")
        lines.append("")
    n_ok = int(table["ok"].sum())
    lines.append(f"overall: {n_ok}/{len(table)} figures within tolerance")
    return "\n".join(lines)
