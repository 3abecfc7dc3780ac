"""Service-level objectives (SLOs): latency targets a scenario sets, validated once.

An ``SLO`` holds up to four latency targets in milliseconds (TTFT, TPOT, ITL, E2E
latency) and the percentile at which the scenario's SLO is judged. The same targets are
used in two ways (docs/metrics.md defines both):

- per request, for goodput (vLLM ``--goodput``): a finished request is *good* when its
  TTFT, TPOT and E2E latency are each within their targets (ITL has no per-request
  value, so it takes no part in goodput);
- per distribution, for ``slo_met``: the ``percentile``-th percentile of each targeted
  metric must be within its target (for example P99 TTFT <= 500 ms).

Two spellings build one: a scenario's ``[slo]`` table (``SLO.from_dict``) and the
command-line string ``"ttft_p99_ms=500,tpot_p99_ms=50"`` (``parse_slo_string``). A key is
either ``<metric>_ms`` (judged at ``percentile``, default 99) or ``<metric>_p<q>_ms``
(judged at ``q``); all targets of one SLO share one percentile. ``mean_queue_ms`` bounds
the *mean* queue time (scheduled - arrival) instead of a percentile: the classic
queueing-theory target (M/D/1 and friends give the mean wait in closed form).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any

from simulator.errors import ConfigError
from simulator.scenario_fields import show, spec

SLO_METRICS = ("ttft", "tpot", "itl", "e2el")
"""Metrics an SLO may target, in the order they are reported."""

PER_REQUEST_METRICS = ("ttft", "tpot", "e2el")
"""Metrics with one value per request, hence usable for goodput (as in vLLM)."""

DEFAULT_PERCENTILE = 99.0

_KEY = re.compile(r"^(ttft|tpot|itl|e2el)(?:_p(\d+(?:\.\d+)?))?_ms$")


def _number(name: str, value: Any) -> float:
    """``value`` as a float, or ConfigError naming ``name`` (bools and strings rejected)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ConfigError(f"{name} = {show(value)}: must be a number")
    if not math.isfinite(value):
        raise ConfigError(f"{name} = {value!r}: must be finite")
    return float(value)


def _target(name: str, value: Any) -> float:
    number = _number(name, value)
    if number <= 0:
        raise ConfigError(f"{name} = {value!r}: must be > 0 (milliseconds)")
    return number


def _percentile(name: str, value: Any) -> float:
    number = _number(name, value)
    if not 0 < number <= 100:
        raise ConfigError(f"{name} = {value!r}: must be in (0, 100]")
    return number


def _ms() -> Any:
    return spec(None, unit="ms", low=0, low_open=True)


@dataclass(frozen=True, slots=True)
class SLO:
    """Latency targets in ms (None: no target) and the percentile they are judged at."""

    ttft_ms: float | None = _ms()  # time to first token
    tpot_ms: float | None = _ms()  # time per output token after the first (vLLM)
    itl_ms: float | None = _ms()  # inter-token latency (percentile check only)
    e2el_ms: float | None = _ms()  # end-to-end latency
    # percentile the scenario's SLO is judged at
    percentile: float = spec(DEFAULT_PERCENTILE, low=0, low_open=True, high=100)
    mean_queue_ms: float | None = _ms()  # mean queue time (scheduled - arrival)

    def __post_init__(self) -> None:
        for metric in SLO_METRICS:
            value = getattr(self, f"{metric}_ms")
            if value is not None:
                object.__setattr__(self, f"{metric}_ms", _target(f"slo.{metric}_ms", value))
        if self.mean_queue_ms is not None:
            object.__setattr__(self, "mean_queue_ms",
                               _target("slo.mean_queue_ms", self.mean_queue_ms))
        object.__setattr__(self, "percentile", _percentile("slo.percentile", self.percentile))

    @property
    def targets_ms(self) -> dict[str, float]:
        """The targets that are set, by metric name (``ttft``, ``tpot``, ``itl``, ``e2el``)."""
        found = {m: getattr(self, f"{m}_ms") for m in SLO_METRICS}
        return {m: v for m, v in found.items() if v is not None}

    @property
    def per_request_targets_ms(self) -> dict[str, float]:
        """The targets that goodput checks request by request (all but ITL)."""
        return {m: v for m, v in self.targets_ms.items() if m in PER_REQUEST_METRICS}

    def as_dict(self) -> dict[str, float]:
        """The SLO as a ``from_dict``-able dict (unset targets left out)."""
        out = {f"{m}_ms": v for m, v in self.targets_ms.items()}
        if self.mean_queue_ms is not None:
            out["mean_queue_ms"] = self.mean_queue_ms
        out["percentile"] = self.percentile
        return out

    @classmethod
    def from_dict(cls, d: dict[str, Any], where: str = "slo") -> SLO:
        """Build from a scenario table; errors name ``<where>.<key>`` and the bad value."""
        if not isinstance(d, dict):
            raise ConfigError(f"{where} must be a table of targets, got {d!r}")
        targets: dict[str, float] = {}
        percentile: tuple[str, float] | None = None  # (key that set it, value)
        mean_queue_ms: float | None = None
        for key, value in d.items():
            name = f"{where}.{key}"
            if key == "mean_queue_ms":
                mean_queue_ms = _target(name, value)
                continue
            if key == "percentile":
                q = _percentile(name, value)
            else:
                match = _KEY.match(str(key))
                if match is None:
                    raise ConfigError(
                        f"{name}: unknown SLO key; expected one of "
                        f"{[f'{m}_ms' for m in SLO_METRICS]}, '<metric>_p<q>_ms', "
                        "'mean_queue_ms' or 'percentile'"
                    )
                metric, q_text = match.groups()
                if metric in targets:
                    raise ConfigError(f"{name}: a second target for {metric}")
                targets[metric] = _target(name, value)
                if q_text is None:
                    continue
                q = _percentile(name, float(q_text))
            if percentile is not None and percentile[1] != q:
                raise ConfigError(
                    f"{name}: percentile {q:g} disagrees with {where}.{percentile[0]} "
                    f"({percentile[1]:g}); one SLO is judged at one percentile"
                )
            percentile = (str(key), q)
        q_final = DEFAULT_PERCENTILE if percentile is None else percentile[1]
        return cls(**{f"{m}_ms": v for m, v in targets.items()}, percentile=q_final,
                   mean_queue_ms=mean_queue_ms)


def parse_slo_string(text: str, where: str = "--slo") -> SLO:
    """Parse ``"ttft_p99_ms=500,tpot_p99_ms=50"`` (comma-separated ``key=number``).

    Keys are those of ``SLO.from_dict``. A malformed piece raises ConfigError quoting it.
    """
    if not text.strip():
        raise ConfigError(f"{where}: empty SLO string; expected e.g. 'ttft_p99_ms=500'")
    d: dict[str, float] = {}
    for piece in text.split(","):
        key, sep, value_text = piece.partition("=")
        key = key.strip()
        if not sep or not key:
            raise ConfigError(f"{where}: bad piece {piece!r}; expected key=number")
        try:
            value = float(value_text)
        except ValueError:
            raise ConfigError(
                f"{where}: bad piece {piece!r}; {value_text.strip()!r} is not a number"
            ) from None
        if key in d:
            raise ConfigError(f"{where}: bad piece {piece!r}; {key} given twice")
        d[key] = value
    return SLO.from_dict(d, where=where)
