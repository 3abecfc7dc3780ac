"""A vLLM ``bench serve`` result JSON (``--save-result --save-detailed``) as a run.

Read by the one reader of that format (``load_vllm_bench_result`` and ``bench_latencies``
in simulator/workload/traces_json.py): lengths, ``ttfts`` and ``itls`` per request; E2E =
TTFT + the sum of its ITLs. Failed requests are dropped by that reader (counted in the
notes). The file has no send times, so the arrivals are what the benchmark asked for: a
burst at t = 0 when ``request_rate`` is inf and ``max_concurrency`` unset; a closed loop of
``max_concurrency`` clients when set (arrivals NaN, ``closed_clients`` set; the clients
start together, ``workload.client_start = "together"``, as vLLM sends); else drawn at
``request_rate`` (Poisson, or gamma with CV 1/sqrt(burstiness)), seed ``BENCH_SEED``, and
capped at ``max_concurrency`` in flight when set (``MeasuredRun.max_concurrency``, replayed
as ``workload.max_concurrency``: vLLM holds each request behind a semaphore of that size,
vllm/benchmarks/serve.py ``limited_request_func``).
Unless a burst, ``arrivals_known`` is False: compare distributions, not request by request,
and take duration and throughputs from the file's own figures (null where it lacks them).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from simulator.errors import ConfigError, TraceError
from simulator.measured.run import CLIENT_CANNOT_SEE, RUN_FIGURES, MeasuredRun
from simulator.workload.arrivals import gamma_arrivals
from simulator.workload.traces_json import bench_latencies, load_vllm_bench_result

BENCH_SEED = 0  # arrivals drawn for a vLLM bench result at a finite request_rate


def is_vllm_bench(data: Any) -> bool:
    """Whether a parsed JSON document looks like a vLLM bench result."""
    return isinstance(data, dict) and "input_lens" in data


def read_vllm_bench(path: Path) -> MeasuredRun:
    """The result file as one run (module docstring)."""
    try:
        trace, data, rows = load_vllm_bench_result(path)
        ttft, gaps = bench_latencies(data, rows, path)
    except TraceError as e:
        raise ConfigError(str(e)) from e
    t = trace.table
    n = len(t)
    arrival, clients, per_request, how = bench_arrivals(n, data)
    cap = bench_cap(data) if clients is None and not per_request else None
    table = pd.DataFrame({
        "request_id": np.arange(n), "arrival_s": arrival,
        "prompt_tokens": t["prompt_tokens"].to_numpy(), "output_tokens":
        t["output_tokens"].to_numpy(), "ttft_s": ttft,
        "e2e_s": ttft + np.fromiter((g.sum() for g in gaps), np.float64, n),
        "status": "finished", "reason": ""})
    dropped = sum(trace.dropped.values())
    notes = [*trace.notes, how]
    if dropped:
        notes.append(f"{dropped} request(s) left out (failed or without tokens): "
                     f"{trace.dropped}")
    figures = {k: float(data[k]) for k in RUN_FIGURES if isinstance(data.get(k), int | float)
               and not isinstance(data.get(k), bool) and math.isfinite(data[k]) and data[k] > 0}
    lacking = [k for k in RUN_FIGURES if k not in figures]
    if lacking and not per_request:
        notes.append(f"no send times and the file lacks {lacking}: not compared")
    return MeasuredRun(str(path), "vllm_bench", table, dict(enumerate(gaps)), figures=figures,
                       arrivals_known=per_request, closed_clients=clients,
                       max_concurrency=cap,
                       offered_rate=_finite_rate(data), assumed_arrivals=how,
                       missing=([] if per_request else [
                           "per-request comparison: no send times (arrivals assumed; "
                           "distributions only)"]) + list(CLIENT_CANNOT_SEE),
                       notes=notes)


def _finite_rate(data: dict[str, Any]) -> float | None:
    """The file's ``request_rate`` when a finite number > 0, else None."""
    rate = data.get("request_rate")
    if isinstance(rate, bool) or not isinstance(rate, int | float):
        return None
    return float(rate) if math.isfinite(rate) and rate > 0 else None


def bench_cap(data: dict[str, Any]) -> int | None:
    """The file's ``max_concurrency`` when a whole number >= 1, else None."""
    conc = data.get("max_concurrency")
    ok = isinstance(conc, int) and not isinstance(conc, bool) and conc >= 1
    return conc if ok else None


def bench_arrivals(n: int, data: dict[str, Any]
                   ) -> tuple[np.ndarray, int | None, bool, str]:
    """(arrival times, closed-loop clients or None, whether the times are the real send
    times (a burst), what was assumed, in words)."""
    rate = data.get("request_rate")
    rate = math.inf if rate in (None, "inf", "Infinity") else rate
    conc = bench_cap(data)
    if not isinstance(rate, int | float) or isinstance(rate, bool) or not rate > 0:
        raise ConfigError(f"request_rate = {rate!r}: expected a number > 0 or inf")
    if conc is not None and rate == math.inf:
        return np.full(n, np.nan), conc, False, (
            f"replayed as a closed loop of {conc} clients (max_concurrency) starting "
            "together at t = 0 (workload.client_start 'together': vLLM launches every "
            "request at once behind the semaphore); "
            "fitted on distributions, not request by request")
    if rate == math.inf:
        return np.zeros(n), None, True, "replayed as a burst at t = 0 (request_rate inf)"
    cv = 1.0 / math.sqrt(float(data.get("burstiness") or 1.0))
    times = gamma_arrivals(float(rate), cv, n, np.random.default_rng(BENCH_SEED))
    note = (f"no send times: arrivals drawn at request_rate {rate:g}/s (CV {cv:.2f}, seed "
            f"{BENCH_SEED}); fitted on distributions, not request by request")
    if conc is not None:
        note += (f"; at most max_concurrency = {conc} in flight (a request due while "
                 f"{conc} are outstanding is sent when one ends: workload.max_concurrency)")
    return times, None, False, note
