"""A measured run as the rest of servesim uses it: per-request facts, records, summary.

Whatever wrote the run (GuideLLM, AIPerf, vLLM ``bench serve``, a servesim results
folder), a :class:`MeasuredRun` holds one row per request with the same columns
(``MEASURED_COLUMNS``), the per-token (or per-chunk) gaps when the format has them, and a
``missing`` list naming the figures the format cannot give. :meth:`MeasuredRun.records`
turns it into request records (contract 4, as a client sees them: ``scheduled_s`` NaN,
``preemptions`` 0) and :meth:`MeasuredRun.summary` into a summary (contract 5) in which a
figure that cannot be computed is null, never a stand-in value.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from simulator.errors import ConfigError
from simulator.metrics import summarize, to_json_safe
from simulator.metrics_stats import describe
from simulator.records import REQUEST_COLUMNS, STEP_COLUMNS, conform, empty_table
from simulator.workload.traces_json import MAX_JSON_NUMBER

MEASURED_COLUMNS: dict[str, str] = {
    "request_id": "int64",  # 0..n-1 in send order (the file's own ids are in ``notes``)
    "arrival_s": "float64",  # when the client sent it, s from the run's first send (NaN: unknown)
    "prompt_tokens": "int64",
    "output_tokens": "int64",
    "ttft_s": "float64",  # first token - send (NaN when not finished or not streamed)
    "e2e_s": "float64",  # last token - send (NaN when not finished)
    "status": "object",  # "finished" | "failed"
    "reason": "object",  # why it failed ("" when finished)
}
PERCENTILES = (50, 90, 99)
RUN_FIGURES = ("duration", "request_throughput", "output_throughput", "total_token_throughput")
CLIENT_CANNOT_SEE = ("queue time: a client cannot see when the server scheduled a request",
                     "utilisation: a client cannot see the server's steps")


@dataclass(slots=True)
class MeasuredRun:
    """One measured run, whatever wrote it (module docstring)."""

    source: str  # the file or folder, and the run within it when it holds several
    format: str  # "guidellm" | "aiperf" | "vllm_bench" | "servesim"
    requests: pd.DataFrame  # MEASURED_COLUMNS, one row per request, in send order
    gaps_s: dict[int, np.ndarray] | None  # per finished request id: gaps between its
    #   tokens (or streamed chunks), s; None when the format has no per-token times
    arrivals_known: bool = True  # False: send times were not recorded (vLLM bench)
    closed_clients: int | None = None  # sent by this many clients in a closed loop
    max_concurrency: int | None = None  # open loop capped at this many in flight (vLLM
    #   bench --max-concurrency at a finite rate: workload.max_concurrency on replay)
    missing: list[str] = field(default_factory=list)  # figures the format cannot give
    notes: list[str] = field(default_factory=list)  # how it was read, what was left out
    fingerprint: dict[str, Any] | None = None  # the serving machine, if the run said
    policy: str = ""  # the serving policy, if the run said
    summary_override: dict[str, Any] | None = None  # a servesim folder's own summary
    figures: dict[str, float] = field(default_factory=dict)  # run-level figures the file
    #   measured itself (vLLM bench: duration, request_throughput, ...), used when the
    #   send times are not known
    offered_rate: float | None = None  # req/s the client was asked to send at (vLLM
    #   bench's finite request_rate); None when unbounded or not said
    assumed_arrivals: str = ""  # how the send times were chosen when the file has none
    #   (also in ``notes``); "" when they were recorded

    def __post_init__(self) -> None:
        self.requests = conform(self.requests, MEASURED_COLUMNS, f"{self.source}: measured")
        bad = set(self.requests["status"]) - {"finished", "failed"}
        if bad:
            raise ConfigError(f"{self.source}: status {sorted(bad)}: expected finished|failed")

    @property
    def finished(self) -> pd.DataFrame:
        """The rows of finished requests."""
        return self.requests[self.requests["status"] == "finished"]

    def records(self) -> pd.DataFrame:
        """Request records (contract 4) as the client saw them; a failed request is
        ``rejected`` with the client's reason (a client cannot tell a refusal from an
        error on the way). Unknown send times (``arrivals_known`` False: those in
        ``requests`` were assumed for the replay) are NaN, and so are the token times."""
        arrival = self.requests["arrival_s"].to_numpy(np.float64)
        return self._records(arrival if self.arrivals_known else np.full(len(arrival), np.nan))

    def _records(self, arrival: np.ndarray) -> pd.DataFrame:
        r = self.requests
        done = (r["status"] == "finished").to_numpy()
        return conform(pd.DataFrame({
            "request_id": r["request_id"], "arrival_s": arrival,
            "scheduled_s": np.nan, "first_token_s": arrival + r["ttft_s"].to_numpy(),
            "finish_s": arrival + r["e2e_s"].to_numpy(), "prompt_tokens": r["prompt_tokens"],
            "output_tokens": r["output_tokens"], "preemptions": 0,
            "replica": np.where(done, 0, -1), "status": np.where(done, "finished", "rejected"),
            "reason": r["reason"]}), REQUEST_COLUMNS, "request records")

    def summary(self) -> dict[str, Any]:
        """Summary (contract 5): null for every figure in ``missing``; ITL from the gaps."""
        if self.summary_override is not None:
            return dict(self.summary_override)
        if self.arrivals_known:
            records = self.records()
        else:  # latencies are relative to each send: any origin gives them
            records = self._records(np.zeros(len(self.requests)))
        out = summarize(records, empty_table(STEP_COLUMNS), percentiles=PERCENTILES)
        if not self.arrivals_known:  # no send times: no run window but the file's own
            for key in RUN_FIGURES:
                out[key] = self.figures.get(key)
        itl_ms = self._itl_ms()
        for stat, value in describe(itl_ms if itl_ms is not None else np.array([]),
                                    PERCENTILES).items():
            out[f"{stat}_itl_ms"] = None if itl_ms is None else value
        for key in [k for k in out if k.endswith("_queue_ms")]:
            out[key] = None
        if self.requests["ttft_s"][self.requests["status"] == "finished"].isna().all():
            for key in [k for k in out if k.endswith(("_ttft_ms", "_tpot_ms"))]:
                out[key] = None  # not streamed: no first token seen
        out["utilisation"] = None
        meta: dict[str, Any] = {
            "backend": "endpoint", "measured_format": self.format, "source": self.source,
            "missing": list(self.missing), "notes": list(self.notes),
            "itl_source": None if itl_ms is None else
            "client: gaps between streamed tokens (or chunks) of finished requests"}
        if self.fingerprint is not None:
            meta["fingerprint"] = self.fingerprint
        return to_json_safe({**out, **meta})

    def replay_table(self) -> pd.DataFrame:
        """The finished requests as a request table (contract 1) to simulate: their ids,
        send times and lengths."""
        done = self.finished
        return done[["request_id", "arrival_s", "prompt_tokens", "output_tokens"]
                    ].reset_index(drop=True)

    def _itl_ms(self) -> np.ndarray | None:
        if self.gaps_s is None:
            return None
        ids = self.finished["request_id"].tolist()
        gaps = [self.gaps_s[i] for i in ids if i in self.gaps_s]
        return np.concatenate(gaps) * 1000.0 if gaps else np.array([])


def plain_number(value: Any) -> float | None:
    """A JSON value as a float when it is a number (not a boolean), finite and at most
    ``MAX_JSON_NUMBER`` in size (the trace readers' bound); else None. JSON integers have
    no size limit, and ``math.isfinite`` raises on one past a float's range, so the size
    is compared first."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if -MAX_JSON_NUMBER <= value <= MAX_JSON_NUMBER else None  # not NaN


def replayable(row: dict[str, Any], where: str) -> dict[str, Any]:
    """``row`` if a finished request's lengths can be replayed (at least one prompt and one
    output token), else a ConfigError naming ``where`` (the file and the request)."""
    if row["status"] == "finished" and (row["prompt_tokens"] < 1 or row["output_tokens"] < 1):
        raise ConfigError(f"{where}: a finished request of {row['prompt_tokens']} prompt and "
                          f"{row['output_tokens']} output tokens (missing or 0); a replay "
                          "needs at least one of each")
    return row


def json_object(value: Any, where: str) -> dict[str, Any]:
    """An optional JSON object field: ``{}`` when absent (None), else it must be an object."""
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise ConfigError(f"{where} = {value!r}: expected an object")
    return value


def number(value: Any, where: str, *, allow_none: bool = False) -> float:
    """One JSON value as a finite float >= 0 (``where`` names it in the error)."""
    if value is None and allow_none:
        return math.nan
    got = plain_number(value)
    if got is None or got < 0:
        big = isinstance(value, int | float) and not isinstance(value, bool) and value > 0
        raise ConfigError(f"{where} = {value!r}: expected a number >= 0"
                          + (" and at most 2**53" if big and got is None else ""))
    return got


def frame(rows: list[dict[str, Any]]) -> tuple[pd.DataFrame, dict[int, np.ndarray]]:
    """Rows in send order, numbered 0..n-1, arrivals from the first send; and the
    ``gaps`` (s) each row carried, by its new id (rows without ``gaps`` have none)."""
    if not rows:
        return empty_table(MEASURED_COLUMNS), {}
    df = pd.DataFrame(rows).sort_values("arrival_s", kind="stable").reset_index(drop=True)
    df["arrival_s"] = df["arrival_s"] - df["arrival_s"].min()
    df["request_id"] = np.arange(len(df))
    gaps = {} if "gaps" not in df else {
        i: np.asarray(g, np.float64) for i, g in enumerate(df.pop("gaps")) if g is not None}
    return df, gaps
