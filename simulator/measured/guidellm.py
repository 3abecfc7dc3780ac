"""GuideLLM ``benchmarks.json`` (0.8.x): one run per entry of ``benchmarks``.

Per request (``benchmarks[i].requests.successful | errored | incomplete``) GuideLLM keeps
``request_start_time`` (epoch s), ``time_to_first_token_ms``, ``inter_token_latency_ms``
(mean), ``prompt_tokens``, ``output_tokens``, ``info.error`` and ``info.timings``
(``last_token_iteration``: when the last token arrived). Read as:

- arrival = request_start_time - the run's first request_start_time;
- TTFT = time_to_first_token_ms / 1000;
- E2E = timings.last_token_iteration - request_start_time (the last token, as servesim's
  records define it; GuideLLM's own ``request_latency`` runs to the end of the stream, ~20
  ms later here), else TTFT + mean ITL x (output_tokens - 1);
- ``errored`` and ``incomplete`` requests are failed, with GuideLLM's error as the reason.

GuideLLM keeps no per-token times: the ITL distribution is missing (TPOT, its per-request
mean, is not).
"""

from __future__ import annotations

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

LISTS = {"successful": "finished", "errored": "failed", "incomplete": "failed"}
MISSING = ("ITL distribution: no per-token times (GuideLLM keeps a mean ITL per request)",
           *CLIENT_CANNOT_SEE)


def is_guidellm(data: Any) -> bool:
    """Whether a parsed JSON document is a GuideLLM benchmarks report."""
    return isinstance(data, dict) and isinstance(data.get("benchmarks"), list) and \
        "guidellm_version" in (data.get("metadata") or {})


def read_guidellm(data: dict[str, Any], path: Path) -> list[MeasuredRun]:
    """Each benchmark of the report as a run."""
    runs = []
    many = len(data["benchmarks"]) > 1
    for i, bench in enumerate(data["benchmarks"]):
        where = f"{path}: benchmarks[{i}]"
        reqs = bench.get("requests") if isinstance(bench, dict) else None
        if not isinstance(reqs, dict):
            raise ConfigError(f"{where}.requests is missing (GuideLLM writes per-request "
                              "statistics in benchmarks.json)")
        rows = [_row(r, f"{where}.requests.{key}[{j}]", status)
                for key, status in LISTS.items()
                for j, r in enumerate(reqs.get(key) or [])]
        table, _ = frame(rows)
        notes = [f"GuideLLM {data['metadata'].get('guidellm_version', '?')}, "
                 f"{len(rows)} requests"]
        warm = bench.get("warmup_duration") or 0
        if warm:
            notes.append(f"GuideLLM warm-up of {warm} s: its requests are not in the file")
        runs.append(MeasuredRun(f"{path} run {i}" if many else str(path), "guidellm", table,
                                None, missing=list(MISSING), notes=notes))
    if not runs:
        raise ConfigError(f"{path}: benchmarks is empty: no run to read")
    return runs


def _row(r: Any, where: str, status: str) -> dict[str, Any]:
    if not isinstance(r, dict):
        raise ConfigError(f"{where}: expected an object, got {type(r).__name__}")
    info = json_object(r.get("info"), f"{where}.info")
    timings = json_object(info.get("timings"), f"{where}.info.timings")
    start = r.get("request_start_time", timings.get("request_start"))
    start = number(start, f"{where}.request_start_time")
    prompt = number(r.get("prompt_tokens"), f"{where}.prompt_tokens", allow_none=True)
    out = number(r.get("output_tokens"), f"{where}.output_tokens", allow_none=True)
    ttft = e2e = math.nan
    reason = ""
    if status == "finished":
        ttft = number(r.get("time_to_first_token_ms"), f"{where}.time_to_first_token_ms",
                      allow_none=True) / 1000.0
        last = timings.get("last_token_iteration")
        if last is not None:
            e2e = number(last, f"{where}.info.timings.last_token_iteration") - start
        else:
            itl = number(r.get("inter_token_latency_ms"), f"{where}.inter_token_latency_ms",
                         allow_none=True)
            e2e = ttft + (0.0 if out <= 1 else itl / 1000.0 * (out - 1))
    else:
        reason = str(info.get("error") or ("incomplete" if "incomplete" in where else "error"))
    return replayable({"arrival_s": start, "prompt_tokens": 0 if math.isnan(prompt) else
                       int(prompt), "output_tokens": 0 if math.isnan(out) else int(out),
                       "ttft_s": ttft, "e2e_s": e2e, "status": status, "reason": reason},
                      where)
