"""Loaders for CSV traces: Azure LLM inference, BurstGPT, length-only CSVs, the contract.

Errors name the file, the physical line (header = line 1), the column as the file
spells it and the bad value. Columns are found by name, never by position.
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa

from simulator.errors import TraceError
from simulator.workload.table import fail_first, parse_numeric, read_csv_rows, read_request_table
from simulator.workload.traces_common import LoadedTrace, finish

_ZONE = re.compile(r"(Z|[+-]\d\d:?\d\d)\s*$")
_FIRST_LINE = 2  # row 0 of the data is line 2 of the file (line 1 is the header)
NO_ARRIVALS_NOTE = (
    "the trace has no arrival times: arrival_s is NaN; synthesise arrivals "
    "(workload.arrival = poisson, gamma or constant)"
)


def _require(df: pd.DataFrame, path: Path, columns: Sequence[str]) -> None:
    missing = [c for c in columns if c not in df.columns]
    if missing:
        raise TraceError(
            f"{path} line 1: missing column(s) {missing}; the header has {list(df.columns)}"
        )


def _count(df: pd.DataFrame, path: Path, column: str, integer: bool = True) -> np.ndarray:
    """A non-negative numeric column (token counts or times), errors naming the line."""
    values = parse_numeric(df[column], str(path), column, integer, _FIRST_LINE)
    fail_first(values < 0, df[column], str(path), column, "must be >= 0", _FIRST_LINE)
    return values


def load_azure(path: str | os.PathLike[str]) -> LoadedTrace:
    """Azure LLM inference trace (2023 hour-long or 2024 week-long files).

    ``TIMESTAMP,ContextTokens,GeneratedTokens``. TIMESTAMP is ISO 8601 wall-clock
    time: 2023 files have 7 fractional digits and no time zone (``2023-11-16
    18:15:46.6805900``, kept to 100 ns); 2024 files carry a zone and variable digits
    (``2024-05-10 00:00:00.009930+00:00``). All are read as UTC (naive times taken
    as UTC), and arrival_s = TIMESTAMP - earliest TIMESTAMP in seconds.
    ContextTokens = prompt tokens, GeneratedTokens = output tokens.
    """
    p = Path(path)
    df = read_csv_rows(p, dtype={"TIMESTAMP": str})
    _require(df, p, ("TIMESTAMP", "ContextTokens", "GeneratedTokens"))
    raw = df["TIMESTAMP"]
    fail_first(raw.isna().to_numpy(), raw, str(p), "TIMESTAMP", "value is missing", _FIRST_LINE)
    stamps = pd.to_datetime(raw, format="ISO8601", errors="coerce", utc=True)
    fail_first(
        stamps.isna().to_numpy(),
        raw,
        str(p),
        "TIMESTAMP",
        "not a timestamp like '2023-11-16 18:15:46.6805900'",
        _FIRST_LINE,
    )
    arrival = (stamps - stamps.min()).dt.total_seconds().to_numpy(dtype=np.float64)
    notes = []
    if len(raw):
        zone = (
            "with a time zone (converted to UTC)"
            if _ZONE.search(str(raw.iloc[0]))
            else "without a time zone (read as UTC)"
        )
        notes.append(
            f"TIMESTAMP {zone}; the earliest, {stamps.min().isoformat()}, is arrival_s = 0"
        )
    columns = {
        "arrival_s": arrival,
        "prompt_tokens": _count(df, p, "ContextTokens"),
        "output_tokens": _count(df, p, "GeneratedTokens"),
    }
    return finish(columns, str(p), "azure", notes=notes)


def load_burstgpt(path: str | os.PathLike[str]) -> LoadedTrace:
    """BurstGPT (``BurstGPT_1``/``_2`` and ``_3`` layouts; columns read by name).

    ``Timestamp`` (seconds from 0:00 of the trace's first day), ``Request tokens``
    (prompt) and ``Response tokens`` (output); other columns (Model, Session ID,
    Elapsed time, Total tokens, Log Type) are not part of the request table.
    Rows with 0 request and 0 response tokens are failed requests, dropped and
    counted as ``failed_request``. Rows with exactly one of them 0 are dropped too,
    counted as ``zero_prompt_tokens`` / ``zero_output_tokens``: the contract needs
    at least one of each, and inventing a token would change the trace.
    """
    p = Path(path)
    df = read_csv_rows(p)
    _require(df, p, ("Timestamp", "Request tokens", "Response tokens"))
    columns = {
        "arrival_s": _count(df, p, "Timestamp", integer=False),
        "prompt_tokens": _count(df, p, "Request tokens"),
        "output_tokens": _count(df, p, "Response tokens"),
    }
    return finish(columns, str(p), "burstgpt")


def load_lengths_csv(path: str | os.PathLike[str]) -> LoadedTrace:
    """Length-only CSV: ``num_prefill_tokens,num_decode_tokens`` (ShareGPT, arXiv sets).

    Other columns (``num_total_tokens``, ``pd_ratio``) are ignored. With no arrival
    column, arrival_s is NaN and arrivals must be synthesised. If an ``arrived_at``
    column is present (vidur's converted Splitwise traces: seconds from the first
    request) it is used as the arrival time.
    """
    p = Path(path)
    df = read_csv_rows(p)
    _require(df, p, ("num_prefill_tokens", "num_decode_tokens"))
    has_arrival = "arrived_at" in df.columns
    arrival = (
        _count(df, p, "arrived_at", integer=False) if has_arrival else np.full(len(df), np.nan)
    )
    columns = {
        "arrival_s": arrival,
        "prompt_tokens": _count(df, p, "num_prefill_tokens"),
        "output_tokens": _count(df, p, "num_decode_tokens"),
    }
    return finish(columns, str(p), "lengths_csv", notes=[] if has_arrival else [NO_ARRIVALS_NOTE])


def load_generic(path: str | os.PathLike[str]) -> LoadedTrace:
    """A request table already in contract columns (CSV or Parquet), read as is.

    Unlike the other loaders this keeps the file's request ids and row order, and
    rows out of arrival order are an error (the contract requires order).
    """
    p = Path(path)
    try:
        table = read_request_table(p)
    except (OSError, pa.ArrowException) as exc:  # a damaged or truncated Parquet file
        kind = "Parquet file" if p.suffix.lower() in (".parquet", ".pq") else "file"
        raise TraceError(f"{p}: not a readable {kind} ({exc})") from exc
    nan = bool(table["arrival_s"].isna().all()) and len(table) > 0
    return LoadedTrace(
        table=table,
        source=str(p),
        format="generic",
        dropped={},
        notes=[NO_ARRIVALS_NOTE] if nan else [],
    )
