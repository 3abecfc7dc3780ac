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

from bisect import bisect_right
from collections.abc import Sequence

import numpy as np

from simulator.costs.base import Num


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
