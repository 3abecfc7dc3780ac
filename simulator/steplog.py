"""Accumulates one replica's step log cheaply, one step or one fast-forwarded run at a time.

A single step (or a short run) is row tuples appended with their row numbers; a long
fast-forwarded run is kept as the arrays it was planned with. Every ``_FLUSH_ROWS`` rows
the tuples are packed into column arrays (a row tuple of ten boxed numbers costs about
470 bytes, a packed row 88), so a long run's memory grows by the packed size.
``table()`` puts the rows at their row numbers and the runs, concatenated in order,
everywhere else.

That is ``[run] step_log = "full"``; :func:`make_step_log` picks the log of a mode
(``"summary"`` and ``"none"`` keep less: simulator/steplog_summary.py).
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np
import pandas as pd

from simulator.metrics_steps import StepStats
from simulator.records import STEP_COLUMNS, empty_table, steps_from_arrays
from simulator.shapes import StepShape, StepShapes
from simulator.steplog_summary import NoStepLog, SummaryStepLog

STEP_LOG_MODES = ("full", "summary", "none")
"""``[run] step_log``: every row (steps.parquet), aggregated figures, or nothing."""

# The columns in the order of a row tuple and of a run's arrays (``replica`` is added last).
_COLUMNS = [c for c in STEP_COLUMNS if c != "replica"]
_SHORT_RUN = 16  # runs up to this many steps are logged as rows
_FLUSH_ROWS = 4096  # row tuples kept before they are packed into column arrays
_MERGE_RUNS = 256  # runs kept apart before they are joined into one (fewer, larger arrays)


class StepLog:
    """A replica's step log (contract 4) in parts; ``table()`` turns them into a DataFrame."""

    __slots__ = ("replica", "_rows", "_row_at", "_packed", "_runs", "_merged", "_len")

    def __init__(self, replica: int) -> None:
        self.replica = replica
        self._rows: list[tuple[float, ...]] = []  # single steps, in the column order
        self._row_at: list[int] = []  # each single step's row number in the log
        # rows packed so far: (their row numbers, their columns in the column order)
        self._packed: list[tuple[np.ndarray, tuple[np.ndarray, ...]]] = []
        self._runs: list[tuple[np.ndarray, ...]] = []  # runs' columns, in the column order
        self._merged = 0  # the first _merged entries of _runs are joined runs
        self._len = 0

    def __len__(self) -> int:
        return self._len

    def add(
        self, start_s: float, end_s: float, shape: StepShape, num_decode_tokens: int,
        num_running: int, queue_len: int, kv_blocks_used: int,
        finished: Iterable[object] = (),
    ) -> None:
        """Record one step (``finished``, the requests it finished, is for the other modes)."""
        self._rows.append((
            start_s, end_s, shape.num_prefill_tokens, shape.prefill_attn_work,
            shape.num_decode_seqs, shape.decode_context_tokens, num_decode_tokens,
            num_running, queue_len, kv_blocks_used,
        ))
        self._row_at.append(self._len)
        self._len += 1
        if len(self._rows) >= _FLUSH_ROWS:
            self._pack()

    def add_decode_rows(
        self, start_s: float, ends: list[float], shape: StepShape, rows: int,
        num_running: int, queue_len: int, kv_after: list[int], last: tuple[int, int, int],
        finished: Iterable[object] = (),
    ) -> None:
        """Record a decode run's steps, back to back from ``start_s``, as :meth:`add` would
        one by one: the first of ``shape``, each later one ``rows`` sequences attending
        ``rows`` more tokens than the one before; every step emits ``rows`` tokens and logs
        ``num_running``, ``queue_len`` and ``kv_after[i]``, except the last, which logs
        ``last`` (running, waiting and KV blocks once the run was applied)."""
        n = len(ends)
        c = shape.decode_context_tokens
        out = self._rows
        out.append((start_s, ends[0], shape.num_prefill_tokens, shape.prefill_attn_work,
                    shape.num_decode_seqs, c, rows,
                    *((num_running, queue_len, kv_after[0]) if n > 1 else last)))
        for i in range(1, n):
            c += rows
            out.append((ends[i - 1], ends[i], 0, 0.0, rows, c, rows,
                        *((num_running, queue_len, kv_after[i]) if i < n - 1 else last)))
        self._row_at.extend(range(self._len, self._len + n))
        self._len += n
        if len(out) >= _FLUSH_ROWS:
            self._pack()

    def extend(
        self, starts: np.ndarray, ends: np.ndarray, shapes: StepShapes,
        num_decode_tokens: np.ndarray, num_running: np.ndarray, queue_len: np.ndarray,
        kv_blocks_used: np.ndarray, finished: Iterable[object] = (),
    ) -> None:
        """Record a run of steps given as arrays (all of the same length, not changed later).

        A short run goes in as rows: a small array costs more to keep than to convert.
        """
        k = len(starts)
        if k <= _SHORT_RUN:
            self._rows.extend(zip(
                starts.tolist(), ends.tolist(), shapes.num_prefill_tokens.tolist(),
                shapes.prefill_attn_work.tolist(), shapes.num_decode_seqs.tolist(),
                shapes.decode_context_tokens.tolist(), num_decode_tokens.tolist(),
                num_running.tolist(), queue_len.tolist(), kv_blocks_used.tolist(), strict=True,
            ))
            self._row_at.extend(range(self._len, self._len + k))
            self._len += k
            if len(self._rows) >= _FLUSH_ROWS:
                self._pack()
            return
        self._runs.append((
            starts, ends, shapes.num_prefill_tokens, shapes.prefill_attn_work,
            shapes.num_decode_seqs, shapes.decode_context_tokens, num_decode_tokens,
            num_running, queue_len, kv_blocks_used,
        ))
        self._len += k
        if len(self._runs) - self._merged >= _MERGE_RUNS:
            self._merge_runs()

    def _merge_runs(self) -> None:
        """Join the runs since the last join into one, in order: hundreds of thousands of
        small arrays (and the plans they are views of) cost far more than their rows."""
        new = self._runs[self._merged:]
        joined = tuple(np.concatenate(c) for c in zip(*new, strict=True))
        self._runs[self._merged:] = [joined]
        self._merged += 1

    def _pack(self) -> None:
        """Move the row tuples into column arrays."""
        if not self._rows:
            return
        cols = tuple(np.array(c, dtype=STEP_COLUMNS[name])
                     for c, name in zip(zip(*self._rows, strict=True), _COLUMNS, strict=True))
        self._packed.append((np.array(self._row_at, dtype=np.int64), cols))
        self._rows, self._row_at = [], []

    def table(self) -> pd.DataFrame:
        """The step log as a DataFrame with the contract's columns."""
        if not len(self):
            return empty_table(STEP_COLUMNS)
        self._pack()
        at = (np.concatenate([a for a, _ in self._packed]) if self._packed
              else np.empty(0, dtype=np.int64))
        in_runs = np.ones(len(self), dtype=bool)
        in_runs[at] = False
        # by column, so each column's parts are let go once it is built (peak: the table
        # and one column's parts, not the table and all of them)
        packed = [list(c) for c in zip(*(c for _, c in self._packed), strict=True)]
        runs = [list(c) for c in zip(*self._runs, strict=True)]
        self._packed, self._runs, self._merged = [], [], 0
        cols = {}
        for i, name in enumerate(_COLUMNS):
            col = np.empty(len(self), dtype=STEP_COLUMNS[name])
            if packed:
                col[at] = np.concatenate(packed[i])
                packed[i] = []
            if runs:
                col[in_runs] = np.concatenate(runs[i])
                runs[i] = []
            cols[name] = col
        self._runs = [tuple(cols[name] for name in _COLUMNS)]  # the log is now one run
        self._merged = 1
        cols["replica"] = np.full(len(self), self.replica, dtype=np.int64)
        return steps_from_arrays(cols)

    def clear(self) -> None:
        """Drop every step (once ``table()`` holds them, so they are not kept twice)."""
        self._rows, self._row_at, self._packed, self._runs, self._len = [], [], [], [], 0
        self._merged = 0

    def stats(self) -> StepStats | None:
        """None: the full log's figures are read from ``table()``."""
        return None


AnyStepLog = StepLog | SummaryStepLog | NoStepLog


def make_step_log(replica: int, mode: str = "full") -> AnyStepLog:
    """The step log of ``mode`` (one of ``STEP_LOG_MODES``) for replica ``replica``."""
    if mode == "full":
        return StepLog(replica)
    if mode == "summary":
        return SummaryStepLog(replica)
    if mode == "none":
        return NoStepLog(replica)
    raise ValueError(f"step_log = {mode!r}: must be one of {list(STEP_LOG_MODES)}")
