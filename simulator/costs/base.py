"""The cost-model interface, and a wrapper that scales any cost model's step times.

A cost model prices one engine step (:class:`~simulator.shapes.StepShape`) in seconds,
or many steps at once (:class:`~simulator.shapes.StepShapes`) for the simulator's
fast-forward over pure decode runs. Both calls must agree to float tolerance; each
model in this package writes its formula once over numbers-or-arrays so they do.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

import numpy as np

from simulator.errors import ConfigError
from simulator.shapes import StepShape, StepShapes

Num = float | np.ndarray  # a cost formula's operand: one step's number or an array over steps

DecodePricer = Callable[[int, int, int], float]
"""``price(rows, context_tokens, num_finished)``: seconds of a pure-decode step, exactly
``step_time(StepShape(num_decode_seqs=rows, decode_context_tokens=context_tokens,
num_finished=num_finished))``, without building the shape (the simulator's hot loop)."""


@runtime_checkable
class CostModel(Protocol):
    """Prices engine steps in seconds."""

    def step_time(self, shape: StepShape) -> float:
        """Seconds one step with this shape takes."""
        ...

    def step_times(self, shapes: StepShapes) -> np.ndarray:
        """Seconds for each of many steps (float64 array, same order as ``shapes``)."""
        ...


def decode_pricer(cost: CostModel) -> DecodePricer | None:
    """``cost``'s exact scalar pure-decode pricer, or None when it has none (the simulator
    then prices decode runs with ``step_times``, as before). A model offers one with a
    ``decode_pricer()`` method; a wrapper's returns None when its inner model has none."""
    method = getattr(cost, "decode_pricer", None)
    return method() if method is not None else None


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

    def decode_pricer(self) -> DecodePricer | None:
        inner, scale = decode_pricer(self.inner), self.time_scale
        if inner is None:
            return None
        return lambda d, c, f: inner(d, c, f) * scale


class JitterCost:
    """``inner``'s step times, each multiplied by a random factor of mean 1 and CV ``cv``.

    Real steps vary: on a shared CPU one step shape repeats within a CV of ~10%, on a GPU
    ~1%. A deterministic cost model gets means right but tails (P90/P99 of ITL, TTFT)
    too narrow. The factor is lognormal (positive, mean exactly 1, so mean latencies do
    not move), drawn independently per step from the model's own seeded generator: one
    simulation is reproducible, and two simulations never share a stream.
    """

    def __init__(self, inner: CostModel, cv: float, seed: int = 0) -> None:
        self.inner = inner
        self.cv = check_number("jitter_cv", cv, high=1.0)
        self._sigma = math.sqrt(math.log1p(self.cv ** 2))
        self._rng = np.random.default_rng(seed)

    def _factors(self, n: int) -> np.ndarray:
        s = self._sigma
        return self._rng.lognormal(-s * s / 2, s, n) if s > 0 else np.ones(n)

    def step_time(self, shape: StepShape) -> float:
        return self.inner.step_time(shape) * float(self._factors(1)[0])

    def step_times(self, shapes: StepShapes) -> np.ndarray:
        return self.inner.step_times(shapes) * self._factors(len(shapes))


class RowsFactorCost:
    """``inner``'s time for steps with decode rows, times a factor that depends on how many.

    Real engines are not smooth in the decode batch: on one CPU thread a 3-row step took
    40% longer than a 4-row one (the GEMM kernel chosen for M = 3), and GPU engines pad
    decode batches to CUDA-graph sizes (a batch of 3 costs a batch of 4). The factors are
    measured (calibrate/fit.py: median measured / predicted per row count) at ``rows``,
    interpolated linearly between them, and 1 beyond the largest measured count.
    Prefill-only steps are not changed.
    """

    def __init__(self, inner: CostModel, rows: tuple[int, ...], factors: tuple[float, ...]
                 ) -> None:
        if len(rows) != len(factors) or not rows or list(rows) != sorted(set(rows)):
            raise ConfigError(f"decode_rows_factor: row counts {rows} must be distinct and "
                              "match the factors")
        for r, f in zip(rows, factors, strict=True):
            check_number(f"decode_rows_factor[{r}]", f, low=0.2, high=5.0)
        self.inner = inner
        self.rows = np.asarray(rows, dtype=np.float64)
        self.factors = np.asarray(factors, dtype=np.float64)

    @classmethod
    def from_mapping(cls, inner: CostModel, factors: Mapping[str, float]) -> RowsFactorCost:
        """From a profile's ``decode_rows_factor`` (JSON: row count as a string -> factor)."""
        try:
            items = sorted((int(k), float(v)) for k, v in factors.items())
        except (TypeError, ValueError) as e:
            raise ConfigError(f"decode_rows_factor: keys must be row counts and values "
                              f"numbers ({e})") from e
        if any(r < 1 for r, _ in items):
            raise ConfigError("decode_rows_factor: row counts must be >= 1")
        return cls(inner, tuple(r for r, _ in items), tuple(f for _, f in items))

    def _factor(self, d: np.ndarray) -> np.ndarray:
        f = np.interp(d, self.rows, self.factors, right=1.0)
        return np.where(d > 0, f, 1.0)

    def step_time(self, shape: StepShape) -> float:
        f = self._factor(np.array([float(shape.num_decode_seqs)]))[0]
        return self.inner.step_time(shape) * float(f)

    def step_times(self, shapes: StepShapes) -> np.ndarray:
        return self.inner.step_times(shapes) * self._factor(
            shapes.num_decode_seqs.astype(np.float64))
