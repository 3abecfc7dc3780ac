"""NVIDIA AIPerf ``profile_export.jsonl`` (0.13, ``--export-level records``): one JSON
object per request, ``metadata`` and ``metrics`` (each metric ``{"value", "unit"}``).

Read as:

- arrival = metadata.request_start_ns - the first profiling request's (ns -> s);
- TTFT = metrics.time_to_first_token; E2E = metrics.request_latency (to the last response
  chunk; ``request_end_ns`` is when the stream closed, ~10 ms later here);
- per-chunk gaps = metrics.inter_chunk_latency (one per chunk after the first);
- lengths: the server's usage (``usage_prompt_tokens``, ``usage_completion_tokens``) when
  given, else AIPerf's own count (``input_sequence_length``, ``output_sequence_length``);
- a record with an ``error``, or ``was_cancelled``, is failed (the error's message is the
  reason); records of the warm-up phase (``benchmark_phase`` other than ``profiling``) are
  left out and counted in the notes.

AIPerf's summary (``profile_export_aiperf.json``) holds no per-request values and is
refused with a pointer to the records file.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from simulator.errors import ConfigError
from simulator.measured.run import (
    CLIENT_CANNOT_SEE,
    MeasuredRun,
    frame,
    json_object,
    number,
    replayable,
)

TO_S = {"ns": 1e-9, "us": 1e-6, "ms": 1e-3, "s": 1.0, "sec": 1.0}


def is_aiperf_record(data: Any) -> bool:
    """Whether one parsed JSONL line is an AIPerf per-request record."""
    return isinstance(data, dict) and isinstance(data.get("metadata"), dict) and \
        "request_start_ns" in data["metadata"]


def is_aiperf_summary(data: Any) -> bool:
    """Whether a parsed JSON document is AIPerf's run summary."""
    return isinstance(data, dict) and "aiperf_version" in data


def read_aiperf(path: Path, text: str) -> MeasuredRun:
    """The records file as one run."""
    records, warm, lengths_from = [], 0, set()
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            rec = json.loads(line)
        except json.JSONDecodeError as e:
            raise ConfigError(f"{path} line {n}: not valid JSON ({e.msg})") from e
        if not is_aiperf_record(rec):
            raise ConfigError(f"{path} line {n}: not an AIPerf record (no "
                              "metadata.request_start_ns)")
        if rec["metadata"].get("benchmark_phase", "profiling") != "profiling":
            warm += 1
            continue
        start = rec["metadata"]["request_start_ns"]
        if isinstance(start, bool) or not isinstance(start, int) or start < 0:
            raise ConfigError(f"{path} line {n}: metadata.request_start_ns = {start!r}: "
                              "expected a whole number of ns")
        records.append((n, start, rec))
    origin = min((s for _, s, _ in records), default=0)  # ns, exact: floats lose them
    rows = []
    for n, start, rec in records:
        row, source = _row(rec, f"{path} line {n}", (start - origin) * 1e-9)
        rows.append(row)
        lengths_from.add(source)
    if not rows:
        raise ConfigError(f"{path}: no profiling records ({warm} warm-up)")
    table, gaps = frame(rows)
    notes = [f"AIPerf records: {len(rows)} profiling requests; {warm} warm-up request(s) "
             "left out", "lengths from " + " and ".join(sorted(lengths_from))]
    missing = list(CLIENT_CANNOT_SEE)
    if not gaps:
        missing.insert(0, "ITL distribution: no per-chunk latencies (not streamed)")
    if table["ttft_s"].isna().all():
        missing.insert(0, "TTFT and TPOT: no first-token time (not streamed)")
    return MeasuredRun(str(path), "aiperf", table, gaps or None, missing=missing, notes=notes)


def _metric(metrics: dict[str, Any], key: str, where: str, *, seconds: bool) -> float:
    """A metric's value (in s when ``seconds``), NaN when absent."""
    m = metrics.get(key)
    if m is None:
        return math.nan
    if not isinstance(m, dict):
        raise ConfigError(f"{where}: metrics.{key} = {m!r}: expected {{value, unit}}")
    value = number(m.get("value"), f"{where}: metrics.{key}.value")
    return value * _scale(m, key, where) if seconds else value


def _scale(m: dict[str, Any], key: str, where: str) -> float:
    unit = m.get("unit", "ms")
    if unit not in TO_S:
        raise ConfigError(f"{where}: metrics.{key}.unit = {unit!r}: expected one of "
                          f"{sorted(TO_S)}")
    return TO_S[unit]


def _row(rec: dict[str, Any], where: str, start: float) -> tuple[dict[str, Any], str]:
    meta, metrics = rec["metadata"], json_object(rec.get("metrics"), f"{where}: metrics")
    prompt = _metric(metrics, "usage_prompt_tokens", where, seconds=False)
    out = _metric(metrics, "usage_completion_tokens", where, seconds=False)
    source = "the server's usage"
    if math.isnan(prompt) or math.isnan(out):
        prompt = _metric(metrics, "input_sequence_length", where, seconds=False)
        out = _metric(metrics, "output_sequence_length", where, seconds=False)
        source = "AIPerf's token count"
    error = rec.get("error")
    failed = bool(error) or bool(meta.get("was_cancelled"))
    row: dict[str, Any] = {
        "arrival_s": start, "prompt_tokens": 0 if math.isnan(prompt) else int(prompt),
        "output_tokens": 0 if math.isnan(out) else int(out), "ttft_s": math.nan,
        "e2e_s": math.nan, "status": "failed" if failed else "finished", "reason": "",
        "gaps": None}
    if failed:
        row["reason"] = (error.get("message") or error.get("type") or str(error)) if \
            isinstance(error, dict) else str(error or "cancelled")
        return row, source
    row["ttft_s"] = _metric(metrics, "time_to_first_token", where, seconds=True)
    row["e2e_s"] = _metric(metrics, "request_latency", where, seconds=True)
    chunks = metrics.get("inter_chunk_latency")
    if isinstance(chunks, dict) and isinstance(chunks.get("value"), list):
        scale = _scale(chunks, "inter_chunk_latency", where)
        row["gaps"] = [number(g, f"{where}: metrics.inter_chunk_latency.value[{k}]") * scale
                       for k, g in enumerate(chunks["value"])]
    return replayable(row, where), source
