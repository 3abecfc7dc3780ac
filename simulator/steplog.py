"""Accumulates one replica's step log cheaply, one step or one fast-forwarded run at a time.

A single step or a short decode run is one "span" (its start, its length, its first
row's shape, what every later row adds, the KV blocks of its first row and the last
row's counts), packed by ``struct`` into a 112-byte record, plus each row's end in a flat
list; a run's KV blocks are not listed row by row but kept as the block openings they
follow (the cohort's openings per step, one cycle of ``block_size`` counts, in a flat
list), expanded with numpy when packed. So logging a run of a few steps is one ``pack``
and two list extensions, not a tuple or a boxed number per row; a long fast-forwarded
run is kept as the arrays it was planned with, and its place as (first row, length).
Every ``_FLUSH_ROWS`` rows the spans are expanded into column arrays: in one pass by the
C expander built with the compiled core (simulator/_steprows.c), else with numpy (the
records read with ``np.frombuffer``, the lists converted by ``struct``: no boxed number
goes through ``np.fromiter``; a row of ten boxed numbers costs a few hundred bytes, a
packed row 88), so a long run's memory grows by the packed size. ``table()`` puts the
runs, concatenated in order, at their places and the rows, in order, everywhere else.

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

try:  # the C row expander, built with the compiled core (simulator/_steprows.c)
    from simulator._steprows import expand as _expand_native
except ImportError:  # pure Python, or no build: numpy expands the rows
    _expand_native = None

STEP_LOG_MODES = ("full", "summary", "none")
"""``[run] step_log``: every row (steps.parquet), aggregated figures, or nothing."""

# The columns in the order of a row tuple and of a run's arrays (``replica`` is added last).
_COLUMNS = [c for c in STEP_COLUMNS if c != "replica"]
_SHORT_RUN: Final = 16  # runs up to this many steps are logged as rows
_FLUSH_ROWS: Final = 4096  # rows kept as spans before they are packed into column arrays
# a span's fields: start_s, rows in the span (n), the first row's num_prefill_tokens,
# prefill_attn_work, num_decode_seqs and decode_context_tokens, rows (decode tokens per
# row, and the context added per row after the first), num_running and queue_len of every
# row but the last, and the last row's; the first row's kv_blocks_used and the last
# row's; and how many block openings the span has in the flat list, one cycle of them
# (0 for a span of one row, whose only row is its last; they start where the spans
# before it end)
_SPAN_FIELDS = ("start", "n", "prefill", "work", "seqs", "context", "rows", "running",
                "waiting", "last_running", "last_waiting", "kv", "last_kv", "cycle")
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
_MERGE_RUNS: Final = 256  # runs waiting before the spans around them are packed
_JOIN_PIECES: Final = 512  # pieces kept apart before they are joined into one


class StepLog:
    """A replica's step log (contract 4) in parts; ``table()`` turns them into a DataFrame."""

    __slots__ = ("replica", "_spans", "_ends", "_openings", "_runs", "_pieces", "_joined",
                 "_len")

    def __init__(self, replica: int) -> None:
        self.replica = replica
        # single steps and short decode runs not yet packed: a span (``_SPAN``) per step or
        # run, each row's end_s (the column that varies freely) and the runs' block
        # openings, one cycle a run, one after another (a span says where its cycle is)
        self._spans: list[bytes] = []
        self._ends: list[float] = []
        self._openings: list[int] = []
        # long runs logged since the spans were last packed: how many span rows came
        # before each, and its columns (in the column order)
        self._runs: list[tuple[int, tuple[np.ndarray, ...]]] = []
        # every row packed so far, in row order: packed spans and runs, as columns (the
        # first _joined of them are joined pieces)
        self._pieces: list[tuple[np.ndarray, ...]] = []
        self._joined = 0
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
                                      num_running, queue_len, num_running, queue_len,
                                      kv_blocks_used, kv_blocks_used, 0))
        self._ends.append(end_s)
        self._len += 1
        if len(self._ends) >= _FLUSH_ROWS:
            self._pack()

    def add_decode_rows(
        self, start_s: float, ends: list[float], shape: StepShape, rows: int,
        num_running: int, queue_len: int, kv_used: int, openings: list[int],
        last: tuple[int, int, int], finished: Iterable[object] = (),
    ) -> None:
        """Record a decode run's steps, back to back from ``start_s``, as :meth:`add` would
        one by one: the first of ``shape``, each later one ``rows`` sequences attending
        ``rows`` more tokens than the one before; every step emits ``rows`` tokens and logs
        ``num_running`` and ``queue_len``, and the first ``kv_used`` KV blocks, step ``t``
        ``kv_used`` plus the blocks opened at the run's later steps before it, the ``i``-th
        of them opening ``openings[i % len(openings)]`` (``kvcache.used_after_steps``; no
        openings: none), except the last, which logs ``last`` (running, waiting and KV
        blocks once the run was applied)."""
        n = len(ends)
        cycle = len(openings)
        if n > 1 and cycle:
            if n <= cycle:  # the rows never come round: the openings they read are enough
                cycle = n - 1  # (row j reads the first j; the cycle, n - 1, is never ended)
                self._openings += openings[:cycle]
            else:
                self._openings += openings
        else:
            cycle = 0  # no row but the last: nothing to expand; or no block opens
        self._spans.append(_PACK_SPAN(start_s, n, shape.num_prefill_tokens,
                                      shape.prefill_attn_work, shape.num_decode_seqs,
                                      shape.decode_context_tokens, rows, num_running,
                                      queue_len, last[0], last[1], kv_used, last[2], cycle))
        self._ends += ends
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
            spans["kv"] = spans["last_kv"] = kv_blocks_used
            spans["cycle"] = 0
            self._spans.append(spans.tobytes())
            self._ends += ends.tolist()
            self._len += k
            if len(self._ends) >= _FLUSH_ROWS:
                self._pack()
            return
        self._runs.append((len(self._ends), (
            starts, ends, shapes.num_prefill_tokens, shapes.prefill_attn_work,
            shapes.num_decode_seqs, shapes.decode_context_tokens, num_decode_tokens,
            num_running, queue_len, kv_blocks_used,
        )))
        self._len += k
        if len(self._runs) >= _MERGE_RUNS:
            self._pack()

    def _pack(self) -> None:
        """Move the spans and the runs logged since the last pack to the pieces, in row
        order: the spans expanded into column arrays, cut where the runs came."""
        rows = self._expand() if self._spans else None
        pieces = self._pieces
        cut = 0
        for at, run in self._runs:
            if rows is not None and at > cut:
                pieces.append(tuple(c[cut:at] for c in rows))
            pieces.append(run)
            cut = at
        if rows is not None and cut < len(rows[0]):
            pieces.append(tuple(c[cut:] for c in rows) if cut else rows)
        self._spans, self._ends, self._openings, self._runs = [], [], [], []
        if len(pieces) - self._joined >= _JOIN_PIECES:
            # hundreds of thousands of small arrays (and the plans they are views of) cost
            # far more than their rows: the pieces since the last join become one
            pieces[self._joined:] = [tuple(np.concatenate(c) for c in
                                           zip(*pieces[self._joined:], strict=True))]
            self._joined += 1

    def _expand(self) -> tuple[np.ndarray, ...]:
        """The spans' rows as column arrays, in the column order: by the C expander where
        it was built (one pass over the rows), else by :meth:`_expand_numpy` (the same
        values, bit for bit)."""
        if _expand_native is None:
            return self._expand_numpy()
        buf = _expand_native(b"".join(self._spans), self._ends, self._openings)
        total = len(self._ends)
        as_floats = np.frombuffer(buf, np.float64).reshape(len(_COLUMNS), total)
        as_ints = np.frombuffer(buf, np.int64).reshape(len(_COLUMNS), total)
        return tuple(as_floats[i] if STEP_COLUMNS[name] == "float64" else as_ints[i]
                     for i, name in enumerate(_COLUMNS))

    def _expand_numpy(self) -> tuple[np.ndarray, ...]:
        """The spans' rows as column arrays, in the column order (row ``j`` of a span of
        ``n`` from ``start_s``: it starts where row ``j - 1`` ended; prefill tokens and work
        only in row 0; ``num_decode_seqs`` the shape's in row 0, ``rows`` after; context
        ``C + j * rows``; every row emits ``rows`` tokens; KV blocks ``kv`` plus the
        openings of ``j`` steps of the span's cycle; the last row logs ``last``)."""
        spans = np.frombuffer(b"".join(self._spans), _SPAN_DTYPE)
        total = len(self._ends)
        (start, n, prefill, work, seqs, context, rows, running, waiting, last_running,
         last_waiting, kv, last_kv, cycle) = (spans[name] for name in _SPAN_FIELDS)
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
        if self._openings:
            cols["kv_blocks_used"] = _kv_by_row(j, n, kv, cycle, ints(self._openings))
        else:  # every span one row
            cols["kv_blocks_used"] = np.repeat(kv, n)
        cols["kv_blocks_used"][last] = last_kv
        return tuple(cols[name] for name in _COLUMNS)

    def table(self) -> pd.DataFrame:
        """The step log as a DataFrame with the contract's columns."""
        if not len(self):
            return empty_table(STEP_COLUMNS)
        self._pack()
        # by column, so each column's parts are let go once it is built (peak: the table
        # and one column's parts, not the table and all of them)
        parts = [list(c) for c in zip(*self._pieces, strict=True)]
        self._pieces = []
        cols = {}
        for i, name in enumerate(_COLUMNS):
            col = np.concatenate(parts[i]) if len(parts[i]) > 1 else parts[i][0]
            # one piece may be a read-only view of packed bytes, or a run's own array
            cols[name] = col.astype(STEP_COLUMNS[name], copy=len(parts[i]) == 1)
            parts[i] = []
        self._pieces = [tuple(cols[name] for name in _COLUMNS)]  # the log is now one piece
        self._joined = 1
        cols["replica"] = np.full(len(self), self.replica, dtype=np.int64)
        return steps_from_arrays(cols)

    def clear(self) -> None:
        """Drop every step (once ``table()`` holds them, so they are not kept twice)."""
        self._spans, self._ends, self._openings, self._runs = [], [], [], []
        self._pieces, self._joined, self._len = [], 0, 0

    def stats(self) -> StepStats | None:
        """None: the full log's figures are read from ``table()``."""
        return None


