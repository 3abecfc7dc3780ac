"""The profile table (data contract 2): one row per measured engine step.

The engine writes it, ``calibrate`` fits cost profiles from it. Parquet, with the run's
metadata (what was measured, on what) stored as JSON in the file's schema metadata; a CSV
with the same columns is read too (no metadata; errors name its line)::

    phase                  "prefill" | "decode" | "mixed"
    num_prefill_tokens     P: prompt tokens processed this step, padding included
    num_decode_seqs        D: rows decoding one token this step
    prefill_attn_work      A: sum over prefill chunks of n * (ctx + n / 2), tokens^2
    decode_context_tokens  C: sum over decode rows of tokens attended
    batch_size             requests in the step (prefill rows + decode rows)
    time_s                 measured wall time of the step, seconds (> 0)
    num_admitted           optional: requests whose first step this is (default 0)
    num_finished           optional: requests whose last token this step produces (default 0)

Metadata keys (all optional; ``servesim calibrate`` flags override them): ``device``,
``model``, ``dtype``, ``kv_dtype``, ``tp``, ``engine_version``, ``torch_version``,
``threads``, ``source``, ``notes``; the engine's profiler adds ``transformers_version``,
``device_name`` (raw GPU/CPU name), ``repeats`` and ``load`` (1/5/15-minute load averages
``before`` and ``after`` the run) and ``fingerprint`` (the machine: simulator/fingerprint.py).
Extra columns are kept (the profiler writes
``cpu_time_s``, ``median_time_s``, ``time_spread`` = (max - min) / median and ``time_cv`` =
std / mean over repeats, and ``repeats``; ``time_s`` is then the mean of the repeats).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from simulator.atomic import atomic_write
from simulator.errors import ConfigError
from simulator.shapes import StepShapes

PROFILE_TABLE_VERSION = 1
PHASES = ("prefill", "decode", "mixed")
COUNT_COLUMNS = ("num_prefill_tokens", "num_decode_seqs", "decode_context_tokens", "batch_size")
REQUIRED_COLUMNS = ("phase", *COUNT_COLUMNS[:2], "prefill_attn_work", *COUNT_COLUMNS[2:], "time_s")
OPTIONAL_COLUMNS = ("num_admitted", "num_finished")
METADATA_KEYS = ("device", "model", "dtype", "kv_dtype", "tp", "engine_version",
                 "torch_version", "threads", "source", "notes", "transformers_version",
                 "device_name", "repeats", "load", "fingerprint")
_META_KEY = b"servesim.profile_table"
FEW_TOKENS = 16  # a step of at most this many tokens (P + D) ...
FEW_TOKENS_MAX_S = 5.0  # ... that takes longer than this (median) was timed in ms, not s


@dataclass(slots=True)
class ProfileTable:
    """A validated profile table and the metadata of the run that measured it."""

    steps: pd.DataFrame  # REQUIRED_COLUMNS + OPTIONAL_COLUMNS, one row per step
    metadata: dict[str, Any] = field(default_factory=dict)  # METADATA_KEYS, run-wide

    def shapes(self) -> StepShapes:
        """The steps as :class:`StepShapes`, ready for a cost model's ``step_times``."""
        return StepShapes.from_table(self.steps)


def _bad(source: str, row: Any, col: str, value: Any, why: str) -> ConfigError:
    if isinstance(value, np.generic):
        value = value.item()  # show 7, not np.int64(7)
    where = row if isinstance(row, str) else f"row {row}"
    return ConfigError(f"{source}: {where}: {col}={value!r} {why}")


def _check_numeric(df: pd.DataFrame, source: str, col: str, integer: bool) -> None:
    values = pd.to_numeric(df[col], errors="coerce")
    bad = values.isna() | ~np.isfinite(values.astype(float)) | (values < 0)
    if integer:
        bad |= values.astype(float) % 1 != 0
    if bad.any():
        row = bad.idxmax()
        kind = "an integer >= 0" if integer else "a finite number >= 0"
        raise _bad(source, row, col, df.at[row, col], f"must be {kind}")


def validate_profile_table(df: pd.DataFrame, source: str = "profile table") -> pd.DataFrame:
    """Check a profile table; return a normalised copy (optional columns filled with 0).

    Errors name ``source``, the row (its index label), the column and the bad value.
    Extra columns are kept and ignored.
    """
    missing = [c for c in REQUIRED_COLUMNS if c not in df.columns]
    if missing:
        raise ConfigError(f"{source}: missing column(s) {missing}; required: "
                          f"{', '.join(REQUIRED_COLUMNS)}")
    if len(df) == 0:
        raise ConfigError(f"{source}: no rows")
    out = df.copy()
    for col in OPTIONAL_COLUMNS:
        if col not in out.columns:
            out[col] = 0
    phase_ok = out["phase"].isin(PHASES)
    if not phase_ok.all():
        row = (~phase_ok).idxmax()
        raise _bad(source, row, "phase", out.at[row, "phase"], f"must be one of {PHASES}")
    for col in (*COUNT_COLUMNS, *OPTIONAL_COLUMNS):
        _check_numeric(out, source, col, integer=True)
    _check_numeric(out, source, "prefill_attn_work", integer=False)
    _check_numeric(out, source, "time_s", integer=False)
    for col in (*COUNT_COLUMNS, *OPTIONAL_COLUMNS):
        out[col] = out[col].astype(np.int64)
    for col in ("prefill_attn_work", "time_s"):
        out[col] = out[col].astype(np.float64)
    _check_consistency(out, source)
    return out


