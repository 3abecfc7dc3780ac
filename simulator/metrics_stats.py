"""Distribution statistics for the summary: weighted percentiles and mean/median/std/pQ.

Unweighted statistics are numpy's, exactly as vLLM ``bench serve`` computes them
(``np.mean``, ``np.median``, population ``np.std``, ``np.percentile`` with the default
"linear" method). Weighted statistics treat each weight as a repeat count, so a weighted
figure equals the unweighted one over ``np.repeat(values, weights)`` (docs/metrics.md).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
from numpy.typing import ArrayLike

NAN = float("nan")


def weighted_percentile(values: ArrayLike, weights: ArrayLike, q: float) -> float:
    """The ``q``-th percentile (0..100) of ``values`` where value i occurs ``weights[i]`` times.

    Definition: numpy's "linear" percentile of the multiset. With N = sum(weights), the
    position h = (N - 1) * q / 100 is found in the sorted multiset and the order
    statistics at floor(h) and floor(h) + 1 (0-based) are linearly interpolated. For
    integer weights this equals ``np.percentile(np.repeat(values, weights), q)``; with
    unit weights it equals ``np.percentile(values, q)``. Non-integer weights are allowed
    (positions are then read on the cumulative weight). Zero weights drop a value; an
    empty or all-zero input gives NaN.
    """
    if not 0 <= q <= 100:
        raise ValueError(f"{q=} must be in [0, 100]")
    v = np.asarray(values, dtype=float).ravel()
    w = np.asarray(weights, dtype=float).ravel()
    if v.shape != w.shape:
        raise ValueError(f"values and weights differ in length: {v.size} != {w.size}")
    if np.any(~np.isfinite(w)) or np.any(w < 0):
        raise ValueError("weights must be finite and >= 0")
    keep = w > 0
    v, w = v[keep], w[keep]
    if v.size == 0:
        return NAN
    order = np.argsort(v, kind="stable")
    v, cum = v[order], np.cumsum(w[order])
    h = max(float(cum[-1] - 1.0) * (q / 100.0), 0.0)  # numpy's virtual index, same rounding
    lo = math.floor(h)
    # order statistic k (0-based) is the first value whose cumulative weight exceeds k
    idx = np.searchsorted(cum, [lo, lo + 1], side="right")
    a, b = (float(x) for x in v[np.minimum(idx, v.size - 1)])
    return _lerp(a, b, h - lo)


def _lerp(a: float, b: float, t: float) -> float:
    """Interpolate as numpy's percentile does (from the nearer end), so results match."""
    if a == b:
        return a
    return b - (b - a) * (1.0 - t) if t >= 0.5 else a + (b - a) * t


def percentile_word(q: float) -> str:
    """vLLM's spelling of a percentile in a key: 99 -> '99', 99.9 -> '99.9'."""
    return str(int(q)) if int(q) == q else str(q)


def check_percentiles(percentiles: Sequence[float]) -> tuple[float, ...]:
    """The percentiles as floats, or ValueError naming the one outside [0, 100]."""
    out = tuple(float(q) for q in percentiles)
    for q in out:
        if not 0 <= q <= 100:
            raise ValueError(f"percentile {q!r} must be in [0, 100]")
    return out


def describe(
    values: ArrayLike,
    percentiles: Sequence[float],
    weights: ArrayLike | None = None,
) -> dict[str, float]:
    """``mean``, ``median``, ``std`` and ``p<q>`` for each q, as plain floats (NaN if empty).

    Without weights these are numpy's figures (as vLLM); with weights, those of the
    multiset where each value repeats ``weight`` times (``weighted_percentile``).
    """
    v = np.asarray(values, dtype=float).ravel()
    w = None if weights is None else np.asarray(weights, dtype=float).ravel()
    if w is not None:
        v, w = v[w > 0], w[w > 0]
    if v.size == 0:
        out = {"mean": NAN, "median": NAN, "std": NAN}
        return out | {f"p{percentile_word(q)}": NAN for q in percentiles}
    if w is None:
        out = {"mean": float(np.mean(v)), "median": float(np.median(v)), "std": float(np.std(v))}
        pcts = {f"p{percentile_word(q)}": float(np.percentile(v, q)) for q in percentiles}
        return out | pcts
    mean = float(np.average(v, weights=w))
    out = {
        "mean": mean,
        "median": weighted_percentile(v, w, 50),
        "std": float(np.sqrt(np.average((v - mean) ** 2, weights=w))),
    }
    pcts = {f"p{percentile_word(q)}": weighted_percentile(v, w, q) for q in percentiles}
    return out | pcts


def percentile_of(values: ArrayLike, q: float, weights: ArrayLike | None = None) -> float:
    """One percentile, NaN when there are no values (numpy's for unweighted input)."""
    v = np.asarray(values, dtype=float).ravel()
    if weights is not None:
        return weighted_percentile(v, weights, q)
    return float(np.percentile(v, q)) if v.size else NAN
