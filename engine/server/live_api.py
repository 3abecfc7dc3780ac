"""What the HTTP layer needs from a live engine, without torch: sinks, gauges, snapshots.

:class:`engine.server.live.LiveEngine` implements :class:`Backend`; ``engine/server/app.py`` only
sees this protocol, so the HTTP layer imports no torch and could front another backend.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import pandas as pd

from simulator.policies import Sequence


class RequestSink(Protocol):
    """Receives one request's events, on the engine thread (so: quick and thread-safe)."""

    def token(self, seq: Sequence, token_id: int, time_s: float) -> None:
        """An output token was emitted at ``time_s`` (end of the step that made it)."""

    def done(self, seq: Sequence) -> None:
        """The request finished, or was rejected (then ``seq.reason`` says why)."""

    def aborted(self, seq: Sequence) -> None:
        """The request was dropped because its client went away (``LiveEngine.cancel``)."""

    def fail(self, message: str) -> None:
        """The engine stopped or crashed before the request ended."""


class EngineUnavailable(RuntimeError):
    """The engine thread is not running (stopped, or crashed: the message says why)."""


@dataclass(slots=True, frozen=True)
class Gauges:
    """The engine's load after its last step (read by /metrics without a lock)."""

    running: int = 0  # requests holding KV cache
    waiting: int = 0  # requests arrived but not yet scheduled
    kv_blocks_used: int = 0


@dataclass(slots=True)
class Snapshot:
    """The engine's records so far (data contract 4), plus per-token times."""

    requests: pd.DataFrame  # one row per request that arrived; in_flight if not done yet
    steps: pd.DataFrame  # step log
    tokens: pd.DataFrame  # request_id, token_index, time_s
    kv_blocks_total: int
    clock_s: float  # the engine clock when the snapshot was taken
    records_spilled: int = 0  # request records that left memory for --records-out
    records_dropped: int = 0  # request records that left memory unwritten (--keep-records)


class Backend(Protocol):
    """A live engine as the HTTP layer drives it."""

    kv_blocks: int  # KV blocks in total
    max_request_tokens: int  # the KV budget in token positions: prompt + max_tokens at most
    gauges: Gauges  # load after the last step
    error: BaseException | None  # why the engine died, if it did

    @property
    def alive(self) -> bool: ...

    def clock(self) -> float: ...

    def start(self) -> None: ...

    def stop(self, timeout_s: float = 30.0) -> None: ...

    def submit(self, prompt_ids: list[int], max_tokens: int, sink: RequestSink,
               arrival_s: float | None = None) -> int: ...

    def cancel(self, request_id: int, reason: str = "aborted: the client went away") -> None:
        ...

    def end_early(self, request_id: int) -> None: ...

    def snapshot(self) -> Snapshot: ...
