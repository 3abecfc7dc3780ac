"""Validation: read a measured run, replay its workload, and compare it as ``servesim validate``.

A measured run is either request records (contract 4, CSV or Parquet: the engine and
``servesim`` write the same columns) or a client's result file (.json/.jsonl), read by the
one loader of measured runs (:mod:`simulator.measured`, which sniffs the format): GuideLLM
``benchmarks.json``, AIPerf ``profile_export.jsonl`` or a vLLM ``bench serve`` result saved
with ``--save-detailed`` (for that format the page keeps what vLLM itself measured: its
request rate, duration and throughputs, and asks for a rate to replay at, since the file
has no send times). Figures a format cannot give (GuideLLM: the ITL distribution) have no
samples and no comparison row; the page says so. Both sides are reduced to summary
figures (contract 5 keys) and compared by
:func:`calibrate.validate.compare_summaries`, with its tolerances and ok/miss verdicts.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from calibrate.validate import (
    QUEUE_FLOOR_MS,
    THROUGHPUT_TOLERANCE,
    TOLERANCE,
    compare_summaries,
    rows_table,
)
from dashboard.logic.uploads import UPLOAD_DIR, save_upload
from simulator.measured import MeasuredRun, load_measured_runs
from simulator.metrics import request_metrics
from simulator.metrics_stats import describe
from simulator.records import REQUEST_COLUMNS

Samples = dict[str, tuple[np.ndarray, np.ndarray | None]]
NEEDED = ("request_id", "arrival_s", "first_token_s", "finish_s", "prompt_tokens",
          "output_tokens")
METRICS = ("queue", "ttft", "tpot", "itl", "e2el")


@dataclass(slots=True)
class Measured:
    """A measured run: its workload to replay, its latency samples (ms) and summary figures."""

    source: str  # file name
    kind: str  # "records" | "vllm_bench"
    table: pd.DataFrame  # request table (contract 1); arrival_s NaN when not measured
    samples: Samples  # per metric: values in ms, weights (None = one per value)
    rate: float | None  # measured request rate, req/s (to synthesise arrivals)
    summary: dict[str, Any]  # contract 5 keys; None where the file did not measure it
    notes: list[str] = field(default_factory=list)  # facts the reader reported


def _summary(samples: Samples, completed: int, duration_s: float | None, out_tokens: int
             ) -> dict[str, Any]:
    """Summary figures from samples: ``<stat>_<metric>_ms`` (None if not measured), throughput."""
    out: dict[str, Any] = {"completed": completed, "duration": duration_s}
    for metric in METRICS:
        stats = describe(samples[metric][0], (50, 90, 99), samples[metric][1]) \
            if metric in samples else {}
        for stat in ("mean", "p50", "p90", "p99"):
            out[f"{stat}_{metric}_ms"] = stats.get(stat)
    timed = duration_s is not None and duration_s > 0
    out["request_throughput"] = completed / duration_s if duration_s and timed else None
    out["output_throughput"] = out_tokens / duration_s if duration_s and timed else None
    return out


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
    for metric in ("ttft", "tpot", "e2el") + (("queue",) if "scheduled_s" in df else ()):
        v = per[f"{metric}_ms"].to_numpy(dtype=float)
        samples[metric] = (v[np.isfinite(v)], None)
    table = finished[["request_id", "arrival_s", "prompt_tokens", "output_tokens"]]
    table = table.sort_values(["arrival_s", "request_id"]).astype(
        {"request_id": "int64", "prompt_tokens": "int64", "output_tokens": "int64"})
    span = float(table["arrival_s"].max() - table["arrival_s"].min())
    rate = (len(table) - 1) / span if span > 0 else None
    duration = float(finished["finish_s"].max() - df["arrival_s"].min())
    summary = _summary(samples, len(finished), duration, int(table["output_tokens"].sum()))
    return Measured(path.name, "records", table.reset_index(drop=True), samples, rate, summary)


def load_vllm_bench(run: MeasuredRun, name: str) -> Measured:
    """A vLLM bench result, as simulator/measured/ read it, with what vLLM itself measured:
    its request rate (else completed / duration), duration and throughputs. Its send times
    are not in the file, so arrivals are NaN (the page asks for a rate to replay at) and
    the loader's note on the arrivals it assumed is left out."""
    done = run.finished
    if done.empty:
        raise ValueError(f"{name}: no successful requests")
    first_s = done["ttft_s"].to_numpy(dtype=float)
    gaps_s = [run.gaps_s[i] for i in done["request_id"]] if run.gaps_s is not None else []
    out = done["output_tokens"].to_numpy(dtype=float)
    gap_sum = np.array([g.sum() for g in gaps_s])
    tpot = np.divide(gap_sum, out - 1, out=np.full(len(out), np.nan), where=out > 1)
    itl = np.concatenate(gaps_s) if gaps_s else np.array([])
    samples: Samples = {"ttft": (first_s * 1000, None), "tpot": (tpot[np.isfinite(tpot)] * 1000,
                                                                 None),
                        "itl": (itl * 1000, None), "e2el": ((first_s + gap_sum) * 1000, None)}
    table = run.replay_table().assign(arrival_s=np.nan)
    duration = run.figures.get("duration")
    rate = run.offered_rate or (len(done) / duration if duration else None)
    summary = _summary(samples, len(done), duration, int(out.sum()))
    for key in ("request_throughput", "output_throughput"):  # as vLLM measured them
        if key in run.figures:
            summary[key] = run.figures[key]
    notes = [n for n in run.notes if n != run.assumed_arrivals]
    return Measured(name, "vllm_bench", table, samples, rate, summary, notes)


