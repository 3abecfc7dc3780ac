"""Validation: read a measured run, replay its workload, and compare latency distributions.

A measured run is either request records (contract 4, CSV or Parquet: the engine and
``servesim`` write the same columns) or a vLLM ``bench serve`` result JSON saved with
``--save-detailed`` (per-request ``ttfts``, ``itls``, ``input_lens``, ``output_lens``, in
seconds). The error table reports, per metric and statistic, the relative error of the
simulation against the measurement: ``(simulated - measured) / measured``.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from dashboard.logic.uploads import UPLOAD_DIR, save_upload
from simulator.metrics import request_metrics
from simulator.metrics_stats import describe
from simulator.records import REQUEST_COLUMNS

Samples = dict[str, tuple[np.ndarray, np.ndarray | None]]
NEEDED = ("request_id", "arrival_s", "first_token_s", "finish_s", "prompt_tokens",
          "output_tokens")
STATS = (("mean", "mean"), ("P50", "p50"), ("P90", "p90"), ("P99", "p99"))


@dataclass(slots=True)
class Measured:
    """A measured run: its workload to replay and its latency samples (ms)."""

    source: str  # file name
    kind: str  # "records" | "vllm_bench"
    table: pd.DataFrame  # request table (contract 1); arrival_s NaN when not measured
    samples: Samples  # per metric: values in ms, weights (None = one per value)
    rate: float | None  # measured request rate, req/s (to synthesise arrivals)


def _read_table(path: Path) -> pd.DataFrame:
    if path.suffix.lower() in (".parquet", ".pq"):
        try:
            return pd.read_parquet(path)
        except Exception as e:  # pyarrow raises several types for a damaged file
            raise ValueError(f"{path.name}: not a readable Parquet file ({e})") from e
    try:
        return pd.read_csv(path)
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError) as e:
        raise ValueError(f"{path.name}: not a readable CSV file ({e})") from e


def load_records(path: Path) -> Measured:
    """Request records (contract 4); errors name the file, the column and the CSV line."""
    df = _read_table(path)
    missing = [c for c in NEEDED if c not in df.columns]
    if missing:
        raise ValueError(f"{path.name}: request records lack columns {missing} "
                         f"(contract 4 has {list(REQUEST_COLUMNS)})")
    for col in NEEDED:
        values = pd.to_numeric(df[col], errors="coerce")
        bad = values.isna() & df[col].notna()
        if bad.any():
            i = int(np.flatnonzero(bad.to_numpy())[0])
            raise ValueError(f"{path.name} line {i + 2}: {col} = {df[col].iloc[i]!r} "
                             "is not a number")
        df[col] = values
    finished = df[df["status"] == "finished"] if "status" in df else df.dropna(
        subset=["finish_s"])
    if finished.empty:
        raise ValueError(f"{path.name}: no finished requests to compare")
    per = request_metrics(finished.assign(scheduled_s=finished.get("scheduled_s", np.nan)))
    samples: Samples = {}
    for metric in ("ttft", "tpot", "e2el"):
        v = per[f"{metric}_ms"].to_numpy(dtype=float)
        samples[metric] = (v[np.isfinite(v)], None)
    table = finished[["request_id", "arrival_s", "prompt_tokens", "output_tokens"]]
    table = table.sort_values(["arrival_s", "request_id"]).astype(
        {"request_id": "int64", "prompt_tokens": "int64", "output_tokens": "int64"})
    span = float(table["arrival_s"].max() - table["arrival_s"].min())
    rate = (len(table) - 1) / span if span > 0 else None
    return Measured(path.name, "records", table.reset_index(drop=True), samples, rate)


def _numbers(obj: dict[str, Any], key: str, where: str) -> list[Any]:
    value = obj.get(key)
    if not isinstance(value, list):
        raise ValueError(f"{where}: field {key!r} is missing or not a list "
                         "(vLLM writes per-request arrays with --save-detailed)")
    return value


def load_vllm_bench(path: Path) -> Measured:
    """A vLLM bench result JSON; errors name the file, the field and the list index."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise ValueError(f"{path.name}: not valid JSON ({e})") from e
    if not isinstance(data, dict):
        raise ValueError(f"{path.name}: expected a JSON object (a vLLM bench result)")
    arrays = {k: _numbers(data, k, path.name) for k in ("input_lens", "output_lens", "ttfts",
                                                          "itls")}
    n = len(arrays["input_lens"])
    for key, values in arrays.items():
        if len(values) != n:
            raise ValueError(f"{path.name}: {key} has {len(values)} entries, input_lens has {n}")
    found = data.get("errors")
    errors: list[Any] = found if isinstance(found, list) else [""] * n
    rows: list[tuple[int, int, int]] = []
    ttft: list[float] = []
    tpot: list[float] = []
    e2el: list[float] = []
    itl: list[float] = []
    for i in range(n):
        try:
            p, o = int(arrays["input_lens"][i]), int(arrays["output_lens"][i])
            first = float(arrays["ttfts"][i])
            gaps = [float(g) for g in arrays["itls"][i]]
        except (TypeError, ValueError):
            raise ValueError(f"{path.name}: entry {i} of input_lens/output_lens/ttfts/itls "
                             "is not a number (itls[i] must be a list of seconds)") from None
        if o <= 0 or (i < len(errors) and errors[i]):
            continue  # a failed request, as the trace loader drops it
        rows.append((len(rows), p, o))
        ttft.append(first * 1000)
        e2el.append((first + sum(gaps)) * 1000)
        tpot.append(sum(gaps) / (o - 1) * 1000 if o > 1 else math.nan)
        itl.extend(g * 1000 for g in gaps)
    if not rows:
        raise ValueError(f"{path.name}: no successful requests")
    table = pd.DataFrame(rows, columns=["request_id", "prompt_tokens", "output_tokens"])
    table.insert(1, "arrival_s", np.nan)
    rate = data.get("request_rate")
    if not isinstance(rate, int | float) or not math.isfinite(rate) or rate <= 0:
        dur, done = data.get("duration"), data.get("completed", len(rows))
        rate = done / dur if isinstance(dur, int | float) and dur > 0 else None
    tp = np.array(tpot)
    samples: Samples = {"ttft": (np.array(ttft), None), "tpot": (tp[np.isfinite(tp)], None),
                        "itl": (np.array(itl), None), "e2el": (np.array(e2el), None)}
    return Measured(path.name, "vllm_bench", table, samples, rate)


