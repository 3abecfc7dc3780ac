"""Accumulates one replica's step log cheaply, one step or one fast-forwarded run at a time.

A single step or a short decode run is one "span" (its start, its length, its first
row's shape, what every later row adds, the last row's counts), packed by ``struct`` into
an 88-byte record, plus each row's end and KV blocks in two flat lists, so logging a run
of a few steps is one ``pack`` and a few list operations, not a tuple per row; a long
fast-forwarded run is kept as the arrays it was planned with, and its place as (first
row, length). Every ``_FLUSH_ROWS`` rows the spans are expanded into column arrays with
numpy (the records read with ``np.frombuffer``, the lists converted by ``struct``: no
boxed number goes through ``np.fromiter``; a row of ten boxed numbers costs a few hundred
bytes, a packed row 88), so a long run's memory grows by the packed size.
``table()`` puts the runs, concatenated in order, at their places and the rows, in
order, everywhere else.

That is ``[run] step_log = "full"``; :func:`make_step_log` picks the log of a mode
(``"summary"`` and ``"none"`` keep less: simulator/steplog_summary.py).
"""

from __future__ import annotations

import struct
from collections.abc import Iterable
from typing import Final

import numpy as np
import pandas as pd

from simulator.metrics_steps import StepStats
from simulator.number_lists import floats, ints
from simulator.records import STEP_COLUMNS, empty_table, steps_from_arrays
from simulator.shapes import StepShape, StepShapes
from simulator.steplog_summary import NoStepLog, SummaryStepLog

STEP_LOG_MODES = ("full", "summary", "none")
"""``[run] step_log``: every row (steps.parquet), aggregated figures, or nothing."""

# The columns in the order of a row tuple and of a run's arrays (``replica`` is added last).
_COLUMNS = [c for c in STEP_COLUMNS if c != "replica"]
_SHORT_RUN: Final = 16  # runs up to this many steps are logged as rows
_FLUSH_ROWS: Final = 4096  # rows kept as spans before they are packed into column arrays
# a span's fields: start_s, rows in the span (n), the first row's num_prefill_tokens,
# prefill_attn_work, num_decode_seqs and decode_context_tokens, rows (decode tokens per
# row, and the context added per row after the first), num_running and queue_len of every
# row but the last, and the last row's
_SPAN_FIELDS = ("start", "n", "prefill", "work", "seqs", "context", "rows", "running",
                "waiting", "last_running", "last_waiting")
# A span is one record of these (native doubles and 64-bit ints, every field 8 bytes, so
# no padding): ``_PACK_SPAN`` makes its bytes, kept in a list and joined when packed, and
# ``np.frombuffer`` reads them back as columns with no per-value conversion. A list a
# field, ``np.fromiter``-ed when packed, cost ~200 instructions a value (numpy discovers
# each value's type); appending the records to a bytearray cost more than the list
# (``python benchmarks/instructions.py --case long``: docs/architecture.md).
_SPAN_FLOATS = ("start", "work")  # the double fields; the others are 64-bit ints
_SPAN: Final = struct.Struct("@" + "".join("d" if name in _SPAN_FLOATS else "q"
                                           for name in _SPAN_FIELDS))
_PACK_SPAN: Final = _SPAN.pack  # bound once: a call, not a method look-up, a span
_SPAN_DTYPE = np.dtype([(name, np.float64 if name in _SPAN_FLOATS else np.int64)
                        for name in _SPAN_FIELDS])
_MERGE_RUNS: Final = 256  # runs kept apart before they are joined into one (fewer, larger arrays)


