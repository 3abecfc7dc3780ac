"""Accumulates one replica's step log cheaply, one step or one fast-forwarded run at a time."""

from __future__ import annotations

import numpy as np
import pandas as pd

from simulator.records import STEP_COLUMNS, empty_table, steps_from_arrays
from simulator.shapes import StepShape, StepShapes


class StepLog:
    """Column lists for the step log (contract 4); ``table()`` turns them into a DataFrame."""

    __slots__ = ("replica", "_cols")

    def __init__(self, replica: int) -> None:
        self.replica = replica
        self._cols: dict[str, list[float]] = {c: [] for c in STEP_COLUMNS if c != "replica"}

    def __len__(self) -> int:
        return len(self._cols["start_s"])

    def add(
        self, start_s: float, end_s: float, shape: StepShape, num_decode_tokens: int,
        num_running: int, queue_len: int, kv_blocks_used: int,
    ) -> None:
        """Record one step."""
        c = self._cols
        c["start_s"].append(start_s)
        c["end_s"].append(end_s)
        c["num_prefill_tokens"].append(shape.num_prefill_tokens)
        c["prefill_attn_work"].append(shape.prefill_attn_work)
        c["num_decode_seqs"].append(shape.num_decode_seqs)
        c["decode_context_tokens"].append(shape.decode_context_tokens)
        c["num_decode_tokens"].append(num_decode_tokens)
        c["num_running"].append(num_running)
        c["queue_len"].append(queue_len)
        c["kv_blocks_used"].append(kv_blocks_used)

    def extend(
        self, starts: np.ndarray, ends: np.ndarray, shapes: StepShapes,
        num_decode_tokens: np.ndarray, num_running: np.ndarray, queue_len: np.ndarray,
        kv_blocks_used: np.ndarray,
    ) -> None:
        """Record a run of steps given as arrays (all of the same length)."""
        c = self._cols
        c["start_s"].extend(starts.tolist())
        c["end_s"].extend(ends.tolist())
        c["num_prefill_tokens"].extend(shapes.num_prefill_tokens.tolist())
        c["prefill_attn_work"].extend(shapes.prefill_attn_work.tolist())
        c["num_decode_seqs"].extend(shapes.num_decode_seqs.tolist())
        c["decode_context_tokens"].extend(shapes.decode_context_tokens.tolist())
        c["num_decode_tokens"].extend(num_decode_tokens.tolist())
        c["num_running"].extend(num_running.tolist())
        c["queue_len"].extend(queue_len.tolist())
        c["kv_blocks_used"].extend(kv_blocks_used.tolist())

    def table(self) -> pd.DataFrame:
        """The step log as a DataFrame with the contract's columns."""
        if not len(self):
            return empty_table(STEP_COLUMNS)
        cols = {k: np.asarray(v) for k, v in self._cols.items()}
        cols["replica"] = np.full(len(self), self.replica, dtype=np.int64)
        return steps_from_arrays(cols)
