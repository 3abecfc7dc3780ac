"""The Fleet page's results as tables: the replicas over time and the offered load, the cost
against a fixed fleet, refusals by cause, and per-class figures (docs/fleet.md for the
summary keys they read).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

RATE_BINS = 60  # bins of the arrivals histogram when the scenario has no rate schedule
CLASS_COLUMNS = {  # per-class table column -> the classes block's key
    "priority": "priority", "requests": "requests", "completed": "completed",
    "rejected": "rejected", "preemptions": "preemptions",
    "TTFT p50 ms": "p50_ttft_ms", "TTFT p90 ms": "p90_ttft_ms", "TTFT p99 ms": "p99_ttft_ms",
    "TPOT p50 ms": "p50_tpot_ms", "TPOT p90 ms": "p90_tpot_ms", "TPOT p99 ms": "p99_tpot_ms",
    "E2E p99 ms": "p99_e2el_ms", "goodput req/s": "request_goodput",
    "goodput share": "goodput_fraction", "SLO met": "slo_met",
}


def replica_steps(summary: dict[str, Any]) -> pd.DataFrame:
    """``replica_timeline`` as step points ``time_s, billed, serving`` (one row per change),
    closed by a row at the run's end (``fleet_end_s``) holding the last counts; empty
    without the autoscaler."""
    rows = summary.get("replica_timeline")
    if not rows:
        return pd.DataFrame(columns=["time_s", "billed", "serving"])
    frame = pd.DataFrame(rows, columns=["time_s", "billed", "serving"]).astype(
        {"time_s": float, "billed": int, "serving": int})
    end = float(summary.get("fleet_end_s") or frame["time_s"].iloc[-1])
    if end > frame["time_s"].iloc[-1]:
        last = frame.iloc[-1]
        frame.loc[len(frame)] = [end, int(last["billed"]), int(last["serving"])]
    return frame.astype({"billed": int, "serving": int})


def offered_rate(point: dict[str, Any], requests: pd.DataFrame,
                 bins: int = RATE_BINS) -> tuple[pd.DataFrame, str]:
    """The offered load over time as step points ``t_s, rate`` (req/s) and where it came from:
    the scenario's rate schedule (run to the last arrival), else the arrivals counted in
    ``bins`` equal bins (count / bin width)."""
    arrivals = requests["arrival_s"].to_numpy(dtype=float) if len(requests) else np.array([])
    last = float(arrivals.max()) if arrivals.size else 0.0
    sched = point.get("workload", {}).get("rate_schedule")
    if isinstance(sched, dict):
        starts = [float(s) for s in sched["start_s"]]
        rates = [float(r) for r in sched["rate"]]
        keep = [i for i, s in enumerate(starts) if s <= last] or [0]
        t = [starts[i] for i in keep] + [max(last, starts[keep[-1]])]
        r = [rates[i] for i in keep] + [rates[keep[-1]]]
        return pd.DataFrame({"t_s": t, "rate": r}), "rate schedule"
    if not arrivals.size:
        return pd.DataFrame({"t_s": [], "rate": []}), "arrivals"
    counts, edges = np.histogram(arrivals, bins=bins, range=(0.0, max(last, 1e-9)))
    width = edges[1] - edges[0]
    per_s = counts / width
    return (pd.DataFrame({"t_s": edges, "rate": np.append(per_s, per_s[-1])}),
            f"arrivals per {width:.3g} s")


def fleet_cost(summary: dict[str, Any]) -> dict[str, float] | None:
    """Replica-seconds and cost of the autoscaled fleet against a fixed fleet of its peak size
    over the same span (peak x fleet_end_s); None without the autoscaler. Cost =
    replica-seconds / 3600 x GPUs per replica (tp x attention_dp) x usd_per_gpu_hour
    (docs/fleet.md)."""
    if "replica_seconds" not in summary:
        return None
    usd = summary.get("usd_per_gpu_hour")
    tp = int(summary.get("tp") or 1) * int(summary.get("attention_dp") or 1)
    fixed_s = float(summary["peak_replicas"]) * float(summary["fleet_end_s"])
    def cost(seconds: float) -> float:
        return float("nan") if usd is None else seconds / 3600 * tp * float(usd)
    auto_s = float(summary["replica_seconds"])
    return {"replica_seconds": auto_s, "fixed_replica_seconds": fixed_s,
            "cost_usd": cost(auto_s), "fixed_cost_usd": cost(fixed_s),
            "saving": 1 - auto_s / fixed_s if fixed_s > 0 else float("nan"),
            "mean_replicas": float(summary["mean_replicas"]),
            "peak_replicas": float(summary["peak_replicas"])}


def refusals(summary: dict[str, Any]) -> pd.DataFrame:
    """Refused requests by cause (``rejected_by_cause``), most first."""
    causes = summary.get("rejected_by_cause") or {}
    frame = pd.DataFrame({"cause": list(causes), "requests": [int(v) for v in causes.values()]})
    return frame.sort_values("requests", ascending=False, kind="stable").reset_index(drop=True)


def class_table(summary: dict[str, Any]) -> pd.DataFrame:
    """One row per priority class (most urgent first) from ``summary["classes"]``."""
    block = summary.get("classes") or {}
    rows = [{"class": name, **{col: figures.get(key) for col, key in CLASS_COLUMNS.items()}}
            for name, figures in block.items()]
    return pd.DataFrame(rows, columns=["class", *CLASS_COLUMNS])


def class_ttft(requests: pd.DataFrame, summary: dict[str, Any]) -> dict[str, np.ndarray]:
    """Finished requests' TTFT (ms) per class name (records carry the class's priority)."""
    block = summary.get("classes") or {}
    if "priority_class" not in requests or not block:
        return {}
    done = requests[requests["status"] == "finished"]
    out = {}
    for name, figures in block.items():
        values = done.loc[done["priority_class"] == figures["priority"], "ttft_ms"]
        out[name] = values.to_numpy(dtype=float)
    return out
