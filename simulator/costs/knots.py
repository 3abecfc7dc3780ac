"""Piecewise-linear curves over measured knots, evaluated bit for bit alike on one float
and on arrays.

The measured curves the roofline prior reads (all-reduce latency by message size:
simulator/costs/collectives.py; a MoE layer's latency by token count:
simulator/costs/moe_tables.py) are knots ``x_0 < ... < x_n`` with values ``y_i``::

    y(x) = y_0                                               x <  x_0
    y(x) = y_i + (x - x_i) (y_{i+1} - y_i) / (x_{i+1} - x_i)  x_i <= x <= x_{i+1}
    y(x) = y_n + (x - x_n) (y_n - y_{n-1}) / (x_n - x_{n-1})  x >  x_n (the last slope)

The simulator prices one step at a time in plain floats and many at once in numpy
arrays, and the two must agree to the last bit (a test checks it): :func:`at_scalar`
computes what ``np.interp`` computes (numpy's ``arr_interp``: a knot hit exactly returns
its value, else ``slope * (x - x_j) + y_j``) without numpy's microsecond per call.
"""

from __future__ import annotations

import json
from bisect import bisect_right
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from simulator.costs.base import Num
from simulator.errors import ConfigError


def slopes(x: Sequence[float], y: Sequence[float]) -> tuple[float, ...]:
    """``(y_{i+1} - y_i) / (x_{i+1} - x_i)`` per segment, as ``np.interp`` computes them."""
    return tuple((y[i + 1] - y[i]) / (x[i + 1] - x[i]) for i in range(len(x) - 1))


def increasing(x: Sequence[float]) -> bool:
    """Whether the knots strictly increase (and there are at least two)."""
    return len(x) >= 2 and all(a < b for a, b in zip(x, x[1:], strict=False))


def at_scalar(v: float, x: Sequence[float], y: Sequence[float],
              slope: Sequence[float]) -> float:
    """The curve at one float ``v`` (``slope``: :func:`slopes` of the knots)."""
    if v > x[-1]:
        return y[-1] + (v - x[-1]) * slope[-1]
    if v < x[0]:
        return y[0]
    if v != v:  # NaN
        return v
    j = bisect_right(x, v) - 1
    if j == len(x) - 1 or x[j] == v:
        return y[j]
    return slope[j] * (v - x[j]) + y[j]


def at_array(v: Num, x: Sequence[float], y: Sequence[float]) -> Num:
    """The curve at an array (or a numpy scalar) ``v``: ``np.interp`` inside, the last
    slope past the last knot."""
    last = (y[-1] - y[-2]) / (x[-1] - x[-2])
    inside = np.interp(v, x, y)
    beyond = y[-1] + (np.asarray(v) - x[-1]) * last
    return np.where(np.asarray(v) > x[-1], beyond, inside)


def seconds(v: Num, x: Sequence[float], y: Sequence[float], slope: Sequence[float]) -> Num:
    """A curve of microseconds at ``v`` (a float: :func:`at_scalar`; an array:
    :func:`at_array`), in seconds."""
    if isinstance(v, float):
        return at_scalar(v, x, y, slope) * 1e-6
    out = at_array(v, x, y) * 1e-6
    return float(out) if np.ndim(out) == 0 else out


def load_curves(path: Path, what: str) -> list[dict[str, Any]]:
    """The ``curves`` list of a shipped curve file; a clear error naming ``path`` else."""
    try:
        data = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as e:
        raise ConfigError(f"{path}: cannot read the {what} ({e})") from e
    if not isinstance(data, dict) or not isinstance(data.get("curves"), list):
        raise ConfigError(f"{path}: expected an object with a 'curves' list")
    return list(data["curves"])
