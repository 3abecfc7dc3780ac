"""The step log's figures kept in aggregated form (``[run] step_log = "summary"``).

A run's summary needs three things from its steps (docs/metrics.md): the ITL
distribution (each step's duration weighted by the tokens it emitted after a request's
first), the busy time (utilisation) and the KV blocks in use (KV usage). This module
holds them in memory that does not grow with the number of steps:

- ITL: :class:`ItlHistogram`, ``NUM_BINS`` log-spaced bins over [``LO_MS``, ``HI_MS``)
  plus an underflow and an overflow bin, each with its token count and the smallest and
  largest duration it holds, and the exact weighted mean and M2 (Chan's merge). A
  percentile reads each order statistic's bin and takes ``2 m M / (m + M)`` of the bin's
  ``m = min``, ``M = max``: within ``ITL_REL_ERROR`` (0.1%) of the true order statistic
  (exact when a bin holds one distinct value), and interpolation keeps that bound.
- busy time: the summed durations of the steps that ended at or before the replica's
  latest finish (none of those can lie after the run's window, which ends at the last
  finish), plus the steps after it kept as (start, end) pairs to clip at the end.
- KV: per replica, steps, the sum and the maximum of ``kv_blocks_used``.

Sums are taken in another order than over the full table, so the mean and std of ITL,
the utilisation and the mean KV usage agree with the full step log to float rounding
(relative 1e-12), everything else exactly.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from simulator.metrics_stats import describe

ITL_REL_ERROR = 1e-3
"""Largest relative error of an ITL percentile from the histogram (above ``LO_MS``)."""
LO_MS = 1e-6  # below this (1 ns) one underflow bin: absolute error < 1 ns
HI_MS = 1e12  # log bins reach past this (31 years a step); beyond them one overflow bin
# Bin i >= 1 spans [LO * r^(i-1), LO * r^i) with r = (1 + e) / (1 - e): its largest value
# over its smallest is below r, so 2mM/(m+M) is within (r-1)/(r+1) = e of any value in it.
# e is taken a hair under ITL_REL_ERROR so rounding at the bin edges stays inside it.
_RATIO = (1 + 0.999 * ITL_REL_ERROR) / (1 - 0.999 * ITL_REL_ERROR)
_LOG_RATIO = math.log(_RATIO)
NUM_LOG_BINS = math.ceil(math.log(HI_MS / LO_MS) / _LOG_RATIO)
NUM_BINS = NUM_LOG_BINS + 2
"""Bins of an ITL histogram, whatever the number of steps (20,747)."""


@dataclass(slots=True)
class ItlHistogram:
    """ITL samples (ms, weighted by tokens) in ``NUM_BINS`` bins and exact moments."""

    counts: np.ndarray = field(default_factory=lambda: np.zeros(NUM_BINS, np.int64))
    lo_ms: np.ndarray = field(default_factory=lambda: np.full(NUM_BINS, np.inf))  # bin min
    hi_ms: np.ndarray = field(default_factory=lambda: np.full(NUM_BINS, -np.inf))  # bin max
    weight: int = 0  # tokens counted
    mean_ms: float = 0.0  # weighted mean of the samples
    m2: float = 0.0  # weighted sum of squared deviations from the mean

    def add(self, values_ms: np.ndarray, weights: np.ndarray) -> None:
        """Count ``values_ms[i]`` ``weights[i]`` times (weights > 0, integers)."""
        if values_ms.size == 0:
            return
        idx = bin_index(values_ms)
        np.add.at(self.counts, idx, weights)
        np.minimum.at(self.lo_ms, idx, values_ms)
        np.maximum.at(self.hi_ms, idx, values_ms)
        w = int(weights.sum())
        mean = float(np.average(values_ms, weights=weights))
        m2 = float(np.sum(weights * (values_ms - mean) ** 2))
        self._merge_moments(w, mean, m2)

    def merge(self, other: ItlHistogram) -> None:
        """Add ``other``'s samples to these."""
        self.counts += other.counts
        np.minimum(self.lo_ms, other.lo_ms, out=self.lo_ms)
        np.maximum(self.hi_ms, other.hi_ms, out=self.hi_ms)
        self._merge_moments(other.weight, other.mean_ms, other.m2)

    def _merge_moments(self, w: int, mean: float, m2: float) -> None:
        if w == 0:
            return
        total = self.weight + w
        delta = mean - self.mean_ms
        self.mean_ms += delta * w / total
        self.m2 += m2 + delta * delta * self.weight * w / total
        self.weight = total

    def samples(self) -> tuple[np.ndarray, np.ndarray]:
        """``(values_ms, weights)``: each non-empty bin's representative and token count."""
        keep = self.counts > 0
        m, big_m = self.lo_ms[keep], self.hi_ms[keep]
        with np.errstate(invalid="ignore", divide="ignore"):
            rep = np.where(m == big_m, m, 2.0 * m * big_m / (m + big_m))
        return rep, self.counts[keep]

    def describe(self, percentiles: Sequence[float]) -> dict[str, float]:
        """mean, median, std and p<q> like ``metrics_stats.describe`` of the samples."""
        values, weights = self.samples()
        out = describe(values, percentiles, weights)
        if self.weight:
            out["mean"] = self.mean_ms
            out["std"] = math.sqrt(max(self.m2, 0.0) / self.weight)
        return out


