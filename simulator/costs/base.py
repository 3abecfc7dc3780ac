"""The cost-model interface, and a wrapper that scales any cost model's step times.

A cost model prices one engine step (:class:`~simulator.shapes.StepShape`) in seconds,
or many steps at once (:class:`~simulator.shapes.StepShapes`) for the simulator's
fast-forward over pure decode runs. Both calls must agree to float tolerance; each
model in this package writes its formula once over numbers-or-arrays so they do.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

import numpy as np

from simulator.errors import ConfigError
from simulator.shapes import StepShape, StepShapes

Num = float | np.ndarray  # a cost formula's operand: one step's number or an array over steps


@runtime_checkable
class CostModel(Protocol):
    """Prices engine steps in seconds."""

    def step_time(self, shape: StepShape) -> float:
        """Seconds one step with this shape takes."""
        ...

    def step_times(self, shapes: StepShapes) -> np.ndarray:
        """Seconds for each of many steps (float64 array, same order as ``shapes``)."""
        ...


def check_number(
    field: str, value: object, low: float = 0.0, high: float = math.inf, low_open: bool = False
) -> float:
    """Return ``value`` as a float if it is a finite number in [low, high] (or (low, high]).

    Raises ConfigError naming ``field`` and the value otherwise.
    """
    ok = isinstance(value, int | float) and not isinstance(value, bool)
    number = float(value) if ok else math.nan  # type: ignore[arg-type]
    in_range = (number > low if low_open else number >= low) and number <= high
    if not math.isfinite(number) or not in_range:
        bracket = "(" if low_open else "["
        raise ConfigError(f"{field}={value!r} must be a number in {bracket}{low}, {high}]")
    return number


@dataclass(frozen=True, slots=True)
class ScaledCost:
    """``inner``'s step times multiplied by ``time_scale`` (0.8 = every step 20% faster)."""

    inner: CostModel  # the cost model being scaled
    time_scale: float  # dimensionless multiplier on every step time, > 0

    def __post_init__(self) -> None:
        check_number("time_scale", self.time_scale, low_open=True)

    def step_time(self, shape: StepShape) -> float:
        return self.inner.step_time(shape) * self.time_scale

    def step_times(self, shapes: StepShapes) -> np.ndarray:
        return self.inner.step_times(shapes) * self.time_scale
