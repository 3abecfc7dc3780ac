"""Accumulates one replica's step log cheaply, one step or one fast-forwarded run at a time.

A single step or a short decode run is one "span" tuple (its start, its length, its
first row's shape, what every later row adds, the last row's counts) plus each row's end
and KV blocks in two flat lists, so logging a run of a few steps is a few list
operations, not a tuple per row; a long fast-forwarded run is kept as the arrays it was
planned with, and its place as (first row, length). Every ``_FLUSH_ROWS`` rows the spans
are expanded into column arrays with numpy (a row of ten boxed numbers costs a few
hundred bytes, a packed row 88), so a long run's memory grows by the packed size.
``table()`` puts the runs, concatenated in order, at their places and the rows, in
order, everywhere else.

That is ``[run] step_log = "full"``; :func:`make_step_log` picks the log of a mode
(``"summary"`` and ``"none"`` keep less: simulator/steplog_summary.py).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

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
_FLUSH_ROWS = 4096  # rows kept as spans before they are packed into column arrays
# a span's fields: start_s, rows in the span (n), the first row's num_prefill_tokens,
# prefill_attn_work, num_decode_seqs and decode_context_tokens, rows (decode tokens per
# row, and the context added per row after the first), num_running and queue_len of every
# row but the last, and the last row's
_SPAN_DTYPES = {"start": np.float64, "n": np.int64, "prefill": np.int64, "work": np.float64,
                "seqs": np.int64, "context": np.int64, "rows": np.int64,
                "running": np.int64, "waiting": np.int64, "last_running": np.int64,
                "last_waiting": np.int64}  # _Spans' fields, in this order
_MERGE_RUNS = 256  # runs kept apart before they are joined into one (fewer, larger arrays)


class _Spans:
    """Spans not yet packed, a list a field (``_SPAN_DTYPES``'s). A tuple a span, transposed
    when packed, cost more: the tuples, their GC tracking and the transposition (with this
    change ``python benchmarks/instructions.py --case chat`` went from 96.0k to 83.3k,
    counted before it ran with one BLAS thread: docs/architecture.md)."""

    __slots__ = ("start", "n", "prefill", "work", "seqs", "context", "rows", "running",
                 "waiting", "last_running", "last_waiting")

    def __init__(self) -> None:
        self.start: list[float] = []
        self.n: list[int] = []
        self.prefill: list[int] = []
        self.work: list[float] = []
        self.seqs: list[int] = []
        self.context: list[int] = []
        self.rows: list[int] = []
        self.running: list[int] = []
        self.waiting: list[int] = []
        self.last_running: list[int] = []
        self.last_waiting: list[int] = []

    def __len__(self) -> int:
        return len(self.start)

    def add(self, start_s: float, n: int, shape: StepShape, rows: int, running: int,
            waiting: int, last_running: int, last_waiting: int) -> None:
        """One span: ``n`` rows from ``start_s``, the first of ``shape``."""
        self.start.append(start_s)
        self.n.append(n)
        self.prefill.append(shape.num_prefill_tokens)
        self.work.append(shape.prefill_attn_work)
        self.seqs.append(shape.num_decode_seqs)
        self.context.append(shape.decode_context_tokens)
        self.rows.append(rows)
        self.running.append(running)
        self.waiting.append(waiting)
        self.last_running.append(last_running)
        self.last_waiting.append(last_waiting)

    def columns(self) -> list[list[Any]]:
        """The fields, in the order of ``_SPAN_DTYPES``."""
        return [getattr(self, name) for name in _SPAN_DTYPES]


class StepLog:
    """A replica's step log (contract 4) in parts; ``table()`` turns them into a DataFrame."""

    __slots__ = ("replica", "_spans", "_ends", "_kv", "_packed", "_runs", "_run_at",
                 "_merged", "_len")

    def __init__(self, replica: int) -> None:
        self.replica = replica
        # single steps and short decode runs not yet packed: a span per step or run, and
        # each row's end_s and kv_blocks_used (the columns that vary freely)
        self._spans = _Spans()
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
        self._spans.add(start_s, 1, shape, num_decode_tokens, num_running, queue_len,
                        num_running, queue_len)
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
        self._spans.add(start_s, n, shape, rows, num_running, queue_len, last[0], last[1])
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
            running, waiting = num_running.tolist(), queue_len.tolist()
            spans = self._spans
            spans.start += starts.tolist()
            spans.n += [1] * k
            spans.prefill += shapes.num_prefill_tokens.tolist()
            spans.work += shapes.prefill_attn_work.tolist()
            spans.seqs += shapes.num_decode_seqs.tolist()
            spans.context += shapes.decode_context_tokens.tolist()
            spans.rows += num_decode_tokens.tolist()
            spans.running += running
            spans.waiting += waiting
            spans.last_running += running
            spans.last_waiting += waiting
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
        spans = self._spans
        if not len(spans):
            return
        m, total = len(spans), len(self._ends)
        fields: list[np.ndarray] = [np.fromiter(c, dtype, m) for c, dtype in
                                    zip(spans.columns(), _SPAN_DTYPES.values(), strict=True)]
        (start, n, prefill, work, seqs, context, rows, running, waiting, last_running,
         last_waiting) = fields
        owner = np.repeat(np.arange(m), n)  # each row's span
        first = np.cumsum(n) - n  # each span's first row
        j = np.arange(total) - first[owner]  # each row's place in its span
        end = np.fromiter(self._ends, np.float64, total)
        cols = dict.fromkeys(_COLUMNS, end)
        cols["start_s"] = np.concatenate(([0.0], end[:-1]))
        cols["start_s"][first] = start
        cols["num_prefill_tokens"] = np.zeros(total, np.int64)
        cols["num_prefill_tokens"][first] = prefill
        cols["prefill_attn_work"] = np.zeros(total, np.float64)
        cols["prefill_attn_work"][first] = work
        cols["num_decode_tokens"] = rows[owner]
        cols["num_decode_seqs"] = cols["num_decode_tokens"].copy()
        cols["num_decode_seqs"][first] = seqs
        cols["decode_context_tokens"] = context[owner] + j * cols["num_decode_tokens"]
        last = j == (n - 1)[owner]
        cols["num_running"] = np.where(last, last_running[owner], running[owner])
        cols["queue_len"] = np.where(last, last_waiting[owner], waiting[owner])
        cols["kv_blocks_used"] = np.fromiter(self._kv, np.int64, total)
        self._packed.append(tuple(cols[name] for name in _COLUMNS))
        self._spans, self._ends, self._kv = _Spans(), [], []

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
        self._spans, self._ends, self._kv = _Spans(), [], []
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
