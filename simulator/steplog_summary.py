"""Step logs that keep less than every row: ``[run] step_log = "summary"`` and ``"none"``.

Both take the calls :class:`simulator.steplog.StepLog` takes (the replica does not know
which it has) and give an empty ``table()``; ``stats()`` gives what was kept
(:class:`simulator.metrics_steps.StepStats`).

``SummaryStepLog`` holds a step as its ``start_s``, ``end_s``, ``num_decode_tokens`` (less
those carried across steps that emitted none, whose gaps it keeps apart as they come:
simulator/itl_gaps.py) and ``kv_blocks_used``, one list each (a fast-forwarded run: its
arrays) until ``_FOLD_ROWS`` rows wait, then folds them into the ITL histogram, the busy
time and the KV tallies and drops them. Its memory is the histogram (``NUM_BINS`` x 24
bytes, allocated at the first ITL sample), at most ``_FOLD_ROWS`` waiting rows plus one
run, and the (start, end) of the steps after the replica's latest finish (none once every
request has finished; a run stopped at a horizon keeps those since the last finish, 16
bytes each). ``len()`` is the rows held, so the step-row budget of
:mod:`simulator.memory_guard` applies to what is kept.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

import numpy as np
import pandas as pd

from simulator.itl_gaps import carried_gaps
from simulator.kvcache import used_after_steps, used_sum_after_steps
from simulator.metrics_steps import ItlHistogram, StepStats
from simulator.number_lists import floats, ints
from simulator.records import STEP_COLUMNS, empty_table
from simulator.shapes import StepShape, StepShapes

_FOLD_ROWS = 8192  # waiting rows folded at once (numpy's per-call cost spread over them)


def _last_finish(finished: Iterable[Any]) -> float | None:
    """The latest ``finish_s`` among finished sequences (None when there are none)."""
    times = [s.finish_s for s in finished]
    return max(times) if times else None


class NoStepLog:
    """``step_log = "none"``: counts steps, keeps nothing else."""

    __slots__ = ("replica", "num_steps")

    def __init__(self, replica: int) -> None:
        self.replica = replica
        self.num_steps = 0

    def __len__(self) -> int:
        return 0

    def add(self, start_s: float, end_s: float, shape: StepShape, num_decode_tokens: int,
            num_running: int, queue_len: int, kv_blocks_used: int,
            finished: Iterable[object] = ()) -> None:
        """Count one step."""
        self.num_steps += 1

    def add_decode_rows(self, start_s: float, ends: list[float], shape: StepShape, rows: int,
                        num_running: int, queue_len: int, kv_used: int, openings: list[int],
                        last: tuple[int, int, int], finished: Iterable[object] = ()) -> None:
        """Count a decode run's steps (see :meth:`simulator.steplog.StepLog.add_decode_rows`)."""
        self.num_steps += len(ends)

    def extend(self, starts: np.ndarray, ends: np.ndarray, shapes: StepShapes,
               num_decode_tokens: np.ndarray, num_running: np.ndarray, queue_len: np.ndarray,
               kv_blocks_used: np.ndarray, finished: Iterable[object] = ()) -> None:
        """Count a run of steps."""
        self.num_steps += len(starts)

    def table(self) -> pd.DataFrame:
        """No rows are kept."""
        return empty_table(STEP_COLUMNS)

    def clear(self) -> None:
        """Nothing to drop."""

    def stats(self) -> StepStats:
        """Only the step count."""
        return StepStats("none", num_steps=self.num_steps)