def load_client_run(path: Path) -> Measured:
    """A client's result file through :func:`simulator.measured.load_measured_runs` (one
    run); a vLLM bench result keeps vLLM's own rate and throughputs (:func:`load_vllm_bench`)."""
    runs = load_measured_runs(path)
    if len(runs) != 1:
        raise ValueError(f"{path.name}: holds {len(runs)} runs; upload a file of one")
    run = runs[0]
    if run.format == "vllm_bench":
        return load_vllm_bench(run, path.name)
    return from_run(run, path.name)


def from_run(run: MeasuredRun, name: str) -> Measured:
    """A run read by simulator/measured/ as this page's Measured: samples from its finished
    requests, ITL only where the format has per-token times."""
    done = run.finished
    if done.empty:
        raise ValueError(f"{name}: no finished requests to compare")
    ttft, e2e = done["ttft_s"].to_numpy(float), done["e2e_s"].to_numpy(float)
    out = done["output_tokens"].to_numpy(float)
    tpot = np.divide(e2e - ttft, out - 1, out=np.full(len(out), np.nan), where=out > 1)
    samples: Samples = {"ttft": (ttft[np.isfinite(ttft)] * 1000, None),
                        "tpot": (tpot[np.isfinite(tpot)] * 1000, None),
                        "e2el": (e2e * 1000, None)}
    if run.gaps_s is not None:
        gaps = [run.gaps_s[i] for i in done["request_id"] if i in run.gaps_s]
        samples["itl"] = (np.concatenate(gaps) * 1000 if gaps else np.array([]), None)
    table = run.replay_table()
    if not run.arrivals_known:
        table = table.assign(arrival_s=np.nan)
    span = float(table["arrival_s"].max() - table["arrival_s"].min())
    rate = (len(table) - 1) / span if run.arrivals_known and span > 0 else None
    notes = [*run.notes, *(f"{run.format} cannot give: {m}" for m in run.missing)]
    return Measured(name, run.format, table, samples, rate, run.summary(), notes)


def load_measured(path: Path) -> Measured:
    """Records (.csv/.parquet) or a client's result file (.json/.jsonl), by extension."""
    if path.suffix.lower() in (".json", ".jsonl"):
        return load_client_run(path)
    if path.suffix.lower() in (".csv", ".parquet", ".pq"):
        return load_records(path)
    raise ValueError(f"{path.name}: expected request records (.csv, .parquet) or a "
                     "GuideLLM, AIPerf or vLLM bench result (.json, .jsonl)")


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


def comparison(measured: Measured, simulated: dict[str, Any], policy: str) -> pd.DataFrame:
    """``servesim validate``'s rows (calibrate.validate.ROW_KEYS) for one point; figures
    the measured file does not hold (queue time from a client, throughput it omits) have
    no row."""
    rows = compare_summaries(measured.summary, simulated, policy=policy, load="measured")
    kept = [r for r in rows if not (r["metric"] == "throughput" and
                                    measured.summary.get(r["statistic"]) is None)]
    return rows_table(kept)


def verdict(table: pd.DataFrame) -> str:
    """How many figures are within tolerance, and the worst one (llm.c style)."""
    if table.empty:
        return "No comparable figures."
    finite = table[np.isfinite(table["relative_error"].astype(float))]
    head = f"{int(table['ok'].sum())}/{len(table)} figures within tolerance."
    if finite.empty:
        return head
    r = finite.loc[finite["relative_error"].abs().idxmax()]
    return (f"{head} Worst: {r['statistic']} {r['metric']} simulated {r['simulated']:.4g} vs "
            f"measured {r['measured']:.4g} ({r['relative_error']:+.1%}, tolerance "
            f"{r['tolerance']:.0%}).")


def tolerance_text() -> str:
    """The tolerances ``servesim validate`` applies, in words."""
    stats = ", ".join(f"{stat} {tol:.0%}" for stat, tol in TOLERANCE.items())
    return (f"As `servesim validate`: error = simulated / measured - 1; a figure is ok within "
            f"its tolerance ({stats}, throughput {THROUGHPUT_TOLERANCE:.0%}; queue time also "
            f"within {QUEUE_FLOOR_MS:g} ms). Figures the measured file does not hold are not "
            "compared.")
