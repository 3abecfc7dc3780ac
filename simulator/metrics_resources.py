"""Run-level figures from the request records and step log: duration, utilisation, KV usage.

Pure functions over the tables of data contract 4 (simulator/records.py); the formulas
are in docs/metrics.md.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

NAN = float("nan")


def require_columns(df: pd.DataFrame, columns: tuple[str, ...], what: str) -> None:
    """Raise ValueError naming the columns of ``columns`` that ``df`` lacks."""
    missing = [c for c in columns if c not in df.columns]
    if missing:
        raise ValueError(f"{what} lacks columns {missing}; has {list(df.columns)}")


def run_window(requests: pd.DataFrame, duration_s: float | None) -> tuple[float, float]:
    """``(start_s, duration_s)`` of the benchmark: first arrival to last finish.

    ``start_s`` is the first arrival of any request (rejected ones included) and the
    default duration runs to the last finish of a finished request. A ``duration_s``
    passed by the caller wins. NaN where the records do not define it.
    """
    arrivals = requests["arrival_s"].to_numpy(dtype=float)
    start_s = float(np.nanmin(arrivals)) if np.any(np.isfinite(arrivals)) else NAN
    if duration_s is not None:
        if not duration_s > 0:
            raise ValueError(f"{duration_s=} must be > 0")
        return start_s, float(duration_s)
    finished = requests["status"].to_numpy() == "finished"
    finishes = requests["finish_s"].to_numpy(dtype=float)[finished]
    if finishes.size == 0 or not np.isfinite(start_s):
        return start_s, NAN
    span_s = float(np.nanmax(finishes)) - start_s
    return start_s, span_s if span_s > 0 else NAN


def busy_fraction(
    steps: pd.DataFrame, start_s: float, duration_s: float, num_replicas: int
) -> float:
    """Sum of step durations / (duration * replicas), steps clipped to the run window.

    Clipping to ``[start_s, start_s + duration_s]`` only matters for steps that run past
    the last finish (requests still in flight at the horizon); it keeps the figure <= 1.
    """
    if num_replicas < 1:
        raise ValueError(f"{num_replicas=} must be >= 1")
    seen = int(steps["replica"].nunique()) if len(steps) else 0
    if seen > num_replicas:
        raise ValueError(f"step log has {seen} replicas but {num_replicas=}")
    if not (np.isfinite(duration_s) and duration_s > 0):
        return NAN
    lo = start_s if np.isfinite(start_s) else -np.inf
    hi = lo + duration_s if np.isfinite(lo) else np.inf
    start = np.clip(steps["start_s"].to_numpy(dtype=float), lo, hi)
    end = np.clip(steps["end_s"].to_numpy(dtype=float), lo, hi)
    return float(np.sum(end - start)) / (duration_s * num_replicas)


def kv_usage(steps: pd.DataFrame, kv_blocks_total: int | dict[int, int]) -> tuple[float, float]:
    """``(mean, max)`` over steps of kv_blocks_used / kv_blocks_total of the step's replica.

    ``kv_blocks_total`` is one count for every replica or a dict by replica id. The mean
    counts each step once (it is not weighted by step duration). NaN for an empty log.
    """
    replicas = steps["replica"].to_numpy(dtype=np.int64)
    given = (
        {f"kv_blocks_total[{r}]": v for r, v in kv_blocks_total.items()}
        if isinstance(kv_blocks_total, dict)
        else {"kv_blocks_total": kv_blocks_total}
    )
    for name, total in given.items():
        if isinstance(total, bool) or not isinstance(total, int | np.integer) or total < 1:
            raise ValueError(f"{name} = {total!r} must be an int >= 1")
    if isinstance(kv_blocks_total, dict):
        missing = sorted(set(np.unique(replicas).tolist()) - {int(k) for k in kv_blocks_total})
        if missing:
            raise ValueError(f"kv_blocks_total has no entry for replicas {missing}")
        totals = {int(k): int(v) for k, v in kv_blocks_total.items()}
    else:
        totals = {int(r): int(kv_blocks_total) for r in np.unique(replicas).tolist()}
    if len(steps) == 0:
        return NAN, NAN
    ids = np.array(sorted(totals), dtype=np.int64)  # each step's total by lookup, not a list
    denom = np.array([totals[int(r)] for r in ids], dtype=float)[np.searchsorted(ids, replicas)]
    usage = steps["kv_blocks_used"].to_numpy(dtype=float) / denom
    return float(np.mean(usage)), float(np.max(usage))