class SummaryStepLog:
    """``step_log = "summary"``: the step log folded into :class:`StepStats` as it grows."""

    __slots__ = ("replica", "_starts", "_ends", "_tokens", "_kv", "_kv_rows", "_kv_sum",
                 "_kv_peak", "_runs", "_waiting", "_last_finish", "_emit_end", "_emit_tokens",
                 "_emit_running", "_gap_ms", "_gap_tokens", "_stats")

    def __init__(self, replica: int) -> None:
        self.replica = replica
        # steps logged one by one, waiting: a list a column (unzipping a list of 4-tuples
        # into arrays cost ~2.7x as much: python benchmarks/hot_path_parts.py)
        self._starts: list[float] = []
        self._ends: list[float] = []
        self._tokens: list[int] = []  # each step's tokens that keep its own duration as ITL
        self._kv: list[int] = []
        # the KV blocks of decode runs' rows (all but each run's last), tallied: how many,
        # their sum and the largest (-1: none)
        self._kv_rows = self._kv_sum = 0
        self._kv_peak = -1
        self._runs: list[tuple[np.ndarray, ...]] = []  # runs (start, end, tokens, kv), waiting
        self._waiting = 0  # rows in the four lists and _runs
        self._last_finish = -np.inf  # end of the latest step that finished a request here
        # the latest step that emitted tokens after a first (its end, its tokens and the
        # requests running after it), and the ITL gaps of tokens carried across the steps
        # that emitted none since (simulator/itl_gaps.py), waiting
        self._emit_end: float = -math.inf
        self._emit_tokens: int = 0
        self._emit_running: int = 0
        self._gap_ms: list[float] = []
        self._gap_tokens: list[int] = []
        self._stats = StepStats("summary")

    def __len__(self) -> int:
        return self._waiting + len(self._stats.tail_end_s)

    def add(self, start_s: float, end_s: float, shape: StepShape, num_decode_tokens: int,
            num_running: int, queue_len: int, kv_blocks_used: int,
            finished: Iterable[object] = ()) -> None:
        """Record one step (``finished``: the requests it finished)."""
        self._starts.append(start_s)
        self._ends.append(end_s)
        own = num_decode_tokens
        if own > 0:
            if start_s > self._emit_end:  # steps that emitted nothing came between
                own -= self._carry(start_s, end_s, num_decode_tokens)
            self._emit_end = end_s
            self._emit_tokens = num_decode_tokens
            self._emit_running = num_running
        self._tokens.append(own)
        self._kv.append(kv_blocks_used)
        if finished:
            self._last_finish = end_s
        self._waiting += 1
        if self._waiting >= _FOLD_ROWS:
            self._fold()

    def add_decode_rows(self, start_s: float, ends: list[float], shape: StepShape, rows: int,
                        num_running: int, queue_len: int, kv_used: int, openings: list[int],
                        last: tuple[int, int, int], finished: Iterable[object] = ()) -> None:
        """Record a decode run's steps, as :meth:`add` one by one would (see
        :meth:`simulator.steplog.StepLog.add_decode_rows`). The KV blocks of every row but
        the last are tallied at once (their count, sum and the largest, which is the
        last of them: a run only opens blocks), not listed."""
        n = len(ends)
        if self._waiting + n >= _FOLD_ROWS:  # fold after the very row add() would fold at
            kv = used_after_steps(openings, n - 1, kv_used) if openings else [kv_used] * n
            for i in range(n):
                mid = i < n - 1
                self.add(ends[i - 1] if i else start_s, ends[i], shape, rows,
                         num_running if mid else last[0], queue_len if mid else last[1],
                         kv[i] if mid else last[2], () if mid else finished)
            return
        self._starts.append(start_s)
        self._starts.extend(ends[:n - 1])
        self._ends.extend(ends)
        self._tokens.extend([rows] * n)
        if rows > 0:
            if start_s > self._emit_end:  # steps that emitted nothing came between
                self._tokens[-n] -= self._carry(start_s, ends[0], rows)
            self._emit_end = ends[n - 1]
            self._emit_tokens = rows
            self._emit_running = last[0]
        if n > 1:
            total, largest = used_sum_after_steps(openings, n - 2, kv_used)
            self._kv_rows += n - 1
            self._kv_sum += total
            self._kv_peak = max(self._kv_peak, largest)
        self._kv.append(last[2])
        if finished:
            self._last_finish = ends[n - 1]
        self._waiting += n
        if self._waiting >= _FOLD_ROWS:
            self._fold()

    def extend(self, starts: np.ndarray, ends: np.ndarray, shapes: StepShapes,
               num_decode_tokens: np.ndarray, num_running: np.ndarray, queue_len: np.ndarray,
               kv_blocks_used: np.ndarray, finished: Iterable[object] = ()) -> None:
        """Record a run of steps given as arrays (``finished``: the requests it finished)."""
        last = _last_finish(finished)
        if last is not None:
            self._last_finish = max(self._last_finish, last)
        own = num_decode_tokens
        n = len(starts)
        if n and bool(np.all(own > 0)):  # a decode run (back to back, every step emits): only
            first = int(own[0])  # its first step can come after steps that emitted nothing
            if float(starts[0]) > self._emit_end:
                carried = self._carry(float(starts[0]), float(ends[0]), first)
                if carried:
                    own = own.copy()
                    own[0] = first - carried
            self._emit_end = float(ends[n - 1])
            self._emit_tokens = int(num_decode_tokens[n - 1])
            self._emit_running = int(num_running[n - 1])
        elif n:
            last_emit = ((self._emit_end, self._emit_tokens, self._emit_running)
                         if self._emit_tokens > 0 else None)
            own, gap_ms, gap_tokens, after = carried_gaps(starts, ends, num_decode_tokens,
                                                          num_running, last_emit)
            if after is not None:
                self._emit_end, self._emit_tokens, self._emit_running = after
            self._gap_ms.extend(gap_ms.tolist())
            self._gap_tokens.extend(gap_tokens.tolist())
        self._runs.append((starts, ends, own, kv_blocks_used))
        self._waiting += len(starts)
        if self._waiting >= _FOLD_ROWS:
            self._fold()

    def _carry(self, start_s: float, end_s: float, tokens: int) -> int:
        """Of a step's ``tokens`` (> 0) from ``start_s`` to ``end_s``, which starts after the
        last step that emitted any ended, those carried across the steps between (their
        gap, since that end, is kept to fold); as :func:`simulator.itl_gaps.carried_gaps`
        counts them."""
        carried = tokens if tokens < self._emit_tokens else self._emit_tokens
        if self._emit_running < carried:
            carried = self._emit_running
        if carried > 0:
            self._gap_ms.append((end_s - self._emit_end) * 1000.0)
            self._gap_tokens.append(carried)
        return carried

    def _fold(self) -> None:
        """Fold the waiting rows into the figures and drop them."""
        parts = list(self._runs)
        if self._starts:  # after the runs, as before (the moments' sums keep their order)
            parts.append((floats(self._starts), floats(self._ends), ints(self._tokens),
                          ints(self._kv)))
            self._starts, self._ends, self._tokens, self._kv = [], [], [], []
        self._runs, self._waiting = [], 0
        if not parts:
            return
        start, end, tokens, kv = (np.concatenate(list(c)) for c in zip(*parts, strict=True))
        st = self._stats
        st.num_steps += len(start)
        st.first_start_s = min(st.first_start_s, float(start.min()))
        emitting = tokens > 0
        if emitting.any() or self._gap_ms:
            if st.itl is None:
                st.itl = ItlHistogram()
            st.itl.add(np.concatenate(((end - start)[emitting] * 1000.0, floats(self._gap_ms))),
                       np.concatenate((tokens[emitting], ints(self._gap_tokens))))
            self._gap_ms, self._gap_tokens = [], []
        n, total, peak = st.kv.get(self.replica, (0, 0, 0))
        st.kv[self.replica] = (n + len(kv) + self._kv_rows, total + int(kv.sum()) + self._kv_sum,
                               max(peak, int(kv.max()), self._kv_peak))
        self._kv_rows = self._kv_sum = 0
        self._kv_peak = -1
        # steps (old tail included) that ended by the latest finish lie inside the window
        start = np.concatenate((st.tail_start_s, start))
        end = np.concatenate((st.tail_end_s, end))
        done = end <= self._last_finish
        st.busy_s += float(np.sum(end[done] - start[done]))
        st.tail_start_s, st.tail_end_s = start[~done], end[~done]

    def table(self) -> pd.DataFrame:
        """No rows are kept: the contract's columns, empty."""
        return empty_table(STEP_COLUMNS)

    def clear(self) -> None:
        """Nothing is kept twice."""

    def stats(self) -> StepStats:
        """The figures of every step so far."""
        self._fold()
        return self._stats
