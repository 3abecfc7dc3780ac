"""A vLLM ``bench serve`` result JSON (``--save-result --save-detailed``) as a run.

Read by the one reader of that format (``load_vllm_bench_result`` and ``bench_latencies``
in simulator/workload/traces_json.py): lengths, ``ttfts`` and ``itls`` per request; E2E =
TTFT + the sum of its ITLs. Failed requests are dropped by that reader (counted in the
notes). The file has no send times, so the arrivals are what the benchmark asked for: a
burst at t = 0 when ``request_rate`` is inf and ``max_concurrency`` unset; a closed loop of
``max_concurrency`` clients when set (arrivals NaN, ``closed_clients`` set; the clients
start together, ``workload.client_start = "together"``, as vLLM sends); else, at a finite
``request_rate``, the client's own send times where they can be rebuilt: vLLM draws each
gap with numpy's global generator seeded with ``--seed`` (default 0;
simulator/workload/arrivals.py ``vllm_bench_sends``), and the file shows whether that is
what ran: sent at those times, every request ends by the recorded ``duration``, the last
within ``SEND_SLACK`` of it (a run of another seed, or whose dataset drew from numpy
first, misses by seconds). The file does not record the seed: a run at another one is
read with it given (``servesim validate --bench-seed``, ``calibrate --bench-seed``); the
loader does not guess among seeds, as a short run can fit a wrong one by luck. Otherwise
arrivals are drawn at ``request_rate`` (Poisson, or gamma with CV 1/sqrt(burstiness)),
seed ``BENCH_SEED``, and capped at ``max_concurrency``
in flight when set (``MeasuredRun.max_concurrency``, replayed as
``workload.max_concurrency``: vLLM holds each request behind a semaphore of that size,
vllm/benchmarks/serve.py ``limited_request_func``).
With a burst or rebuilt send times ``arrivals_known`` is True (request by request);
otherwise compare distributions, and take duration and throughputs from the file's own
figures (null where it lacks them).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from simulator.errors import ConfigError, TraceError
from simulator.measured.run import CLIENT_CANNOT_SEE, RUN_FIGURES, MeasuredRun, plain_number
from simulator.workload.arrivals import gamma_arrivals, vllm_bench_sends
from simulator.workload.traces_json import (
    BENCH_NO_ARRIVALS,
    bench_latencies,
    load_vllm_bench_result,
)

BENCH_SEED = 0  # vLLM bench's default --seed; also the seed of arrivals drawn like them
# How much earlier than the recorded duration the last request may end when sent at the
# rebuilt times (s, or that share of the duration if more): the client's own work between
# sends and after the last response (0.12-0.15 s on benchmarks/published_runs/)
SEND_SLACK = (0.5, 0.01)
ROUNDING_S = 0.01  # how far past the duration rounded latencies may put the last end


def is_vllm_bench(data: Any) -> bool:
    """Whether a parsed JSON document looks like a vLLM bench result."""
    return isinstance(data, dict) and "input_lens" in data


def read_vllm_bench(path: Path, seed: int = BENCH_SEED) -> MeasuredRun:
    """The result file as one run (module docstring); ``seed``: the client's ``--seed``,
    which the file does not record (vLLM's default 0 unless the caller knows better)."""
    try:
        trace, data, rows = load_vllm_bench_result(path)
        ttft, gaps = bench_latencies(data, rows, path)
    except TraceError as e:
        raise ConfigError(str(e)) from e
    t = trace.table
    n = len(t)
    e2e = ttft + np.fromiter((g.sum() for g in gaps), np.float64, n)
    try:
        arrival, clients, per_request, how = bench_arrivals(n, data, rows, e2e, seed)
    except ConfigError as e:
        raise ConfigError(f"{path}: {e}") from e
    cap = bench_cap(data) if clients is None and not per_request else None
    table = pd.DataFrame({
        "request_id": np.arange(n), "arrival_s": arrival,
        "prompt_tokens": t["prompt_tokens"].to_numpy(), "output_tokens":
        t["output_tokens"].to_numpy(), "ttft_s": ttft, "e2e_s": e2e,
        "status": "finished", "reason": ""})
    dropped = sum(trace.dropped.values())
    notes = [*(n for n in trace.notes if not per_request or n != BENCH_NO_ARRIVALS), how]
    if dropped:
        notes.append(f"{dropped} request(s) left out (failed or without tokens): "
                     f"{trace.dropped}")
    figures = {k: v for k in RUN_FIGURES if (v := plain_number(data.get(k))) is not None
               and v > 0}
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
    rate = plain_number(data.get("request_rate"))
    return rate if rate is not None and rate > 0 else None


def bench_cap(data: dict[str, Any]) -> int | None:
    """The file's ``max_concurrency`` when a whole number >= 1, else None."""
    conc = data.get("max_concurrency")
    ok = isinstance(conc, int) and not isinstance(conc, bool) and conc >= 1
    return conc if ok else None


def bench_arrivals(n: int, data: dict[str, Any], rows: np.ndarray | None = None,
                   e2e: np.ndarray | None = None, seed: int = BENCH_SEED
                   ) -> tuple[np.ndarray, int | None, bool, str]:
    """(arrival times, closed-loop clients or None, whether the times are the real send
    times (a burst, or the client's rebuilt from its ``--seed`` ``seed``:
    :func:`client_sends`, given the kept requests' positions ``rows`` and latencies
    ``e2e``), what was assumed, in words)."""
    raw = data.get("request_rate")
    infinite = raw in (None, "inf", "Infinity") or raw == math.inf
    rate = math.inf if infinite else plain_number(raw)
    conc = bench_cap(data)
    if rate is None or not rate > 0:
        raise ConfigError(f"request_rate = {raw!r}: expected a number > 0 or inf")
    if conc is not None and rate == math.inf:
        return np.full(n, np.nan), conc, False, (
            f"replayed as a closed loop of {conc} clients (max_concurrency) starting "
            "together at t = 0 (workload.client_start 'together': vLLM launches every "
            "request at once behind the semaphore); "
            "fitted on distributions, not request by request")
    if rate == math.inf:
        return np.zeros(n), None, True, "replayed as a burst at t = 0 (request_rate inf)"
    raw = data.get("burstiness")
    burstiness = 1.0 if raw is None else plain_number(raw)
    if burstiness is None or not burstiness > 0:
        raise ConfigError(f"burstiness = {raw!r}: expected a number > 0")
    refuted = ""
    if conc is None and rows is not None and e2e is not None:
        sends, why = client_sends(data, float(rate), burstiness, rows, e2e, seed)
        if sends is not None:
            return sends, None, True, why
        refuted = f"; {why}" if why else ""
    cv = 1.0 / math.sqrt(burstiness)
    times = gamma_arrivals(float(rate), cv, n, np.random.default_rng(BENCH_SEED))
    note = (f"no send times: arrivals drawn at request_rate {rate:g}/s (CV {cv:.2f}, seed "
            f"{BENCH_SEED}); fitted on distributions, not request by request{refuted}")
    if conc is not None:
        note += (f"; at most max_concurrency = {conc} in flight (a request due while "
                 f"{conc} are outstanding is sent when one ends: workload.max_concurrency)")
    return times, None, False, note


def client_sends(data: dict[str, Any], rate: float, burstiness: float, rows: np.ndarray,
                 e2e: np.ndarray, seed: int = BENCH_SEED) -> tuple[np.ndarray | None, str]:
    """The send times of the file's kept requests (positions ``rows``, latencies ``e2e``)
    as vLLM's client drew them at ``rate`` with its ``--seed`` ``seed``, and a note; (None,
    why) when the file's duration says otherwise (module docstring) or cannot say."""
    duration = plain_number(data.get("duration"))
    if duration is None or len(e2e) == 0:
        return None, ""
    sends = vllm_bench_sends(rate, len(data["input_lens"]), burstiness, seed)[rows]
    slack = float(duration - (sends + e2e).max())
    if -ROUNDING_S <= slack <= max(SEND_SLACK[0], SEND_SLACK[1] * duration):
        return sends, (f"send times: the client's own, rebuilt (vLLM bench draws each gap "
                       f"with numpy's gamma from seed {seed}, burstiness "
                       f"{burstiness:g}); sent so, the last request ends {slack:.2f} s "
                       f"before the recorded duration; compared request by request")
    return None, (f"the client's seed-{seed} send times do not fit this file (sent "
                  f"so, the last request would end {-slack:+.2f} s from the recorded "
                  f"duration: another --seed, given as --bench-seed, or a dataset that "
                  f"drew from numpy first)")
