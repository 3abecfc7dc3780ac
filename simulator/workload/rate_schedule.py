"""A time-varying open loop: piecewise-constant request rates (``workload.rate_schedule``).

``rate_schedule = { start_s = [0, 600, 1200], rate = [2.0, 10.0, 2.0] }`` asks for
``rate[i]`` requests per second from ``start_s[i]`` until ``start_s[i + 1]``, the last
rate from its start on, until ``num_requests`` have been drawn. A rate may be 0 (no
traffic in that piece) except the last.

Arrivals are a time change of the stationary process (Cinlar's method): with the
cumulative intensity ``L(t) = integral of rate over [0, t]`` (piecewise linear), arrival
``i`` is at ``L^-1(u_i)`` where ``u_i`` are the arrivals of a rate-1 process:

- ``poisson``: ``u_i`` = cumulative sums of i.i.d. Exponential(1) gaps, drawn from the
  scenario's generator: a non-homogeneous Poisson process with intensity ``rate(t)``;
- ``constant``: ``u_i = i`` (i = 0..n-1): evenly spaced within each piece, deterministic.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from simulator.errors import ConfigError

SCHEDULED_ARRIVALS = ("poisson", "constant")


@dataclass(frozen=True, slots=True)
class RateSchedule:
    """Rates in req/s (``rate``) from each start time in s (``start_s``); see the module."""

    start_s: tuple[float, ...]
    rate: tuple[float, ...]

    @classmethod
    def from_table(cls, table: Any, where: str) -> RateSchedule:
        """Check ``{start_s = [...], rate = [...]}`` and build it (ConfigError naming ``where``)."""
        if not isinstance(table, Mapping) or set(table) != {"start_s", "rate"}:
            raise ConfigError(f"{where} = {table!r}: must be a table "
                              "{ start_s = [0, t1, ...], rate = [r0, r1, ...] } (s, req/s)")
        starts, rates = table["start_s"], table["rate"]
        for key, values in (("start_s", starts), ("rate", rates)):
            if not isinstance(values, list) or not values or not all(
                    isinstance(v, int | float) and not isinstance(v, bool)
                    and math.isfinite(v) and v >= 0 for v in values):
                raise ConfigError(f"{where}.{key} = {values!r}: must be a non-empty list of "
                                  "finite numbers >= 0")
        if len(starts) != len(rates):
            raise ConfigError(f"{where}: start_s has {len(starts)} entries and rate "
                              f"{len(rates)}; give one rate per start")
        if starts[0] != 0 or any(b <= a for a, b in zip(starts, starts[1:], strict=False)):
            raise ConfigError(f"{where}.start_s = {starts!r}: must start at 0 and increase")
        if rates[-1] <= 0:
            raise ConfigError(f"{where}.rate = {rates!r}: the last rate must be > 0 "
                              "(it lasts until every request has arrived)")
        return cls(tuple(float(s) for s in starts), tuple(float(r) for r in rates))

    def cumulative(self) -> np.ndarray:
        """``L(start_s[i])``: expected arrivals before each piece starts."""
        starts, rates = np.array(self.start_s), np.array(self.rate)
        return np.concatenate(([0.0], np.cumsum(rates[:-1] * np.diff(starts))))

    def times(self, units: np.ndarray) -> np.ndarray:
        """``L^-1(units)``: the times at which the cumulative intensity reaches ``units``."""
        cum = self.cumulative()
        starts, rates = np.array(self.start_s), np.array(self.rate)
        # the last piece whose L(start) <= u: a piece of rate 0 has the same L(start) as
        # the piece after it, so side="right" never picks it (the last rate is > 0)
        piece = np.searchsorted(cum, units, side="right") - 1
        return starts[piece] + (units - cum[piece]) / rates[piece]

    def arrivals(self, process: str, n: int, rng: np.random.Generator) -> np.ndarray:
        """``n`` arrival times of ``process`` (poisson or constant) following the schedule."""
        if process == "poisson":
            units = np.cumsum(rng.exponential(1.0, size=int(n)))
        elif process == "constant":
            units = np.arange(int(n), dtype=np.float64)
        else:
            raise ConfigError(f"workload.rate_schedule: only for arrival in "
                              f"{list(SCHEDULED_ARRIVALS)}, not {process!r}")
        return self.times(units)

    def mean_rate(self, n: int) -> float:
        """About the mean rate over ``n`` requests (for the span check): ``n / L^-1(n)``."""
        end = float(self.times(np.array([float(n)]))[0])
        return n / end if end > 0 else math.inf
