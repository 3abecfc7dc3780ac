"""Public trace formats -> request table: one loader per format and ``load_trace``.

=============  ==========================================  ==============================
format         file                                        arrivals
=============  ==========================================  ==============================
azure          CSV ``TIMESTAMP,ContextTokens,...``         TIMESTAMP - first TIMESTAMP
burstgpt       CSV ``Timestamp,...,Request tokens,...``    Timestamp (s) - first
mooncake       JSONL ``timestamp,input_length,...``        timestamp (ms) / 1000 - first
vllm_bench     JSON ``bench serve`` result, ``input_lens``  none (NaN): synthesise
lengths_csv    CSV ``num_prefill_tokens,num_decode_...``   none (NaN), or ``arrived_at``
generic        CSV/Parquet in contract columns             ``arrival_s`` as written
=============  ==========================================  ==============================

Every trace loader except ``generic`` sorts rows by arrival (stable), numbers them
``request_id`` 0..n-1 and shifts arrivals so the earliest is 0. Zero-token rows are
dropped and counted by reason (see ``traces_common``). A file that cannot be read at all
(damaged Parquet or gzip, no permission) is a TraceError naming it.
"""

from __future__ import annotations

import json
import os
import zlib
from collections.abc import Callable
from pathlib import Path

import pandas as pd
import pyarrow as pa

from simulator.errors import TraceError
from simulator.workload.table import REQUIRED_COLUMNS
from simulator.workload.traces_common import LoadedTrace
from simulator.workload.traces_csv import load_azure, load_burstgpt, load_generic, load_lengths_csv
from simulator.workload.traces_json import load_mooncake, load_vllm_bench

__all__ = [
    "LENGTHS_ONLY",
    "TRACE_FORMATS",
    "LoadedTrace",
    "detect_format",
    "load_azure",
    "load_burstgpt",
    "load_generic",
    "load_lengths_csv",
    "load_mooncake",
    "load_trace",
    "load_vllm_bench",
]

_LOADERS: dict[str, Callable[[str | os.PathLike[str]], LoadedTrace]] = {
    "azure": load_azure,
    "burstgpt": load_burstgpt,
    "mooncake": load_mooncake,
    "vllm_bench": load_vllm_bench,
    "lengths_csv": load_lengths_csv,
    "generic": load_generic,
}
TRACE_FORMATS: tuple[str, ...] = tuple(_LOADERS)
LENGTHS_ONLY = ("vllm_bench", "lengths_csv")  # layouts without arrival times
# CSV header columns that identify a format, checked in this order
_CSV_HEADERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("azure", ("TIMESTAMP", "ContextTokens", "GeneratedTokens")),
    ("burstgpt", ("Timestamp", "Request tokens", "Response tokens")),
    ("lengths_csv", ("num_prefill_tokens", "num_decode_tokens")),
    ("generic", REQUIRED_COLUMNS),
)
_COMPRESSED = (".gz", ".bz2", ".xz", ".zst", ".zip")


def _unknown(path: Path, why: str) -> TraceError:
    return TraceError(
        f"{path}: cannot tell the trace format ({why}); known formats: "
        f"{list(TRACE_FORMATS)}; name one with fmt= / workload.trace_format"
    )


def detect_format(path: str | os.PathLike[str]) -> str:
    """Guess a trace's format from its extension and its CSV header or JSON keys."""
    p = Path(path)
    if not p.is_file():
        raise TraceError(f"{p}: no such file")
    suffixes = [s.lower() for s in p.suffixes]
    if suffixes and suffixes[-1] in _COMPRESSED:
        if suffixes[-2:-1] != [".csv"]:
            raise _unknown(p, "only CSV traces may be compressed")
        suffixes.pop()  # pandas reads compressed CSV transparently
    ext = suffixes[-1] if suffixes else ""
    if ext in (".parquet", ".pq"):
        return "generic"
    if ext == ".jsonl":
        return "mooncake"
    if ext == ".json":
        return _detect_json(p)
    if ext == ".csv":
        try:
            header = set(pd.read_csv(p, nrows=0).columns)
        except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError) as exc:
            raise _unknown(p, f"unreadable CSV header: {exc}") from exc
        for fmt, needed in _CSV_HEADERS:
            if set(needed) <= header:
                return fmt
        raise _unknown(p, f"CSV header {sorted(header)} matches none")
    raise _unknown(p, f"extension {ext or '(none)'!r} is not .csv, .json, .jsonl or .parquet")


def _detect_json(path: Path) -> str:
    """A ``.json`` file is a vLLM bench result, or JSON lines in Mooncake's layout."""
    with path.open(encoding="utf-8-sig", errors="replace") as f:
        first = f.readline()
    try:
        obj = json.loads(first)
    except json.JSONDecodeError:
        return "vllm_bench"  # a pretty-printed object spans lines; its loader checks it
    if isinstance(obj, dict) and "input_length" in obj:
        return "mooncake"
    if isinstance(obj, dict) and "input_lens" in obj:
        return "vllm_bench"
    raise _unknown(path, "JSON with neither input_lens nor input_length")


def load_trace(path: str | os.PathLike[str], fmt: str = "auto") -> LoadedTrace:
    """Load any supported trace; ``fmt="auto"`` detects it (see :func:`detect_format`)."""
    if fmt != "auto" and fmt not in _LOADERS:
        raise TraceError(
            f"{path}: trace format {fmt!r} is unknown; known formats: "
            f"{list(TRACE_FORMATS)} (or 'auto')"
        )
    try:
        name = detect_format(path) if fmt == "auto" else fmt
        return _LOADERS[name](path)
    except (OSError, EOFError, zlib.error, pa.ArrowException) as exc:  # damaged or unreadable
        raise TraceError(f"{path}: cannot read the trace ({type(exc).__name__}: {exc})") from exc
