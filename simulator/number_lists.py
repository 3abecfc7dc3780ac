"""Lists of Python numbers as numpy arrays, converted by ``struct``.

The step logs and the request records gather Python numbers in lists and pack them into
arrays every few thousand rows. ``np.fromiter`` spends ~200 instructions a value working out
each value's type; ``struct.pack`` of a whole list into native doubles or 64-bit ints,
read back with ``np.frombuffer``, spends tens (``python benchmarks/hot_path_parts.py``;
docs/architecture.md, "The full step log as struct records"). The values are exact: a
Python float is a C double, and an int that does not fit 64 bits is an error, as with
``np.fromiter``. The arrays are read-only views of the packed bytes: for columns that are
concatenated or stored, not for arrays a caller writes into (``np.fromiter`` for those).
"""

from __future__ import annotations

import struct

import numpy as np


def floats(values: list[float]) -> np.ndarray:
    """``values`` as a float64 array."""
    return np.frombuffer(struct.pack(f"@{len(values)}d", *values), np.float64)


def ints(values: list[int]) -> np.ndarray:
    """``values`` as an int64 array."""
    return np.frombuffer(struct.pack(f"@{len(values)}q", *values), np.int64)


def as_array(values: list, dtype: str) -> np.ndarray:
    """``values`` as an array of ``dtype``, ``"float64"`` or ``"int64"``."""
    if dtype == "float64":
        return floats(values)
    if dtype == "int64":
        return ints(values)
    raise ValueError(f"as_array: {dtype!r} is not float64 or int64")
