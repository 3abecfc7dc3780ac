"""The live server's bound on the records it keeps in memory (``servesim serve --keep-records``).

A live engine's core keeps, per request that arrived, its :class:`Sequence` and the time of
each output token, and a step log row per step. Left alone that grows for the server's
whole life. :class:`RecordKeeper` keeps at most ``keep`` request records: once the core
holds more, the oldest *ended* requests (finished, rejected, aborted; a request still
waiting or running is never taken) leave memory with their token times, and so do the
step-log rows that ended before the oldest request still kept arrived. They go to
``--records-out`` as Parquet part files (:class:`engine.server.record_spill.RecordSpill`)
when a folder was given, else they are dropped and counted.

Requests leave in chunks of ``keep // 16`` (so a chunk's scan of the kept list, O(keep),
happens once per ``keep // 16`` requests, not once per step); memory holds between
``keep - keep // 16`` and ``keep`` ended requests, plus those still in flight.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import pandas as pd

from engine.server.record_spill import RecordSpill
from engine.server.records import mark_aborted
from simulator.errors import ConfigError
from simulator.records import STEP_COLUMNS, empty_table, token_table
from simulator.served_requests import request_records
from simulator.steplog import StepLog

if TYPE_CHECKING:  # no torch for `servesim serve --help`
    from engine.core import EngineCore

# 100,000 requests of 256 output tokens: ~0.25 GB (docs/serving.md, "Memory")
DEFAULT_KEEP_RECORDS = 100_000


@dataclass(slots=True)
class Evicted:
    """Records that left memory in one chunk (contract 4 tables)."""

    requests: pd.DataFrame  # request records, status and reason as the server reports them
    steps: pd.DataFrame  # step-log rows that ended before the oldest kept request arrived
    tokens: pd.DataFrame  # request_id, token_index, time_s of the requests above


class RecordKeeper:
    """Takes the oldest ended requests' records out of an :class:`EngineCore` past ``keep``.

    Runs on the engine thread, under the engine's lock (it edits the core's lists).
    """

    def __init__(self, keep: int, spill: RecordSpill | None = None) -> None:
        if isinstance(keep, bool) or not isinstance(keep, int) or keep < 1:
            raise ConfigError(f"--keep-records={keep!r} must be an integer >= 1")
        self.keep = keep
        self.chunk = max(1, keep // 16)  # requests that leave at once (module docstring)
        self.spill = spill
        self.dropped = 0  # request records that left memory unwritten (no --records-out)
        self.spilled = 0  # request records written to the spill folder
        self.steps_kept = empty_table(STEP_COLUMNS)  # rows moved out of the core's log, kept

    def steps(self, core: EngineCore) -> pd.DataFrame:
        """The step log still in memory: rows kept from earlier cuts, then the core's log."""
        live = core.log.table() if len(core.log) else empty_table(STEP_COLUMNS)
        if self.steps_kept.empty:
            return live
        if live.empty:
            return self.steps_kept.copy()
        return pd.concat([self.steps_kept, live], ignore_index=True)

    def take(self, core: EngineCore, ended: Callable[[int], bool], aborted: set[int],
             pending_since_s: float = math.inf) -> Evicted | None:
        """Remove the oldest ended requests past ``keep`` (down to ``keep - chunk + 1``)
        and the step rows before the oldest kept arrival (or ``pending_since_s``, the first
        request not yet handed to the core) and count them; return them for :meth:`write`
        when they go to disk, else None (dropped, or nothing over the bound)."""
        arrived = core.arrived
        if len(arrived) <= self.keep:
            return None
        excess = len(arrived) - self.keep + self.chunk - 1
        gone: list = []
        kept: list = []
        for seq in arrived:
            if len(gone) < excess and ended(seq.request_id):
                gone.append(seq)
            else:
                kept.append(seq)
        if not gone:  # everything over the bound is still in flight
            return None
        core.arrived[:] = kept
        requests = mark_aborted(request_records(gone), aborted)
        aborted.difference_update(s.request_id for s in gone)
        tokens = token_table({s.request_id: core.token_times.pop(s.request_id, ())
                              for s in gone})
        since = min([pending_since_s, *(s.arrival_s for s in kept)])
        steps = self._cut_steps(core, since)
        if self.spill is None:
            self.dropped += len(gone)
            return None
        self.spilled += len(gone)
        return Evicted(requests, steps, tokens)

    def write(self, evicted: Evicted) -> None:
        """Write what :meth:`take` returned to the spill folder (outside the lock)."""
        assert self.spill is not None
        self.spill.write(evicted.requests, evicted.steps, evicted.tokens)

    def _cut_steps(self, core: EngineCore, since_s: float) -> pd.DataFrame:
        """Step rows that ended by ``since_s`` leave; the rest stay, moved out of the log."""
        steps = self.steps(core)
        core.log = StepLog(core.log.replica)
        core.forward_s.clear()  # per step, read only by offline runs (engine/serving.py)
        old = steps["end_s"].to_numpy() <= since_s
        self.steps_kept = steps[~old].reset_index(drop=True)
        return steps[old].reset_index(drop=True)
