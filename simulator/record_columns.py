"""Request records (contract 4) written as requests leave, kept as column arrays.

A simulation used to keep every request's ``Sequence`` (about 140 bytes, plus the Python
numbers it holds) until the end and build the records from them. :class:`RecordColumns`
takes a request when it arrives (``arrive``: its place in arrival order and the time its
client sent it), writes its record when it finishes or is refused (``leave``) and lets
it go, so what a run keeps per finished request is one record row: 9 numbers of 8 bytes,
a status code and a reason reference, 82 bytes once packed. Rows wait as tuples until
``_PACK_ROWS`` of them are packed into arrays. ``table()`` writes the requests still in
flight too and puts every row at its place in arrival order, so the table is exactly
``served_requests.request_records`` of the arrived sequences (tests/test_record_columns.py).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from simulator.policies import Sequence
from simulator.records import REQUEST_COLUMNS, empty_table
from simulator.served_requests import STATUS, status_codes

_PACK_ROWS = 4096  # row tuples kept before they are packed into arrays
# a row tuple: arrival order, then these columns (status is derived when packing)
_NUMBERS = ("request_id", "arrival_s", "scheduled_s", "first_token_s", "finish_s",
            "prompt_tokens", "output_tokens", "preemptions", "replica")


def _row(seq: Sequence, order: int, sent_s: float) -> tuple[Any, ...]:
    # typed: compiled, each field is a native read (as Any, a generic getattr each)
    return (order, seq.request_id, sent_s, seq.scheduled_s, seq.first_token_s, seq.finish_s,
            seq.prompt_tokens, seq.output_tokens, seq.preemptions, seq.replica,
            seq.num_generated, seq.reason)


class RecordColumns:
    """Request records of one simulation, in arrival order (see the module docstring)."""

    __slots__ = ("_live", "_rows", "_parts", "_arrived")

    def __init__(self) -> None:
        self._live: dict[Sequence, tuple[int, float]] = {}  # in the system: (order, sent_s)
        self._rows: list[tuple[Any, ...]] = []  # left, waiting to be packed
        self._parts: list[dict[str, np.ndarray]] = []  # packed rows, by column
        self._arrived = 0

    def __len__(self) -> int:
        return self._arrived

    def arrive(self, seq: Sequence, sent_s: float) -> None:
        """``seq`` reached the router; its client sent it at ``sent_s``."""
        self._live[seq] = (self._arrived, sent_s)
        self._arrived += 1

    def leave(self, seq: Sequence) -> float:
        """``seq`` finished or was refused: write its record and let it go; returns the
        time its client sent it (its record's ``arrival_s``)."""
        order, sent_s = self._live.pop(seq)
        self._rows.append(_row(seq, order, sent_s))
        if len(self._rows) >= _PACK_ROWS:
            self._pack()
        return sent_s

    def _pack(self) -> None:
        if not self._rows:
            return
        cols = list(zip(*self._rows, strict=True))
        self._rows = []
        n = len(cols[0])  # fromiter: the same numbers as np.array, ~2.5x faster
        part = {"order": np.fromiter(cols[0], np.int64, n)}
        for name, values in zip(_NUMBERS, cols[1:10], strict=True):
            part[name] = np.fromiter(values, REQUEST_COLUMNS[name], n)
        generated = np.fromiter(cols[10], np.int64, n)
        reason = np.empty(len(generated), dtype=object)
        reason[:] = cols[11]
        code = status_codes(reason, generated, part["output_tokens"])
        part["status"], part["reason"] = STATUS[code], reason
        self._parts.append(part)

    def table(self) -> pd.DataFrame:
        """Every request that arrived, in arrival order (those still in flight included).

        Called once, at the end: it hands its rows to the table."""
        if not self._arrived:
            return empty_table(REQUEST_COLUMNS)
        self._rows.extend(_row(seq, order, sent) for seq, (order, sent) in self._live.items())
        self._live = {}
        self._pack()
        parts, self._parts = self._parts, []
        order = np.concatenate([p.pop("order") for p in parts])
        cols = {}
        for name, dtype in REQUEST_COLUMNS.items():
            col = np.empty(self._arrived, dtype=dtype)
            col[order] = np.concatenate([p.pop(name) for p in parts])
            cols[name] = col
        return pd.DataFrame(cols, copy=False)