class StepLog:
    """A replica's step log (contract 4) in parts; ``table()`` turns them into a DataFrame."""

    __slots__ = ("replica", "_spans", "_ends", "_kv", "_packed", "_runs", "_run_at",
                 "_merged", "_len")

    def __init__(self, replica: int) -> None:
        self.replica = replica
        # single steps and short decode runs not yet packed: a span (``_SPAN``) per step or
        # run, and each row's end_s and kv_blocks_used (the columns that vary freely)
        self._spans: list[bytes] = []
        self._ends: list[float] = []
        self._kv: list[int] = []
        self._packed: list[tuple[np.ndarray, ...]] = []  # rows packed so far, as columns
        self._runs: list[tuple[np.ndarray, ...]] = []  # runs' columns, in the column order
        self._run_at: list[tuple[int, int]] = []  # each run's first row number and length
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
        self._spans.append(_PACK_SPAN(start_s, 1, shape.num_prefill_tokens,
                                      shape.prefill_attn_work, shape.num_decode_seqs,
                                      shape.decode_context_tokens, num_decode_tokens,
                                      num_running, queue_len, num_running, queue_len))
        self._ends.append(end_s)
        self._kv.append(kv_blocks_used)
        self._len += 1
        if len(self._ends) >= _FLUSH_ROWS:
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
        self._spans.append(_PACK_SPAN(start_s, n, shape.num_prefill_tokens,
                                      shape.prefill_attn_work, shape.num_decode_seqs,
                                      shape.decode_context_tokens, rows, num_running,
                                      queue_len, last[0], last[1]))
        self._ends += ends
        kv = self._kv
        kv += kv_after[:n - 1]
        kv.append(last[2])
        self._len += n
        if len(self._ends) >= _FLUSH_ROWS:
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
            spans = np.empty(k, _SPAN_DTYPE)  # a span a step
            spans["start"] = starts
            spans["n"] = 1
            spans["prefill"] = shapes.num_prefill_tokens
            spans["work"] = shapes.prefill_attn_work
            spans["seqs"] = shapes.num_decode_seqs
            spans["context"] = shapes.decode_context_tokens
            spans["rows"] = num_decode_tokens
            spans["running"] = spans["last_running"] = num_running
            spans["waiting"] = spans["last_waiting"] = queue_len
            self._spans.append(spans.tobytes())
            self._ends += ends.tolist()
            self._kv += kv_blocks_used.tolist()
            self._len += k
            if len(self._ends) >= _FLUSH_ROWS:
                self._pack()
            return
        self._runs.append((
            starts, ends, shapes.num_prefill_tokens, shapes.prefill_attn_work,
            shapes.num_decode_seqs, shapes.decode_context_tokens, num_decode_tokens,
            num_running, queue_len, kv_blocks_used,
        ))
        self._run_at.append((self._len, k))
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
        """Expand the spans into rows, as column arrays (row ``j`` of a span of ``n`` from
        ``start_s``: it starts where row ``j - 1`` ended; prefill tokens and work only in
        row 0; ``num_decode_seqs`` the shape's in row 0, ``rows`` after; context
        ``C + j * rows``; every row emits ``rows`` tokens; the last row logs ``last``)."""
        if not self._spans:
            return
        spans = np.frombuffer(b"".join(self._spans), _SPAN_DTYPE)
        total = len(self._ends)
        (start, n, prefill, work, seqs, context, rows, running, waiting, last_running,
         last_waiting) = (spans[name] for name in _SPAN_FIELDS)
        first = np.cumsum(n) - n  # each span's first row
        last = first + (n - 1)  # and its last
        j = np.arange(total) - np.repeat(first, n)  # each row's place in its span
        end = floats(self._ends)
        cols = dict.fromkeys(_COLUMNS, end)
        cols["start_s"] = np.concatenate(([0.0], end[:-1]))
        cols["start_s"][first] = start
        cols["num_prefill_tokens"] = np.zeros(total, np.int64)
        cols["num_prefill_tokens"][first] = prefill
        cols["prefill_attn_work"] = np.zeros(total, np.float64)
        cols["prefill_attn_work"][first] = work
        cols["num_decode_tokens"] = np.repeat(rows, n)
        cols["num_decode_seqs"] = cols["num_decode_tokens"].copy()
        cols["num_decode_seqs"][first] = seqs
        cols["decode_context_tokens"] = np.repeat(context, n) + j * cols["num_decode_tokens"]
        cols["num_running"] = np.repeat(running, n)
        cols["num_running"][last] = last_running
        cols["queue_len"] = np.repeat(waiting, n)
        cols["queue_len"][last] = last_waiting
        cols["kv_blocks_used"] = ints(self._kv)
        self._packed.append(tuple(cols[name] for name in _COLUMNS))
        self._spans, self._ends, self._kv = [], [], []

    def table(self) -> pd.DataFrame:
        """The step log as a DataFrame with the contract's columns."""
        if not len(self):
            return empty_table(STEP_COLUMNS)
        self._pack()
        in_runs = np.zeros(len(self), dtype=bool)
        for first, k in self._run_at:
            in_runs[first:first + k] = True
        at = ~in_runs  # the rows', in order (runs and rows each arrive in row order)
        # by column, so each column's parts are let go once it is built (peak: the table
        # and one column's parts, not the table and all of them)
        packed = [list(c) for c in zip(*self._packed, strict=True)]
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
        self._run_at = [(0, len(self))]
        self._merged = 1
        cols["replica"] = np.full(len(self), self.replica, dtype=np.int64)
        return steps_from_arrays(cols)

    def clear(self) -> None:
        """Drop every step (once ``table()`` holds them, so they are not kept twice)."""
        self._spans, self._ends, self._kv = [], [], []
        self._packed, self._runs, self._run_at, self._len, self._merged = [], [], [], 0, 0

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
