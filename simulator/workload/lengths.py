"""Token-length distributions for prompts and outputs, and their parsing from config.

Each distribution is a frozen dataclass with ``sample(n, rng) -> int64 array`` whose
values are all >= 1. ``length_dist_from_dict`` builds one from a scenario table
such as ``{dist = "lognormal", mean = 800, sigma = 1.0}``. The small ``get_*`` and
``check_keys`` helpers are shared with ``config.py`` so every field error reads
``<where>.<key> = <value>: <what is wrong>``.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from simulator.errors import ConfigError, TraceError, did_you_mean
from simulator.scenario_fields import quote_hint, show

REQUIRED: Any = object()  # sentinel: the key has no default


def check_keys(d: Mapping[str, Any], allowed: Sequence[str], where: str) -> None:
    """Raise ConfigError naming the first key of ``d`` not in ``allowed``."""
    for key in d:
        if key not in allowed:
            raise ConfigError(f"{where}.{key}: unknown key{did_you_mean(key, allowed)}; "
                              f"known keys: {sorted(allowed)}")


def get_number(
    d: Mapping[str, Any],
    key: str,
    where: str,
    default: Any = REQUIRED,
    *,
    integer: bool = False,
    low: float | None = None,
    low_open: bool = False,
    allow_inf: bool = False,
) -> Any:
    """Read a finite number (optionally whole, optionally bounded below) from ``d``;
    ``allow_inf`` also takes +inf (``workload.rate = inf``: every request at once).

    A missing or None value gives ``default`` (unchecked), or an error if REQUIRED.
    """
    value = d.get(key)
    name = f"{where}.{key}"
    if value is None:
        if default is REQUIRED:
            raise ConfigError(f"{name} is required")
        return default
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        quoted = quote_hint(value, "int" if integer else "float")
        raise ConfigError(f"{name} = {show(value)}: must be a number{quoted}")
    if math.isnan(float(value)) or (math.isinf(float(value)) and not allow_inf):
        raise ConfigError(f"{name} = {value}: must be finite")
    if integer:  # strict: 8.0 is a float in TOML, and 1e6 too; neither is taken as a count
        if not isinstance(value, numbers.Integral):
            raise ConfigError(f"{name} = {value!r}: must be a whole number, written as an "
                              "integer (no decimal point or exponent)")
        value = int(value)
    if low is not None and (value <= low if low_open else value < low):
        raise ConfigError(f"{name} = {value}: must be {'>' if low_open else '>='} {low}")
    return value


def get_choice(
    d: Mapping[str, Any], key: str, where: str, choices: Sequence[str], default: Any = REQUIRED
) -> Any:
    """Read a string that must be one of ``choices``."""
    value = d.get(key, default)
    if value is REQUIRED:
        raise ConfigError(f"{where}.{key} is required; one of {list(choices)}")
    if value is not default and value not in choices:
        raise ConfigError(f"{where}.{key} = {show(value)}: must be one of {list(choices)}"
                          f"{did_you_mean(value, choices)}")
    return value


def _ints(x: np.ndarray) -> np.ndarray:
    return np.asarray(x, dtype=np.int64)


@dataclass(frozen=True, slots=True)
class Fixed:
    """Every request has exactly ``tokens`` tokens."""

    tokens: int  # tokens per request, >= 1

    def __post_init__(self) -> None:
        get_number({"tokens": self.tokens}, "tokens", "Fixed", integer=True, low=1)

    def sample(self, n: int, rng: np.random.Generator) -> np.ndarray:
        return np.full(int(n), self.tokens, dtype=np.int64)


@dataclass(frozen=True, slots=True)
class Uniform:
    """Uniform over the whole numbers ``low..high``, both ends included."""

    low: int  # smallest length, tokens, >= 1
    high: int  # largest length, tokens, >= low

    def __post_init__(self) -> None:
        get_number({"low": self.low}, "low", "Uniform", integer=True, low=1)
        get_number({"high": self.high}, "high", "Uniform", integer=True, low=self.low)

    def sample(self, n: int, rng: np.random.Generator) -> np.ndarray:
        return _ints(rng.integers(self.low, self.high + 1, size=int(n)))


@dataclass(frozen=True, slots=True)
class LogNormal:
    """Log-normal lengths with arithmetic mean ``mean_tokens`` and log-space ``sigma``.

    ln(L) ~ Normal(mu, sigma) with mu = ln(mean_tokens) - sigma**2 / 2, so that
    E[L] = exp(mu + sigma**2 / 2) = mean_tokens. Draws are rounded to the nearest
    whole number (half to even) and clipped below at 1; that clip is the only one
    (there is no upper cap: fit the context with ``fit_context``). Rounding and the
    clip move the mean by well under one token for means of tens of tokens or more.
    """

    mean_tokens: float  # arithmetic mean length, tokens, > 0
    sigma: float  # standard deviation of ln(length), >= 0 (0 = always the mean)

    def __post_init__(self) -> None:
        get_number({"mean": self.mean_tokens}, "mean", "LogNormal", low=0, low_open=True)
        get_number({"sigma": self.sigma}, "sigma", "LogNormal", low=0)

    @property
    def mu(self) -> float:
        """Mean of ln(length)."""
        return float(np.log(self.mean_tokens) - self.sigma**2 / 2)

    def sample(self, n: int, rng: np.random.Generator) -> np.ndarray:
        draws = np.rint(rng.lognormal(self.mu, self.sigma, size=int(n)))
        if draws.size and not draws.max() < 2.0**62:
            raise ConfigError(
                f"LogNormal(mean={self.mean_tokens}, sigma={self.sigma}) drew "
                f"{draws.max():.3g} tokens, beyond int64; sigma is too large"
            )
        return np.maximum(draws.astype(np.int64), 1)


@dataclass(frozen=True, slots=True, eq=False)
class Empirical:
    """Resample, with replacement and equal weights, from observed lengths (a trace column)."""

    values: np.ndarray  # observed lengths, int64, all >= 1; stored read-only
    source: str = field(default="")  # where the values came from, for messages

    def __post_init__(self) -> None:
        values = np.array(self.values, dtype=np.float64).ravel()
        where = f"Empirical({self.source or 'values'})"
        if values.size == 0:
            raise ConfigError(f"{where}: no values to resample")
        bad = np.flatnonzero(~np.isfinite(values) | (values < 1) | (values != np.round(values)))
        if bad.size:
            raise ConfigError(
                f"{where}: value [{bad[0]}] = {values[bad[0]]}: must be a whole number >= 1"
            )
        ints = values.astype(np.int64)
        ints.setflags(write=False)
        object.__setattr__(self, "values", ints)

    def sample(self, n: int, rng: np.random.Generator) -> np.ndarray:
        return _ints(rng.choice(self.values, size=int(n), replace=True))


LengthDist = Fixed | Uniform | LogNormal | Empirical

# Chat defaults, fitted to ../shared/traces samples (first 2,000 rows each): mean = the
# sample's arithmetic mean, sigma = the standard deviation of ln(tokens).
#   azure2023_conv.head2000.csv (Azure production chat service, 2023-11-16):
#     ContextTokens mean 1105, median 1032, sigma 0.97; GeneratedTokens mean 265,
#     median 239, sigma 0.91.
#   sharegpt_8k_lengths_llama2.head2000.csv (Llama-2 tokenizer, <= 8k tokens):
#     prompt mean 2272, median 1667, sigma 1.63; output mean 464, median 448, sigma 0.96.
# We take the production trace, rounded: prompt (1100, 1.0), output (265, 0.9).
# ShareGPT's user-shared conversations are longer and more spread: a heavier case.
CHAT_PROMPT = LogNormal(mean_tokens=1100.0, sigma=1.0)
CHAT_OUTPUT = LogNormal(mean_tokens=265.0, sigma=0.9)
DIST_NAMES: tuple[str, ...] = ("fixed", "uniform", "lognormal", "trace")
_KEYS = {
    "fixed": ("dist", "tokens"),
    "uniform": ("dist", "low", "high"),
    "lognormal": ("dist", "mean", "sigma"),
    "trace": ("dist", "path", "column", "format"),
}


def length_dist_from_dict(
    d: Mapping[str, Any], where: str, base_dir: str | Path | None = None
) -> LengthDist:
    """Build a length distribution from a config table; errors name ``<where>.<key>``.

    ``{dist="fixed", tokens=128}``, ``{dist="uniform", low=.., high=..}``,
    ``{dist="lognormal", mean=800, sigma=1.0}`` or
    ``{dist="trace", path="...", column="prompt"|"output", format="auto"}``; a
    relative trace path is taken relative to ``base_dir`` (the scenario's folder).
    """
    if not isinstance(d, Mapping):
        raise ConfigError(
            f"{where} = {d!r}: must be a table such as "
            '{dist = "lognormal", mean = 800, sigma = 1.0}'
        )
    kind = get_choice(d, "dist", where, DIST_NAMES)
    check_keys(d, _KEYS[kind], where)
    if kind == "fixed":
        return Fixed(get_number(d, "tokens", where, integer=True, low=1))
    if kind == "uniform":
        low = get_number(d, "low", where, integer=True, low=1)
        return Uniform(low, get_number(d, "high", where, integer=True, low=low))
    if kind == "lognormal":
        mean = get_number(d, "mean", where, low=0, low_open=True)
        return LogNormal(float(mean), float(get_number(d, "sigma", where, low=0)))
    return _trace_dist(d, where, base_dir)


def _trace_dist(d: Mapping[str, Any], where: str, base_dir: str | Path | None) -> Empirical:
    from simulator.workload.traces import TRACE_FORMATS, load_trace

    path = d.get("path", REQUIRED)
    if path is REQUIRED:
        raise ConfigError(
            f'{where}.path is required with dist = "trace": the trace file whose {where} '
            f'lengths to resample, e.g. {{dist = "trace", path = "t.csv", column = "prompt"}}; '
            "to replay a trace's own requests set workload.trace instead"
        )
    if not isinstance(path, str) or not path:
        raise ConfigError(f"{where}.path = {path!r}: must be the path of a trace file")
    column = get_choice(d, "column", where, ("prompt", "output"))
    fmt = get_choice(d, "format", where, ("auto", *TRACE_FORMATS), default="auto")
    full = Path(base_dir, path) if base_dir is not None else Path(path)
    try:
        loaded = load_trace(full, fmt)
    except TraceError as exc:
        raise ConfigError(f"{where}.path = {path!r}: {exc}") from exc
    values = loaded.table[f"{column}_tokens"].to_numpy()
    return Empirical(values, source=f"{full}:{column}")
