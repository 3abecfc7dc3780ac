"""Measured serving runs as fitting targets: what ``servesim calibrate --from-run`` reads.

Every input goes through the one loader of measured runs (simulator/measured/,
:func:`simulator.measured.load_measured_runs`), the same as ``servesim validate --measured``
and the dashboard's Validation page, and is then turned into targets by
:func:`from_measured`:

- a servesim results folder written by ``servesim serve --records-out``, ``servesim
  measure`` or ``servesim run --backend engine`` (``summary.json``, ``requests.parquet``,
  ``tokens.parquet`` if any): one run per point, in order (``point``), each with the policy
  and machine fingerprint its summary (or manifest) names. A folder of simulated results or
  a validation report is refused by the loader, naming what it holds;
- GuideLLM ``benchmarks.json`` (one run per benchmark), AIPerf ``profile_export.jsonl``
  (send times known: fitted request by request) or a vLLM ``bench serve`` result JSON
  (``--save-result --save-detailed``). A vLLM bench result has no send times, so the run to
  replay is (simulator/measured/vllm_bench.py): a burst at t = 0 when ``request_rate`` is
  inf and ``max_concurrency`` unset (per-request targets hold: requests in file order); a
  closed loop of ``max_concurrency`` clients when set (client k sends requests k, k + N,
  ...; vLLM hands the next request to whichever slot frees first, so only distributions
  are compared); else arrivals drawn at ``request_rate`` (Poisson, or gamma with CV
  1/sqrt(burstiness)), seeded, and again only distributions compared.

Per finished request: TTFT and E2E as the loader read them (a servesim folder: first token
and finish - arrival, from its records), TPOT = (E2E - TTFT) / (output_tokens - 1), so no
per-token times are needed. Only finished requests are kept (and replayed). Errors name
the file and what is missing.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from simulator.errors import ConfigError
from simulator.measured import MeasuredRun as Measured
from simulator.measured import load_measured, load_measured_runs


@dataclass(frozen=True, slots=True)
class MeasuredRun:
    """One measured run: the requests to replay and what was measured for each (seconds)."""

    name: str  # where it came from, for reports: "DIR" or "DIR point 2"
    requests: pd.DataFrame  # request table (contract 1) of finished requests, arrival order
    ttft_s: np.ndarray  # per request, same order as ``requests``
    tpot_s: np.ndarray  # per request; NaN when output_tokens <= 1
    e2e_s: np.ndarray  # per request
    per_request: bool  # send times known: compare request by request, else distributions
    point: int = 0  # index of the run in its file or folder (the scenario's sweep order)
    policy: str = ""  # the policy the run names, if any
    notes: list[str] = field(default_factory=list)  # facts a user should know
    fingerprint: dict[str, Any] | None = None  # the serving machine, if the run recorded it
    max_concurrency: int | None = None  # open loop capped at this many in flight (vLLM bench)

    def __post_init__(self) -> None:
        n = len(self.requests)
        if n == 0:
            raise ConfigError(f"{self.name}: no finished requests to fit on")
        for name in ("ttft_s", "tpot_s", "e2e_s"):
            if len(getattr(self, name)) != n:
                raise ConfigError(f"{self.name}: {name} has {len(getattr(self, name))} "
                                  f"values for {n} requests")


def read_runs(path: str | Path, bench_seed: int = 0) -> list[MeasuredRun]:
    """The runs in ``path`` (a results folder: one per point; a client's result file),
    read by :func:`simulator.measured.load_measured_runs` (``bench_seed``: a vLLM bench
    file's client ``--seed``)."""
    return [from_measured(r, point=i)
            for i, r in enumerate(load_measured_runs(path, bench_seed))]


def read_vllm_bench(p: Path) -> MeasuredRun:
    """A vLLM bench result JSON as a run (module docstring: how arrivals are chosen)."""
    return from_measured(load_measured(p))


def from_measured(run: Measured, point: int = 0) -> MeasuredRun:
    """A run read by simulator/measured/ (any format) as a fitting target: its finished
    requests, their TTFT, TPOT = (E2E - TTFT) / (output_tokens - 1), E2E."""
    done = run.finished
    ttft, e2e = done["ttft_s"].to_numpy(np.float64), done["e2e_s"].to_numpy(np.float64)
    if len(done) and not np.isfinite(ttft).all():
        raise ConfigError(f"{run.source}: {int((~np.isfinite(ttft)).sum())} finished "
                          "request(s) without a time to first token (not streamed): "
                          "fitting needs TTFT and E2E per request")
    table = done[["request_id", "arrival_s", "prompt_tokens", "output_tokens"]].astype(
        {"request_id": "int64", "prompt_tokens": "int64", "output_tokens": "int64"}
    ).reset_index(drop=True)
    if run.closed_clients is not None:
        table = table.assign(arrival_s=np.nan,
                             client_id=np.arange(len(table)) % run.closed_clients)
    out = done["output_tokens"].to_numpy(np.float64)
    tpot = np.divide(e2e - ttft, out - 1, out=np.full(len(out), np.nan), where=out > 1)
    notes = list(run.notes)
    if len(done) < len(run.requests):
        notes.append(f"{len(run.requests) - len(done)} request(s) did not finish: not replayed")
    return MeasuredRun(run.source, table, ttft, tpot, e2e, per_request=run.arrivals_known,
                       point=point, policy=run.policy, notes=notes,
                       fingerprint=run.fingerprint, max_concurrency=run.max_concurrency)