def _kv_by_row(j: np.ndarray, n: np.ndarray, kv: np.ndarray, cycle: np.ndarray,
               openings: np.ndarray) -> np.ndarray:
    """KV blocks of each row (``j``: its place in its span; ``n``, ``kv``, ``cycle``: each
    span's rows, first row's blocks and openings, the spans' ``cycle`` openings one after
    another in ``openings``): the span's ``kv`` plus ``j // cycle`` whole cycles and the
    first ``j % cycle`` openings of one more (``kvcache.used_after_steps``, every row at
    once; a span of no cycle adds nothing). No boolean masks: numpy's are slow.
    ``kvcache.blocks_used_after_steps`` is the one-run form: rewritten through this in a
    reverted trial, a 264-step run took 13.0 us against its 3.9
    (``SERVESIM_ACCEL=0 python benchmarks/hot_path_parts.py``), so the two stay apart."""
    at = np.cumsum(cycle) - cycle  # where each span's openings start
    before = np.concatenate(([0], np.cumsum(openings)))  # openings before each place
    whole, part = np.divmod(j, np.repeat(np.maximum(cycle, 1), n))
    base = before[at]
    per_cycle = before[at + cycle] - base  # 0 for a span of no cycle
    out = whole * np.repeat(per_cycle, n)
    out += np.repeat(kv - base, n)
    out += before[np.repeat(at, n) + part]  # part is 0 in a span of no cycle
    return out


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
