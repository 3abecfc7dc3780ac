"""Pickling a frozen dataclass by rebuilding it from its fields.

A frozen dataclass compiled by mypyc (simulator/accel.py) cannot be unpickled the usual
way: the pickle module restores its attributes one by one, which the frozen class's
``__setattr__`` refuses (``FrozenInstanceError``), so a sweep's worker process could not
send its result back. Such a class defines ``__reduce__`` as :func:`reduce_frozen`: the
copy is built by calling the class with the same field values, checks included.
"""

from __future__ import annotations

from dataclasses import fields
from typing import Any


def rebuild(cls: type, values: dict[str, Any]) -> Any:
    """``cls(**values)``: the other half of :func:`reduce_frozen`."""
    return cls(**values)


def reduce_frozen(obj: Any) -> tuple[Any, tuple[type, dict[str, Any]]]:
    """``obj.__reduce__()`` for a frozen dataclass: rebuild from its init fields."""
    return rebuild, (type(obj), {f.name: getattr(obj, f.name) for f in fields(obj) if f.init})