def bin_index(values_ms: np.ndarray) -> np.ndarray:
    """Each value's bin: 0 below ``LO_MS``, then the log bins, last at or above ``HI_MS``."""
    v = np.asarray(values_ms, dtype=float)
    with np.errstate(divide="ignore"):
        i = np.floor(np.log(np.maximum(v, LO_MS * 0.5) / LO_MS) / _LOG_RATIO) + 1
    return np.clip(i, 0, NUM_BINS - 1).astype(np.int64)


@dataclass(slots=True)
class StepStats:
    """What the summary needs from a run's steps, kept without the steps (see module doc).

    ``kept`` is ``"summary"`` (every figure) or ``"none"`` (only the step count: ITL,
    utilisation and KV usage are then not known)."""

    kept: str
    num_steps: int = 0  # steps the replicas ran
    itl: ItlHistogram | None = None  # None: no step emitted a token after a first
    busy_s: float = 0.0  # summed durations of the steps at or before each replica's last finish
    first_start_s: float = math.inf  # the earliest step start
    tail_start_s: np.ndarray = field(default_factory=lambda: np.empty(0))  # steps after
    tail_end_s: np.ndarray = field(default_factory=lambda: np.empty(0))  # the last finish
    kv: dict[int, tuple[int, int, int]] = field(default_factory=dict)  # replica: steps,
    # sum and max of kv_blocks_used

    @staticmethod
    def combine(parts: Sequence[StepStats]) -> StepStats:
        """One run's figures from its replicas' (all of the same ``kept``)."""
        kinds = {p.kept for p in parts}
        if len(kinds) > 1:
            raise ValueError(f"cannot combine step stats of kinds {sorted(kinds)}")
        out = StepStats(kinds.pop() if kinds else "summary")
        for p in parts:
            out.num_steps += p.num_steps
            if p.itl is not None:
                if out.itl is None:
                    out.itl = ItlHistogram()
                out.itl.merge(p.itl)
            out.busy_s += p.busy_s
            out.first_start_s = min(out.first_start_s, p.first_start_s)
            out.kv |= p.kv
        out.tail_start_s = np.concatenate([np.empty(0), *(p.tail_start_s for p in parts)])
        out.tail_end_s = np.concatenate([np.empty(0), *(p.tail_end_s for p in parts)])
        return out

    def busy_fraction(self, start_s: float, duration_s: float, num_replicas: int) -> float:
        """``metrics_resources.busy_fraction`` of the steps these figures describe."""
        if num_replicas < 1:
            raise ValueError(f"{num_replicas=} must be >= 1")
        if len(self.kv) > num_replicas:
            raise ValueError(f"step log has {len(self.kv)} replicas but {num_replicas=}")
        if not (np.isfinite(duration_s) and duration_s > 0):
            return math.nan
        lo = start_s if np.isfinite(start_s) else -np.inf
        hi = lo + duration_s if np.isfinite(lo) else np.inf
        if self.first_start_s < lo:
            raise ValueError(f"a step started at {self.first_start_s} s, before the window "
                             f"({lo} s): the summed busy time cannot be clipped")
        tail = np.clip(self.tail_end_s, lo, hi) - np.clip(self.tail_start_s, lo, hi)
        return (self.busy_s + float(np.sum(tail))) / (duration_s * num_replicas)

    def kv_usage(self, kv_blocks_total: int | dict[int, int]) -> tuple[float, float]:
        """``metrics_resources.kv_usage`` (mean over steps, max) of these figures."""
        totals = kv_blocks_total if isinstance(kv_blocks_total, dict) else {
            r: kv_blocks_total for r in self.kv}
        missing = sorted(set(self.kv) - {int(r) for r in totals})
        if missing:
            raise ValueError(f"kv_blocks_total has no entry for replicas {missing}")
        steps = sum(n for n, _, _ in self.kv.values())
        if steps == 0:
            return math.nan, math.nan
        mean = sum(s / totals[r] for r, (_, s, _) in self.kv.items()) / steps
        peak = max(m / totals[r] for r, (_, _, m) in self.kv.items())
        return float(mean), float(peak)
