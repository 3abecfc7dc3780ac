"""Priority classes of a workload: ``[workload] classes``, drawn per request or read.

Two spellings, in the order of urgency (the first listed is the most urgent)::

    [workload]
    classes = { interactive = 0.3, batch = 0.7 }      # name = share of the requests

    [workload.classes.interactive]                      # or one table per class
    share = 0.3
    ttft_ms = 500                                       # the class's own SLO (slo.py keys)
    tpot_ms = 50
    [workload.classes.batch]
    share = 0.7
    e2el_ms = 600000

Each class gets an int ``priority`` (lower = more urgent, vLLM's convention): its place
in the list (0, 1, ...) unless its table sets ``priority``. The draw is one categorical
draw per request with the scenario's generator, made after every other draw, so a
scenario without classes draws exactly what it drew before. A trace with a
``priority_class`` column (request table contract 1) keeps its own classes: then the
tables give no ``share``, only names, priorities and SLOs.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from simulator.errors import ConfigError
from simulator.slo import SLO

CLASS_COLUMN = "priority_class"
_OWN_KEYS = ("share", "priority")  # a class table's keys that are not SLO targets
_SHARE_TOLERANCE = 1e-9


@dataclass(frozen=True, slots=True)
class RequestClass:
    """One priority class: its name, its priority (lower = more urgent), its share of the
    requests (None: the trace says which request is which) and its own SLO (or None)."""

    name: str
    priority: int  # >= 0; scheduling "priority" serves lower values first
    share: float | None  # fraction of the drawn requests, in (0, 1]
    slo: SLO | None  # targets judged on this class's requests only


@dataclass(frozen=True, slots=True)
class WorkloadClasses:
    """The workload's classes in the order given (most urgent first unless set)."""

    classes: tuple[RequestClass, ...]
    where: str = "workload.classes"

    @property
    def drawn(self) -> bool:
        """Whether the classes are drawn by share (else read from a trace column)."""
        return self.classes[0].share is not None

    def name_of(self, priority: int) -> str:
        """The class name for ``priority`` (``"class<p>"`` for one no table names)."""
        for c in self.classes:
            if c.priority == priority:
                return c.name
        return f"class{priority}"

    def by_priority(self) -> dict[int, RequestClass]:
        """The classes keyed by priority."""
        return {c.priority: c for c in self.classes}

    @classmethod
    def from_value(cls, value: Any, where: str = "workload.classes") -> WorkloadClasses:
        """Validate ``[workload] classes``; errors name ``<where>.<class>.<key>``."""
        if not isinstance(value, Mapping) or not value:
            raise ConfigError(f"{where} = {value!r}: must be a table of class name = share "
                              "or class name = {{ share, priority, <SLO targets> }}")
        out = [_one(str(name), body, place, f"{where}.{name}")
               for place, (name, body) in enumerate(value.items())]
        shares = [c.share for c in out]
        if any(s is None for s in shares) and any(s is not None for s in shares):
            raise ConfigError(f"{where}: give every class a share, or none (a trace's "
                              f"{CLASS_COLUMN} column then says which request is which)")
        total = sum(s for s in shares if s is not None)
        if shares[0] is not None and abs(total - 1.0) > _SHARE_TOLERANCE:
            raise ConfigError(f"{where}: shares sum to {total:g}; they must sum to 1")
        seen: dict[int, str] = {}
        for c in out:
            if c.priority in seen:
                raise ConfigError(f"{where}.{c.name}.priority = {c.priority}: "
                                  f"{seen[c.priority]} has it too")
            seen[c.priority] = c.name
        return cls(tuple(out), where)


def _one(name: str, body: Any, place: int, where: str) -> RequestClass:
    """One class from ``name = share`` or ``name = { share, priority, targets }``."""
    if not isinstance(body, Mapping):
        return RequestClass(name, place, _share(body, f"{where}"), None)
    share = None if "share" not in body else _share(body["share"], f"{where}.share")
    priority = body.get("priority", place)
    if isinstance(priority, bool) or not isinstance(priority, int) or priority < 0:
        raise ConfigError(f"{where}.priority = {priority!r}: must be an integer >= 0")
    targets = {k: v for k, v in body.items() if k not in _OWN_KEYS}
    slo = SLO.from_dict(dict(targets), where) if targets else None
    return RequestClass(name, priority, share, slo)


def _share(value: Any, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) \
            or not math.isfinite(value) or not 0 < value <= 1:
        raise ConfigError(f"{where} = {value!r}: a share must be a number in (0, 1]")
    return float(value)


def add_classes(table: pd.DataFrame, classes: WorkloadClasses,
                rng: np.random.Generator) -> tuple[pd.DataFrame, str]:
    """``table`` with its ``priority_class`` column, and a note saying where it came from.

    Drawn: one ``rng.choice`` over the class priorities with the shares as probabilities
    (a categorical draw, one per row). Read: the table's own column must be there.
    """
    if not classes.drawn:
        if CLASS_COLUMN not in table:
            raise ConfigError(f"{classes.where}: no shares given and the trace has no "
                              f"{CLASS_COLUMN} column; give each class a share")
        return table, f"priority classes read from the trace's {CLASS_COLUMN} column"
    if CLASS_COLUMN in table:
        raise ConfigError(f"{classes.where}: the trace has its own {CLASS_COLUMN} column; "
                          "drop the shares to use it")
    values = np.array([c.priority for c in classes.classes], dtype=np.int64)
    shares = np.array([c.share for c in classes.classes], dtype=np.float64)
    drawn = rng.choice(values, size=len(table), p=shares / shares.sum())
    names = ", ".join(f"{c.name} (class {c.priority}) {c.share:g}" for c in classes.classes)
    return table.assign(**{CLASS_COLUMN: drawn.astype(np.int64)}), \
        f"priority classes drawn by share: {names}"
