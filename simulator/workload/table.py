"""The request table (data contract 1): what a workload hands to the simulator.

A request table is a pandas DataFrame with one row per request, in arrival order.
Version: ``REQUEST_TABLE_VERSION`` (stored in Parquet schema metadata under
``servesim.request_table_version``; CSV has no place for it).

==============  =======  ========  ====================================================
column          dtype    needed    meaning
==============  =======  ========  ====================================================
request_id      int64    required  unique id
arrival_s       float64  required  seconds from the start of the run, non-decreasing;
                                   all NaN for closed-loop workloads (the simulator
                                   decides when each request is sent), never mixed
prompt_tokens   int64    required  prompt (input) tokens, >= 1
output_tokens   int64    required  output tokens to generate, >= 1
prefix_group    int64    optional  requests sharing a reusable KV prefix; -1 = none
prefix_tokens   int64    optional  leading prompt tokens shared with an earlier request
                                   of the group, 0 <= prefix_tokens < prompt_tokens
priority        int64    optional  scheduling priority (policy-defined meaning; no
                                   policy reads it: see priority_class)
priority_class  int64    optional  priority class, >= 0, lower = more urgent (vLLM's
                                   ``priority``); read by ``scheduling = "priority"``
                                   and the per-class summary (workload/classes.py)
client_id       int64    optional  closed-loop client that sends the request, >= 0
think_s         float64  optional  closed loop: seconds the client waits after the
                                   response to its previous request before sending this
                                   one, >= 0; on a client's first request, when it is
                                   sent (0: at t = 0; workload.client_start)
segments_start  int64    optional  the row's slice of its workload's prefix segments
segments_stop   int64    optional  (simulator/workload/prefixes.py): the token content
                                   its stream starts with; start <= stop
==============  =======  ========  ====================================================

Rows are located in error messages as ``<file> line N`` (the physical line of a CSV,
header = line 1) or ``<source> row N`` (1-based position in an in-memory table).
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pandas as pd

from simulator.atomic import atomic_write
from simulator.errors import TraceError

REQUEST_TABLE_VERSION = 1
VERSION_KEY = b"servesim.request_table_version"
REQUIRED_COLUMNS: tuple[str, ...] = ("request_id", "arrival_s", "prompt_tokens", "output_tokens")
OPTIONAL_COLUMNS: tuple[str, ...] = (
    "prefix_group",
    "prefix_tokens",
    "priority",
    "priority_class",
    "client_id",
    "think_s",
    "segments_start",
    "segments_stop",
)
# column -> (is_integer, smallest allowed value or None, NaN allowed)
_SPECS: dict[str, tuple[bool, float | None, bool]] = {
    "request_id": (True, None, False),
    "arrival_s": (False, 0.0, True),
    "prompt_tokens": (True, 1, False),
    "output_tokens": (True, 1, False),
    "prefix_group": (True, -1, False),
    "prefix_tokens": (True, 0, False),
    "priority": (True, None, False),
    "priority_class": (True, 0, False),
    "client_id": (True, 0, False),
    "think_s": (False, 0.0, False),
    "segments_start": (True, 0, False),
    "segments_stop": (True, 0, False),
}


def show(value: object) -> str:
    """Render a bad value for an error message (strings quoted, numpy scalars plain)."""
    if isinstance(value, np.generic):
        value = value.item()
    return repr(value) if isinstance(value, str) else str(value)


def locate(source: str, pos: int, first_line: int | None) -> str:
    """Name row ``pos`` (0-based): a file line when ``first_line`` is known, else a row."""
    if first_line is None:
        return f"{source} row {pos + 1}"
    return f"{source} line {first_line + pos}"


def fail_first(
    mask: np.ndarray,
    values: pd.Series | np.ndarray,
    source: str,
    column: str,
    reason: str,
    first_line: int | None,
) -> None:
    """Raise TraceError naming the first row where ``mask`` is true, if any."""
    bad = np.flatnonzero(np.asarray(mask, dtype=bool))
    if bad.size == 0:
        return
    pos = int(bad[0])
    value = values.iloc[pos] if isinstance(values, pd.Series) else values[pos]
    more = f" ({bad.size - 1} more rows like it)" if bad.size > 1 else ""
    where = locate(source, pos, first_line)
    raise TraceError(f"{where}: {column} = {show(value)}: {reason}{more}")


def parse_numeric(
    raw: pd.Series,
    source: str,
    column: str,
    integer: bool,
    first_line: int | None,
    nan_ok: bool = False,
) -> np.ndarray:
    """Convert one column to float64 or int64, naming the first missing or bad value."""
    if pd.api.types.is_integer_dtype(raw.dtype) and not raw.hasnans:
        return raw.to_numpy(dtype=np.int64 if integer else np.float64)  # exact for big ids
    missing = raw.isna().to_numpy()
    if not nan_ok:
        fail_first(missing, raw, source, column, "value is missing", first_line)
    num = pd.to_numeric(raw, errors="coerce").astype("float64").to_numpy()
    fail_first(np.isnan(num) & ~missing, raw, source, column, "not a number", first_line)
    fail_first(np.isinf(num), raw, source, column, "must be finite", first_line)
    if not integer:
        return num
    fail_first(num != np.round(num), raw, source, column, "must be a whole number", first_line)
    # past 2**53 a float is no longer every whole number, and past 2**63 the int64 cast wraps
    fail_first(np.abs(num) > 2.0**53, raw, source, column, "too large (at most 2**53)",
               first_line)
    return num.astype(np.int64)


def validate_request_table(
    df: pd.DataFrame, source: str, first_line: int | None = None
) -> pd.DataFrame:
    """Check a request table against contract 1 and return a copy with coerced dtypes.

    ``source`` names where the table came from; ``first_line`` is the file line of
    row 0 when the table was read from a CSV (2 with a header), so errors say
    ``file line N``. Unknown columns are an error (a typo would otherwise be lost).
    Returns the contract columns in canonical order with a fresh RangeIndex.
    """
    if not isinstance(df, pd.DataFrame):
        raise TraceError(f"{source}: a request table must be a DataFrame, got {type(df).__name__}")
    missing = [c for c in REQUIRED_COLUMNS if c not in df.columns]
    if missing:
        raise TraceError(f"{source}: missing required column(s) {missing}; have {list(df.columns)}")
    known = REQUIRED_COLUMNS + OPTIONAL_COLUMNS
    unknown = [c for c in df.columns if c not in known]
    if unknown:
        raise TraceError(f"{source}: unknown column(s) {unknown}; known columns: {list(known)}")
    out: dict[str, np.ndarray] = {}
    for col in (c for c in known if c in df.columns):
        integer, low, nan_ok = _SPECS[col]
        raw = df[col].reset_index(drop=True)
        values = parse_numeric(raw, source, col, integer, first_line, nan_ok)
        if low is not None:
            fail_first(values < low, values, source, col, f"must be >= {low}", first_line)
        out[col] = values
    table = pd.DataFrame(out)
    _check_rows(table, source, first_line)
    return table


def _check_rows(table: pd.DataFrame, source: str, first_line: int | None) -> None:
    """Checks that involve more than one value: uniqueness, order, NaN mix, prefix."""

    def check(mask: np.ndarray, column: str, reason: str) -> None:
        fail_first(mask, table[column], source, column, reason, first_line)

    check(table["request_id"].duplicated().to_numpy(), "request_id", "duplicate request_id")
    arrival = table["arrival_s"].to_numpy()
    nan = np.isnan(arrival)
    if nan.any() and not nan.all():
        check(nan, "arrival_s", "must be all NaN (closed loop) or all set, not mixed")
    back = np.zeros(arrival.size, dtype=bool)
    back[1:] = arrival[1:] < arrival[:-1]
    check(back, "arrival_s", "earlier than the previous row; rows must be in arrival order")
    if "prefix_tokens" in table:
        over = table["prefix_tokens"].to_numpy() >= table["prompt_tokens"].to_numpy()
        check(over, "prefix_tokens", "must be < prompt_tokens (one token is always prefilled)")


def read_csv_rows(path: Path, dtype: dict[str, type] | None = None) -> pd.DataFrame:
    """Read a CSV so that row i is file line i + 2 (blank lines kept, trailing ones cut).

    A row with too many fields becomes a TraceError naming the file.
    """
    if not path.is_file():
        raise TraceError(f"{path}: no such file")
    try:
        df = pd.read_csv(path, skip_blank_lines=False, dtype=dtype)  # type: ignore[arg-type]
    except (pd.errors.ParserError, UnicodeDecodeError) as exc:
        raise TraceError(f"{path}: cannot parse CSV: {exc}") from exc
    except pd.errors.EmptyDataError as exc:
        raise TraceError(f"{path}: file is empty (no header line)") from exc
    filled = np.flatnonzero(df.notna().any(axis=1).to_numpy())
    end = int(filled[-1]) + 1 if filled.size else 0
    return df.iloc[:end].reset_index(drop=True)


def read_request_table(path: str | os.PathLike[str]) -> pd.DataFrame:
    """Read a request table from ``.parquet``/``.pq`` or ``.csv`` and validate it."""
    p = Path(path)
    suffix = p.suffix.lower()
    if suffix in (".parquet", ".pq"):
        if not p.is_file():
            raise TraceError(f"{p}: no such file")
        import pyarrow.parquet as pq

        meta = pq.read_schema(p).metadata or {}
        version = int(meta.get(VERSION_KEY, REQUEST_TABLE_VERSION))
        if version > REQUEST_TABLE_VERSION:
            raise TraceError(
                f"{p}: request table version {version} is newer than "
                f"supported version {REQUEST_TABLE_VERSION}"
            )
        return validate_request_table(pd.read_parquet(p), str(p))
    if suffix == ".csv":
        return validate_request_table(read_csv_rows(p), str(p), first_line=2)
    raise TraceError(f"{p}: request tables are .parquet, .pq or .csv, not {suffix!r}")


def write_request_table(df: pd.DataFrame, path: str | os.PathLike[str]) -> Path:
    """Validate and write a request table atomically (temp file + rename); return the path."""
    p = Path(path)
    suffix = p.suffix.lower()
    if suffix not in (".parquet", ".pq", ".csv"):
        raise TraceError(f"{p}: request tables are .parquet, .pq or .csv, not {suffix!r}")
    table = validate_request_table(df, f"table written to {p}")

    def write(tmp: Path) -> None:
        if suffix == ".csv":
            table.to_csv(tmp, index=False)
            return
        import pyarrow as pa
        import pyarrow.parquet as pq

        arrow = pa.Table.from_pandas(table, preserve_index=False)
        meta = dict(arrow.schema.metadata or {})
        meta[VERSION_KEY] = str(REQUEST_TABLE_VERSION).encode()
        pq.write_table(arrow.replace_schema_metadata(meta), tmp)

    return atomic_write(p, write)
