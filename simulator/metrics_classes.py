"""Per-class metrics: the summary's ``classes`` block, one entry per priority class.

A run whose workload has priority classes (simulator/workload/classes.py) gets
``summary["classes"]``: for each class, keyed by its name, the counts by status, the
mean and percentiles of TTFT, TPOT, E2E latency and queue time over its finished
requests, and goodput judged against the class's own SLO (the scenario's ``[slo]`` when
the class sets none). The definitions are the run-wide ones of docs/metrics.md applied
to the class's rows; the duration is the run's, so the classes' throughputs add up to
the run's. Request records gain the ``priority_class`` column (:func:`with_classes`).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np
import pandas as pd

from simulator.metrics import request_metrics
from simulator.metrics_resources import run_window
from simulator.metrics_slo import Samples, good_mask, percentile_checks, slo_met
from simulator.metrics_stats import describe
from simulator.slo import SLO
from simulator.workload.classes import CLASS_COLUMN, WorkloadClasses

CLASS_METRICS = ("ttft", "tpot", "e2el", "queue")
_STATS = ("mean", "p50", "p90", "p99")


def with_classes(records: pd.DataFrame, table: pd.DataFrame) -> pd.DataFrame:
    """``records`` with each request's ``priority_class`` from the request ``table``."""
    by_id = pd.Series(table[CLASS_COLUMN].to_numpy(np.int64),
                      index=table["request_id"].to_numpy(np.int64))
    ids = records["request_id"].to_numpy(np.int64)
    return records.assign(**{CLASS_COLUMN: by_id.reindex(ids).to_numpy(np.int64)})


def class_summary(records: pd.DataFrame, classes: WorkloadClasses | None,
                  slo: SLO | None) -> dict[str, dict[str, Any]]:
    """The ``classes`` block: ``{name: figures}``, most urgent class first."""
    per = request_metrics(records)
    _, dur_s = run_window(records, None)
    cls_col = per[CLASS_COLUMN].to_numpy(np.int64)
    known = classes.by_priority() if classes is not None else {}
    out: dict[str, dict[str, Any]] = {}
    for k in sorted(set(cls_col.tolist()) | set(known)):
        own = known.get(k)
        name = own.name if own is not None else f"class{k}"
        target = own.slo if own is not None and own.slo is not None else slo
        out[name] = _one_class(per[cls_col == k], k, target, dur_s)
    return out


def _one_class(rows: pd.DataFrame, priority: int, slo: SLO | None,
               dur_s: float) -> dict[str, Any]:
    status = rows["status"].to_numpy()
    finished = rows[status == "finished"]
    figures: dict[str, Any] = {
        "priority": priority,
        "requests": len(rows),
        "completed": len(finished),
        "rejected": int(np.sum(status == "rejected")),
        "in_flight": int(np.sum(status == "in_flight")),
        "preemptions": int(rows["preemptions"].sum()),
        "request_throughput": len(finished) / dur_s,
    }
    samples: dict[str, Samples] = {}
    for metric in CLASS_METRICS:
        values = finished[f"{metric}_ms"].to_numpy(dtype=float)
        values = values[~np.isnan(values)]
        samples[metric] = (values, None)
        stats = describe(values, (50.0, 90.0, 99.0), None)
        for stat in _STATS:
            figures[f"{stat}_{metric}_ms"] = stats[stat]
    good = None if slo is None or not slo.per_request_targets_ms else good_mask(finished, slo)
    samples["itl"] = (np.empty(0), None)  # no per-class ITL: the step log mixes classes
    checks = {} if slo is None else percentile_checks(samples, replace(slo, itl_ms=None))
    figures |= {
        "slo": None if slo is None else slo.as_dict(),
        "request_goodput": None if good is None else int(good.sum()) / dur_s,
        "goodput_fraction": None if good is None or not len(rows)
        else int(good.sum()) / len(rows),
        "slo_checks": checks,
        "slo_met": slo_met(checks, figures["rejected"], figures["in_flight"]),
    }
    return figures

