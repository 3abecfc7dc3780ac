"""Request records (contract 4) written as requests leave, kept as column arrays.

A simulation used to keep every request's ``Sequence`` (about 140 bytes, plus the Python
numbers it holds) until the end and build the records from them. :class:`RecordColumns`
takes a request when it arrives (``arrive``: its place in arrival order and the time its
client sent it), writes its record when it finishes or is refused (``leave``) and lets
it go, so what a run keeps per finished request is one record row: 9 numbers of 8 bytes,
a status code and a reason reference, 82 bytes once packed. Rows wait as Python numbers,
a list a column, until ``_PACK_ROWS`` of them are packed into arrays. ``table()``
writes the requests still in flight too and puts every row at its place in arrival
order, so the table is exactly
``served_requests.request_records`` of the arrived sequences (tests/test_record_columns.py).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from simulator.number_lists import as_array, ints
from simulator.policies import Sequence
from simulator.records import REQUEST_COLUMNS, empty_table
from simulator.served_requests import STATUS, status_codes

_PACK_ROWS = 4096  # rows kept as Python numbers before they are packed into arrays
# the numeric columns a row holds, in the order of _Waiting's lists (status is derived
# when packing, from the reason and the tokens generated)
_NUMBERS = ("request_id", "arrival_s", "scheduled_s", "first_token_s", "finish_s",
            "prompt_tokens", "output_tokens", "preemptions", "replica")


class _Waiting:
    """Rows written and not yet packed, a list a column (a tuple a row, transposed when
    packed, cost more: the tuples, their GC tracking and the transposition)."""

    __slots__ = ("order", "request_id", "arrival_s", "scheduled_s", "first_token_s", "finish_s",
                 "prompt_tokens", "output_tokens", "preemptions", "replica", "generated",
                 "reason")

    def __init__(self) -> None:
        self.order: list[int] = []
        self.request_id: list[int] = []
        self.arrival_s: list[float] = []  # when the client sent it (the record's arrival_s)
        self.scheduled_s: list[float] = []
        self.first_token_s: list[float] = []
        self.finish_s: list[float] = []
        self.prompt_tokens: list[int] = []
        self.output_tokens: list[int] = []
        self.preemptions: list[int] = []
        self.replica: list[int] = []
        self.generated: list[int] = []
        self.reason: list[str] = []

    def __len__(self) -> int:
        return len(self.order)

    def add(self, seq: Sequence, order: int, sent_s: float) -> None:
        """``seq``'s record (typed: compiled, each field is a native read)."""
        self.order.append(order)
        self.request_id.append(seq.request_id)
        self.arrival_s.append(sent_s)
        self.scheduled_s.append(seq.scheduled_s)
        self.first_token_s.append(seq.first_token_s)
        self.finish_s.append(seq.finish_s)
        self.prompt_tokens.append(seq.prompt_tokens)
        self.output_tokens.append(seq.output_tokens)
        self.preemptions.append(seq.preemptions)
        self.replica.append(seq.replica)
        self.generated.append(seq.num_generated)
        self.reason.append(seq.reason)

    def numbers(self) -> list[list[Any]]:
        """The numeric columns, in the order of ``_NUMBERS``."""
        return [getattr(self, name) for name in _NUMBERS]


class RecordColumns:
    """Request records of one simulation, in arrival order (see the module docstring)."""

    __slots__ = ("_live", "_rows", "_parts", "_arrived")

    def __init__(self) -> None:
        self._live: dict[Sequence, tuple[int, float]] = {}  # in the system: (order, sent_s)
        self._rows = _Waiting()  # left, waiting to be packed
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
        rows = self._rows
        rows.add(seq, order, sent_s)
        if len(rows) >= _PACK_ROWS:
            self._pack()
        return sent_s

    def _pack(self) -> None:
        rows = self._rows
        n = len(rows)
        if not n:
            return
        self._rows = _Waiting()
        part = {"order": ints(rows.order)}
        for name, values in zip(_NUMBERS, rows.numbers(), strict=True):
            part[name] = as_array(values, REQUEST_COLUMNS[name])
        generated = ints(rows.generated)
        reason = np.empty(n, dtype=object)
        reason[:] = rows.reason
        code = status_codes(reason, generated, part["output_tokens"])
        part["status"], part["reason"] = STATUS[code], reason
        self._parts.append(part)

    def table(self) -> pd.DataFrame:
        """Every request that arrived, in arrival order (those still in flight included).

        Called once, at the end: it hands its rows to the table."""
        if not self._arrived:
            return empty_table(REQUEST_COLUMNS)
        for seq, (place, sent) in self._live.items():
            self._rows.add(seq, place, sent)
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
