"""Measured serving runs as fitting targets: what ``servesim calibrate --from-run`` reads.

Two sources:

- a results folder written by ``servesim measure`` (any OpenAI-compatible server) or
  ``servesim run --backend engine``: ``summary.json`` (a list, one summary per point),
  ``requests.parquet`` (contract 4 with a ``point`` column) and ``tokens.parquet``
  (``request_id, token_index, time_s, point``: when each output token was seen). One folder
  may hold several points; each is a run. Per request: TTFT = first token - arrival, E2E
  = last token - arrival, TPOT = (last - first) / (output_tokens - 1), from the token times.
- a client's result file, read by the one loader of measured runs (simulator/measured/):
  GuideLLM ``benchmarks.json``, AIPerf ``profile_export.jsonl`` (send times known: fitted
  request by request) or a vLLM ``bench serve`` result JSON (``--save-result
  --save-detailed``; ``ttfts`` and ``itls``). TPOT = (E2E - TTFT) / (output - 1). A vLLM
  bench result has no send times, so the run to replay is (simulator/measured/vllm_bench.py):
  a burst at t = 0 when ``request_rate`` is inf and ``max_concurrency`` unset (per-request
  targets hold:
  requests in file order); a closed loop of ``max_concurrency`` clients when set (client
  k sends requests k, k + N, ...; vLLM hands the next request to whichever slot frees
  first, so only distributions are compared); else arrivals drawn at ``request_rate``
  (Poisson, or gamma with CV 1/sqrt(burstiness)), seeded, and again only distributions
  compared.

Only finished requests are kept (and replayed). Errors name the file and what is missing.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from simulator.errors import ConfigError
from simulator.measured import MeasuredRun as Measured
from simulator.measured import load_measured, load_measured_runs

RUN_FILES = "summary.json, requests.parquet and tokens.parquet"
WRITERS = "servesim measure or servesim run --backend engine"


@dataclass(frozen=True, slots=True)
class MeasuredRun:
    """One measured run: the requests to replay and what was measured for each (seconds)."""

    name: str  # where it came from, for reports: "DIR" or "DIR point 2"
    requests: pd.DataFrame  # request table (contract 1) of finished requests, arrival order
    ttft_s: np.ndarray  # per request, same order as ``requests``
    tpot_s: np.ndarray  # per request; NaN when output_tokens <= 1
    e2e_s: np.ndarray  # per request
    per_request: bool  # send times known: compare request by request, else distributions
    point: int = 0  # index of the point in its folder (matches the scenario's sweep order)
    policy: str = ""  # the policy the summary names, if any
    notes: list[str] = field(default_factory=list)  # facts a user should know
    fingerprint: dict[str, Any] | None = None  # the serving machine, if the run recorded it

    def __post_init__(self) -> None:
        n = len(self.requests)
        if n == 0:
            raise ConfigError(f"{self.name}: no finished requests to fit on")
        for name in ("ttft_s", "tpot_s", "e2e_s"):
            if len(getattr(self, name)) != n:
                raise ConfigError(f"{self.name}: {name} has {len(getattr(self, name))} "
                                  f"values for {n} requests")


def read_runs(path: str | Path) -> list[MeasuredRun]:
    """The runs in ``path``: a results folder (one per point), or a client's result file
    (GuideLLM, AIPerf, vLLM bench) read by simulator/measured/."""
    p = Path(path)
    if p.is_file():
        return [from_measured(r) for r in load_measured_runs(p)]
    if not p.is_dir():
        raise ConfigError(f"{p}: no such folder (expected a run folder written by {WRITERS}, "
                          "or a GuideLLM, AIPerf or vLLM bench result file)")
    missing = [f for f in ("summary.json", "requests.parquet", "tokens.parquet")
               if not (p / f).is_file()]
    if "summary.json" in missing or "requests.parquet" in missing:
        raise ConfigError(f"{p}: not a run folder: no {' or '.join(missing[:2])} (a run folder "
                          f"has {RUN_FILES}, as {WRITERS} write them)")
    if missing:
        raise ConfigError(f"{p}: no tokens.parquet: fitting needs the time of every output "
                          f"token, which {WRITERS} record (a simulated run has none)")
    return _read_folder(p)


def _read_folder(p: Path) -> list[MeasuredRun]:
    try:
        summaries = json.loads((p / "summary.json").read_text())
        requests = pd.read_parquet(p / "requests.parquet")
        tokens = pd.read_parquet(p / "tokens.parquet")
    except (OSError, ValueError) as e:
        raise ConfigError(f"{p}: cannot read the run ({e})") from e
    if not isinstance(summaries, list) or not all(isinstance(s, dict) for s in summaries):
        raise ConfigError(f"{p / 'summary.json'}: expected a list of summary objects")
    for table, name, cols in ((requests, "requests.parquet", ("request_id", "arrival_s",
                                                              "prompt_tokens", "output_tokens",
                                                              "status")),
                              (tokens, "tokens.parquet", ("request_id", "time_s"))):
        lacking = [c for c in cols if c not in table.columns]
        if lacking:
            raise ConfigError(f"{p / name}: lacks column(s) {lacking}")
    if "point" not in requests:
        requests = requests.assign(point=0)
    if "point" not in tokens:
        tokens = tokens.assign(point=0)
    runs = []
    for i, summary in enumerate(summaries):
        name = str(p) if len(summaries) == 1 else f"{p} point {i}"
        runs.append(_folder_point(name, i, summary, requests[requests["point"] == i],
                                  tokens[tokens["point"] == i]))
    return runs


def _folder_point(name: str, i: int, summary: dict[str, Any], records: pd.DataFrame,
                  tokens: pd.DataFrame) -> MeasuredRun:
    done = records[records["status"] == "finished"].sort_values(["arrival_s", "request_id"])
    times = tokens.groupby("request_id")["time_s"].agg(["min", "max", "count"])
    lost = ~done["request_id"].isin(times.index)
    if lost.any():
        rid = int(done["request_id"][lost].iloc[0])
        raise ConfigError(f"{name}: finished request {rid} has no rows in tokens.parquet "
                          f"({int(lost.sum())} such request(s))")
    t = times.loc[done["request_id"]]
    arrival = done["arrival_s"].to_numpy(np.float64)
    first, last = t["min"].to_numpy(np.float64), t["max"].to_numpy(np.float64)
    out = done["output_tokens"].to_numpy(np.float64)
    tpot = np.divide(last - first, out - 1, out=np.full(len(out), np.nan), where=out > 1)
    table = done[["request_id", "arrival_s", "prompt_tokens", "output_tokens"]].astype(
        {"request_id": "int64", "prompt_tokens": "int64", "output_tokens": "int64"})
    notes = []
    fp = summary.get("fingerprint")
    if len(done) < len(records):
        notes.append(f"{len(records) - len(done)} request(s) did not finish: not replayed")
    return MeasuredRun(name, table.reset_index(drop=True), first - arrival, tpot, last - arrival,
                       per_request=True, point=i, policy=str(summary.get("policy", "")),
                       notes=notes, fingerprint=fp if isinstance(fp, dict) else None)


def read_vllm_bench(p: Path) -> MeasuredRun:
    """A vLLM bench result JSON as a run (module docstring: how arrivals are chosen)."""
    return from_measured(load_measured(p))


def from_measured(run: Measured) -> MeasuredRun:
    """A run read by simulator/measured/ (any client's format) as a fitting target: its
    finished requests, their TTFT, TPOT = (E2E - TTFT) / (output_tokens - 1), E2E."""
    done = run.finished
    table = done[["request_id", "arrival_s", "prompt_tokens", "output_tokens"]].astype(
        {"request_id": "int64", "prompt_tokens": "int64", "output_tokens": "int64"}
    ).reset_index(drop=True)
    if run.closed_clients is not None:
        table = table.assign(arrival_s=np.nan,
                             client_id=np.arange(len(table)) % run.closed_clients)
    ttft, e2e = done["ttft_s"].to_numpy(np.float64), done["e2e_s"].to_numpy(np.float64)
    out = done["output_tokens"].to_numpy(np.float64)
    tpot = np.divide(e2e - ttft, out - 1, out=np.full(len(out), np.nan), where=out > 1)
    notes = list(run.notes)
    if len(done) < len(run.requests):
        notes.append(f"{len(run.requests) - len(done)} request(s) did not finish: not replayed")
    return MeasuredRun(run.source, table, ttft, tpot, e2e, per_request=run.arrivals_known,
                       policy=run.policy, notes=notes, fingerprint=run.fingerprint)
