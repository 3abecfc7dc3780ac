"""GPU prices for capacity planning: a table of US dollars per GPU-hour.

The defaults live in ``prices.toml`` next to this file, with their date and sources.
``load_prices`` reads that file or another (TOML or JSON with the same keys:
``usd_per_gpu_hour``, ``date``, ``source``); ``parse_price_overrides`` reads the
command-line form ``"h100-sxm=2.49,h200=3.5"``. GPU names go through the hardware
catalogue, so aliases (``h100``) work and unknown names are refused.
"""

from __future__ import annotations

import json
import math
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from simulator.errors import ConfigError
from simulator.specs.hardware import get_hardware

DEFAULT_PRICES = Path(__file__).with_name("prices.toml")


@dataclass(frozen=True, slots=True)
class PriceTable:
    """Dollars per GPU-hour by catalogue GPU name, and where the figures come from."""

    usd_per_gpu_hour: dict[str, float] = field(default_factory=dict)
    date: str = ""  # when the prices were taken (or assumed)
    source: str = ""  # who published them, or "assumed"

    def price(self, gpu: str) -> float | None:
        """$/GPU-hour of ``gpu`` (catalogue name), None when the table has no price."""
        return self.usd_per_gpu_hour.get(gpu)

    def with_overrides(self, overrides: dict[str, float]) -> PriceTable:
        """A copy with some GPUs repriced (``--prices gpu=$/h``)."""
        if not overrides:
            return self
        note = ", ".join(f"{k}={v:g}" for k, v in overrides.items())
        return PriceTable({**self.usd_per_gpu_hour, **overrides}, self.date,
                          f"{self.source}; overridden: {note}")


def _price(where: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not (
            math.isfinite(value) and value >= 0):
        raise ConfigError(f"{where} = {value!r}: must be a number >= 0 (US$ per GPU-hour)")
    return float(value)


def _gpu_name(where: str, name: str) -> str:
    try:
        return get_hardware(name).name
    except ConfigError as e:
        raise ConfigError(f"{where}: {e}") from None


def load_prices(path: str | Path | None = None) -> PriceTable:
    """The price table in ``path`` (TOML or JSON), or the shipped defaults."""
    p = Path(path) if path is not None else DEFAULT_PRICES
    try:
        text = p.read_text()
    except OSError as e:
        raise ConfigError(f"{p}: cannot read prices ({e.strerror})") from e
    try:
        raw = json.loads(text) if p.suffix == ".json" else tomllib.loads(text)
    except (ValueError, tomllib.TOMLDecodeError) as e:
        raise ConfigError(f"{p}: not valid {p.suffix.lstrip('.').upper() or 'TOML'}: {e}") from e
    table = raw.get("usd_per_gpu_hour") if isinstance(raw, dict) else None
    if not isinstance(table, dict):
        raise ConfigError(f"{p}: needs a usd_per_gpu_hour table of gpu = dollars")
    prices = {_gpu_name(f"{p}: {k}", k): _price(f"{p}: usd_per_gpu_hour.{k}", v)
              for k, v in table.items()}
    return PriceTable(prices, str(raw.get("date", "")), str(raw.get("source", str(p))))


def parse_price_overrides(text: str, where: str = "--prices") -> dict[str, float]:
    """``"h100-sxm=2.49,h200=3.5"`` -> ``{"h100-sxm": 2.49, "h200": 3.5}``."""
    out: dict[str, float] = {}
    for piece in text.split(","):
        name, sep, value = piece.partition("=")
        if not sep or not name.strip():
            raise ConfigError(f"{where}: bad piece {piece!r}; expected gpu=dollars_per_hour")
        try:
            number = float(value)
        except ValueError:
            raise ConfigError(f"{where}: bad piece {piece!r}; {value.strip()!r} is not a "
                              "number") from None
        out[_gpu_name(f"{where} {piece!r}", name.strip())] = _price(f"{where} {name}", number)
    return out


def price_table(spec: str | None) -> PriceTable:
    """``--prices``: None (defaults), a file path, or ``gpu=$/h,...`` overrides."""
    if spec is None:
        return load_prices()
    if "=" in spec:
        return load_prices().with_overrides(parse_price_overrides(spec))
    return load_prices(spec)