def _check_consistency(df: pd.DataFrame, source: str) -> None:
    """Each row's phase agrees with its P and D; times and batch sizes are positive."""
    p, d = df["num_prefill_tokens"] > 0, df["num_decode_seqs"] > 0
    rules = [
        ("time_s", df["time_s"] <= 0, "must be > 0 (a measured step takes time)"),
        ("batch_size", df["batch_size"] < 1, "must be >= 1"),
        ("num_prefill_tokens", (df["phase"] == "prefill") & ~p, "must be > 0 in a prefill row"),
        ("num_decode_seqs", (df["phase"] == "prefill") & d, "must be 0 in a prefill row"),
        ("num_decode_seqs", (df["phase"] == "decode") & ~d, "must be > 0 in a decode row"),
        ("num_prefill_tokens", (df["phase"] == "decode") & p, "must be 0 in a decode row"),
        ("num_prefill_tokens", (df["phase"] == "mixed") & ~(p & d),
         "and num_decode_seqs must both be > 0 in a mixed row"),
        ("decode_context_tokens", df["decode_context_tokens"] < df["num_decode_seqs"],
         "must be >= num_decode_seqs (each decode row attends at least its new token)"),
    ]
    for col, bad, why in rules:
        if bad.any():
            row = bad.idxmax()
            raise _bad(source, row, col, df.at[row, col], why)


def validate_metadata(metadata: dict[str, Any], source: str) -> dict[str, Any]:
    """Check the run metadata's keys and ``tp``; return a copy."""
    unknown = [k for k in metadata if k not in METADATA_KEYS]
    if unknown:
        raise ConfigError(f"{source}: unknown metadata key(s) {unknown}; known: "
                          f"{', '.join(METADATA_KEYS)}")
    tp = metadata.get("tp")
    if tp is not None and (isinstance(tp, bool) or not isinstance(tp, int) or tp < 1):
        raise ConfigError(f"{source}: metadata tp={tp!r} must be an int >= 1")
    return dict(metadata)


def write_profile_table(table: ProfileTable, path: str | Path) -> None:
    """Validate and write ``table`` as Parquet atomically, metadata in the schema."""
    path = Path(path)
    steps = validate_profile_table(table.steps, str(path))
    meta = validate_metadata(table.metadata, str(path))
    arrow = pa.Table.from_pandas(steps, preserve_index=False)
    blob = json.dumps({"version": PROFILE_TABLE_VERSION, **meta}).encode()
    arrow = arrow.replace_schema_metadata({**(arrow.schema.metadata or {}), _META_KEY: blob})
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(path, lambda p: pq.write_table(arrow, p))


def read_profile_table(path: str | Path) -> ProfileTable:
    """Read and validate a profile table written by :func:`write_profile_table` (or by hand).

    A Parquet file without servesim metadata is accepted with empty metadata.
    """
    path = Path(path)
    if path.suffix.lower() == ".csv":
        return ProfileTable(steps=_read_csv(path))
    try:
        arrow = pq.read_table(path)
    except (OSError, pa.ArrowException) as e:
        raise ConfigError(f"{path}: cannot read profile table ({e})") from e
    raw = (arrow.schema.metadata or {}).get(_META_KEY)
    meta: dict[str, Any] = json.loads(raw) if raw else {"version": PROFILE_TABLE_VERSION}
    version = meta.pop("version", None)
    if version != PROFILE_TABLE_VERSION:
        raise ConfigError(f"{path}: profile table version={version!r}, this servesim reads "
                          f"{PROFILE_TABLE_VERSION}")
    steps = validate_profile_table(arrow.to_pandas(), str(path))
    return ProfileTable(steps=steps, metadata=validate_metadata(meta, str(path)))


def _read_csv(path: Path) -> pd.DataFrame:
    """A profile table as CSV; rows are labelled by file line (header = line 1)."""
    try:
        df = pd.read_csv(path)
    except (OSError, UnicodeDecodeError, pd.errors.ParserError, pd.errors.EmptyDataError) as e:
        raise ConfigError(f"{path}: cannot read profile table ({e})") from e
    df.index = [f"line {i + 2}" for i in range(len(df))]
    return validate_profile_table(df, str(path)).reset_index(drop=True)


def millisecond_warning(steps: pd.DataFrame, source: str) -> str | None:
    """A message when ``time_s`` looks like milliseconds, else None.

    Contract 2 step times are seconds. A step of at most ``FEW_TOKENS`` tokens (prefill
    tokens + decode rows) whose median time is over ``FEW_TOKENS_MAX_S`` seconds is a step
    of a few milliseconds written as a number of milliseconds: no serving engine takes
    seconds for a handful of tokens.
    """
    few = (steps["num_prefill_tokens"] + steps["num_decode_seqs"]) <= FEW_TOKENS
    if not few.any():
        return None
    median_s = float(steps.loc[few, "time_s"].median())
    if median_s <= FEW_TOKENS_MAX_S:
        return None
    return (f"{source}: time_s looks like milliseconds: the median step of <= {FEW_TOKENS} "
            f"tokens takes {median_s:g} s ({int(few.sum())} such rows); the profile table "
            f"(contract 2) holds seconds: divide time_s by 1000")
