"""``load_measured``: one loader for every measured run servesim reads, sniffing the format.

===========  ==============================================  =========================
format       what                                            per-token times
===========  ==============================================  =========================
servesim     results folder (summary.json, requests.parquet)  tokens.parquet, if present
guidellm     GuideLLM ``benchmarks.json``                     none (mean ITL only)
aiperf       AIPerf ``profile_export.jsonl`` (records)        per-chunk latencies
vllm_bench   vLLM ``bench serve`` result JSON (detailed)      ``itls``
===========  ==============================================  =========================

The format is read from the content, not the name: a folder is a servesim folder; a JSON
object with ``benchmarks`` and ``metadata.guidellm_version`` is GuideLLM; one with
``input_lens`` is vLLM bench; JSON lines with ``metadata.request_start_ns`` are AIPerf.
Anything else is a ConfigError naming the formats.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from simulator.errors import ConfigError
from simulator.measured.aiperf import is_aiperf_record, is_aiperf_summary, read_aiperf
from simulator.measured.guidellm import is_guidellm, read_guidellm
from simulator.measured.run import MeasuredRun
from simulator.measured.servesim_folder import is_servesim_folder, read_servesim_folder
from simulator.measured.vllm_bench import BENCH_SEED, is_vllm_bench, read_vllm_bench

FORMATS = ("servesim", "guidellm", "aiperf", "vllm_bench")
KNOWN = ("a servesim results folder, GuideLLM's benchmarks.json, AIPerf's "
         "profile_export.jsonl or a vLLM bench result JSON (--save-detailed)")


def load_measured_runs(path: str | os.PathLike[str], bench_seed: int = BENCH_SEED
                       ) -> list[MeasuredRun]:
    """Every run in ``path`` (a folder may hold several points, GuideLLM several
    benchmarks); ``bench_seed``: a vLLM bench file's client ``--seed`` (default 0, the
    tool's), from which its send times are rebuilt."""
    p = Path(path)
    if p.is_dir():
        if not is_servesim_folder(p):
            raise ConfigError(f"{p}: a folder without summary.json and requests.parquet; "
                              f"expected {KNOWN}")
        return read_servesim_folder(p)
    if not p.is_file():
        raise ConfigError(f"{p}: no such file or folder (expected {KNOWN})")
    try:
        text = p.read_text(encoding="utf-8-sig")
    except (OSError, UnicodeDecodeError) as e:
        raise ConfigError(f"{p}: cannot read it as text ({e})") from e
    try:
        data = json.loads(text)
    except json.JSONDecodeError:
        return [_json_lines(p, text)]
    if is_guidellm(data):
        return read_guidellm(data, p)
    if is_vllm_bench(data):
        return [read_vllm_bench(p, bench_seed)]
    if is_aiperf_record(data):
        return [read_aiperf(p, text)]  # a records file of one line
    if is_aiperf_summary(data):
        raise ConfigError(f"{p}: AIPerf's run summary has no per-request values; pass the "
                          "records file beside it (profile_export.jsonl, written with "
                          "--export-level records)")
    raise ConfigError(f"{p}: not a measured run servesim knows; expected {KNOWN}")


def load_measured(path: str | os.PathLike[str], bench_seed: int = BENCH_SEED) -> MeasuredRun:
    """The one run in ``path``; a ConfigError when it holds several."""
    runs = load_measured_runs(path, bench_seed)
    if len(runs) != 1:
        raise ConfigError(f"{path}: holds {len(runs)} runs ({', '.join(r.source for r in runs)})"
                          "; use load_measured_runs")
    return runs[0]


def _json_lines(p: Path, text: str) -> MeasuredRun:
    first = next((ln for ln in text.splitlines() if ln.strip()), "")
    try:
        head = json.loads(first)
    except json.JSONDecodeError as e:
        raise ConfigError(f"{p} line 1: not JSON ({e.msg}); expected {KNOWN}") from e
    if not is_aiperf_record(head):
        raise ConfigError(f"{p}: JSON lines, but not AIPerf records (no "
                          f"metadata.request_start_ns); expected {KNOWN}")
    return read_aiperf(p, text)
