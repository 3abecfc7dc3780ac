"""Step logs that keep less than every row: ``[run] step_log = "summary"`` and ``"none"``.

Both take the calls :class:`simulator.steplog.StepLog` takes (the replica does not know
which it has) and give an empty ``table()``; ``stats()`` gives what was kept
(:class:`simulator.metrics_steps.StepStats`).

``SummaryStepLog`` holds a step as its ``start_s``, ``end_s``, ``num_decode_tokens``,
``num_running`` (for the ITL gaps across prefill steps: simulator/itl_gaps.py) and
``kv_blocks_used``, one list each (a fast-forwarded run: its arrays) until ``_FOLD_ROWS``
rows wait, then folds them into the ITL histogram, the busy time and the KV tallies and
drops them. Its memory is the histogram (``NUM_BINS`` x 24 bytes, allocated at the first
ITL sample), at most ``_FOLD_ROWS`` waiting rows plus one run, and the (start, end) of the
steps after the replica's latest finish (none once every request has finished; a run stopped at a
horizon keeps those since the last finish, 16 bytes each). ``len()`` is the rows held,
so the step-row budget of :mod:`simulator.memory_guard` applies to what is kept.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np
import pandas as pd

from simulator.itl_gaps import LastEmit, itl_gaps
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

    __slots__ = ("replica", "_starts", "_ends", "_tokens", "_running", "_kv", "_kv_rows",
                 "_kv_sum", "_kv_peak", "_runs", "_waiting", "_last_finish", "_last_emit",
                 "_stats")

    def __init__(self, replica: int) -> None:
        self.replica = replica
        # steps logged one by one, waiting: a list a column (unzipping a list of 4-tuples
        # into arrays cost ~2.7x as much: python benchmarks/hot_path_parts.py)
        self._starts: list[float] = []
        self._ends: list[float] = []
        self._tokens: list[int] = []
        self._running: list[int] = []
        self._kv: list[int] = []
        # the KV blocks of decode runs' rows (all but each run's last), tallied: how many,
        # their sum and the largest (-1: none)
        self._kv_rows = self._kv_sum = 0
        self._kv_peak = -1
        # runs (start, end, tokens, running, kv), waiting
        self._runs: list[tuple[np.ndarray, ...]] = []
        self._waiting = 0  # rows in the five lists and _runs
        self._last_finish = -np.inf  # end of the latest step that finished a request here
        self._last_emit: LastEmit | None = None  # the latest folded step with decode tokens
        self._stats = StepStats("summary")

    def __len__(self) -> int:
        return self._waiting + len(self._stats.tail_end_s)

    def add(self, start_s: float, end_s: float, shape: StepShape, num_decode_tokens: int,
            num_running: int, queue_len: int, kv_blocks_used: int,
            finished: Iterable[object] = ()) -> None:
        """Record one step (``finished``: the requests it finished)."""
        self._starts.append(start_s)
        self._ends.append(end_s)
        self._tokens.append(num_decode_tokens)
        self._running.append(num_running)
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
        self._running.extend([num_running] * (n - 1))
        self._running.append(last[0])
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
        self._runs.append((starts, ends, num_decode_tokens, num_running, kv_blocks_used))
        self._waiting += len(starts)
        if self._waiting >= _FOLD_ROWS:
            self._fold()

    def _fold(self) -> None:
        """Fold the waiting rows into the figures and drop them."""
        parts = list(self._runs)
        if self._starts:  # after the runs, as before (the moments' sums keep their order)
            parts.append((floats(self._starts), floats(self._ends), ints(self._tokens),
                          ints(self._running), ints(self._kv)))
            self._starts, self._ends, self._tokens, self._running, self._kv = [], [], [], [], []
        self._runs, self._waiting = [], 0
        if not parts:
            return
        start, end, tokens, running, kv = (np.concatenate(list(c))
                                           for c in zip(*parts, strict=True))
        st = self._stats
        st.num_steps += len(start)
        st.first_start_s = min(st.first_start_s, float(start.min()))
        if len(start) > 1 and np.any(np.diff(start) < 0):  # runs were listed before the rows
            order = np.argsort(start, kind="stable")
            values, weights, self._last_emit = itl_gaps(
                start[order], end[order], tokens[order], running[order], self._last_emit)
        else:
            values, weights, self._last_emit = itl_gaps(start, end, tokens, running,
                                                        self._last_emit)
        if len(values):
            if st.itl is None:
                st.itl = ItlHistogram()
            st.itl.add(values, weights)
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