def load_measured(path: Path) -> Measured:
    """Records (.csv/.parquet) or a vLLM bench result (.json), by extension."""
    if path.suffix.lower() == ".json":
        return load_vllm_bench(path)
    if path.suffix.lower() in (".csv", ".parquet", ".pq"):
        return load_records(path)
    raise ValueError(f"{path.name}: expected request records (.csv, .parquet) "
                     "or a vLLM bench result (.json)")


def demo_records(base: dict[str, Any], slowdown: float) -> Path:
    """A stand-in measurement: ``base`` simulated with every step ``slowdown`` x slower."""
    from simulator.runner import run_point

    point = {**base, "cost": {**base.get("cost", {}), "time_scale": slowdown}}
    records = run_point({}, point).result.requests
    name = f"demo-measured-x{slowdown:g}.csv"
    return save_upload(name, records.to_csv(index=False).encode(), UPLOAD_DIR)


def replay_trace(measured: Measured) -> Path:
    """The measured workload as a request-table file the simulator's trace loader reads."""
    buf = measured.table.to_csv(index=False).encode()
    return save_upload(f"{Path(measured.source).stem}-workload.csv", buf, UPLOAD_DIR)


def error_table(measured: Samples, simulated: Samples) -> pd.DataFrame:
    """Per metric both sides share and per statistic: measured, simulated (ms), error (%)."""
    rows = []
    for metric in ("ttft", "tpot", "itl", "e2el"):
        if metric not in measured or metric not in simulated:
            continue
        m = describe(measured[metric][0], (50, 90, 99), measured[metric][1])
        s = describe(simulated[metric][0], (50, 90, 99), simulated[metric][1])
        for label, key in STATS:
            err = (s[key] - m[key]) / m[key] * 100 if m[key] else math.nan
            rows.append({"metric": metric.upper(), "stat": label, "measured_ms": m[key],
                         "simulated_ms": s[key], "error_pct": err})
    return pd.DataFrame(rows)


def worst_offender(table: pd.DataFrame) -> str:
    """The largest relative error, llm.c style: which metric, which statistic, how far."""
    ok = table.dropna(subset=["error_pct"])
    if ok.empty:
        return "No comparable statistics."
    row = ok.loc[ok["error_pct"].abs().idxmax()]
    return (f"Worst: {row['stat']} {row['metric']} simulated {row['simulated_ms']:.1f} ms vs "
            f"measured {row['measured_ms']:.1f} ms ({row['error_pct']:+.1f}%).")
