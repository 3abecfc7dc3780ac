"""Accumulates one replica's step log cheaply, one step or one fast-forwarded run at a time.

A single step (or a short run) is row tuples appended with their row numbers; a long
fast-forwarded run is kept as the arrays it was planned with. Every ``_FLUSH_ROWS`` rows
the tuples are packed into column arrays (a row tuple of ten boxed numbers costs about
470 bytes, a packed row 88), so a long run's memory grows by the packed size.
``table()`` puts the rows at their row numbers and the runs, concatenated in order,
everywhere else.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from simulator.records import STEP_COLUMNS, empty_table, steps_from_arrays
from simulator.shapes import StepShape, StepShapes

# The columns in the order of a row tuple and of a run's arrays (``replica`` is added last).
_COLUMNS = [c for c in STEP_COLUMNS if c != "replica"]
_SHORT_RUN = 16  # runs up to this many steps are logged as rows
_FLUSH_ROWS = 4096  # row tuples kept before they are packed into column arrays


class StepLog:
    """A replica's step log (contract 4) in parts; ``table()`` turns them into a DataFrame."""

    __slots__ = ("replica", "_rows", "_row_at", "_packed", "_runs", "_len")

    def __init__(self, replica: int) -> None:
        self.replica = replica
        self._rows: list[tuple[float, ...]] = []  # single steps, in the column order
        self._row_at: list[int] = []  # each single step's row number in the log
        # rows packed so far: (their row numbers, their columns in the column order)
        self._packed: list[tuple[np.ndarray, tuple[np.ndarray, ...]]] = []
        self._runs: list[tuple[np.ndarray, ...]] = []  # runs' columns, in the column order
        self._len = 0

    def __len__(self) -> int:
        return self._len

    def add(
        self, start_s: float, end_s: float, shape: StepShape, num_decode_tokens: int,
        num_running: int, queue_len: int, kv_blocks_used: int,
    ) -> None:
        """Record one step."""
        self._rows.append((
            start_s, end_s, shape.num_prefill_tokens, shape.prefill_attn_work,
            shape.num_decode_seqs, shape.decode_context_tokens, num_decode_tokens,
            num_running, queue_len, kv_blocks_used,
        ))
        self._row_at.append(self._len)
        self._len += 1
        if len(self._rows) >= _FLUSH_ROWS:
            self._pack()

    def extend(
        self, starts: np.ndarray, ends: np.ndarray, shapes: StepShapes,
        num_decode_tokens: np.ndarray, num_running: np.ndarray, queue_len: np.ndarray,
        kv_blocks_used: np.ndarray,
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
        runs = list(zip(*self._runs, strict=True)) if self._runs else [()] * len(_COLUMNS)
        cols = {}
        for i, name in enumerate(_COLUMNS):
            col = np.empty(len(self), dtype=STEP_COLUMNS[name])
            if self._packed:
                col[at] = np.concatenate([c[i] for _, c in self._packed])
            if self._runs:
                col[in_runs] = np.concatenate(runs[i])
            cols[name] = col
        cols["replica"] = np.full(len(self), self.replica, dtype=np.int64)
        return steps_from_arrays(cols)

    def clear(self) -> None:
        """Drop every step (once ``table()`` holds them, so they are not kept twice)."""
        self._rows, self._row_at, self._packed, self._runs, self._len = [], [], [], [], 0
