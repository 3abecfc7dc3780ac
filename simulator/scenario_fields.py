"""Strict typed fields: one declaration per scenario field (type, range, unit, default).

A scenario section is a frozen dataclass whose fields are declared with :func:`spec`;
the field's annotation gives its type and the metadata its range and unit. Checking a
value is strict, because TOML already has types and a value of the wrong one is a
mistake, never something to coerce::

    bool   only true / false (not "false", not 0 or 1)
    int    only an integer (not 8.7, not 8.0, not "8", not true)
    float  an integer or a float, finite (not "0.5", not true); a field declared with
           ``allow_inf=True`` (only ``workload.rate``: "all at once") also takes +inf
    str    only a string

:func:`check_fields` checks every field of a section from its ``__post_init__``, so a
section is valid however it is built; :func:`build_section` builds one from a TOML table
(unknown keys refused); :func:`rules` lists a dataclass's fields as :class:`FieldRule` so tests
can enumerate every field of the schema. Errors read ``<where>.<field> = <value>: must
be ...``.
"""

from __future__ import annotations

import math
import numbers
import types
import typing
from collections.abc import Mapping
from dataclasses import MISSING, dataclass, field, fields
from typing import Any, Literal, TypeVar, get_args, get_origin, get_type_hints

from simulator.errors import ConfigError, did_you_mean

KINDS = ("bool", "int", "float", "str")
T = TypeVar("T")


def spec(default: Any, *, unit: str = "", low: float | None = None,
         high: float | None = None, low_open: bool = False,
         choices: tuple[str, ...] | None = None, allow_inf: bool = False) -> Any:
    """A dataclass field with its range and unit in the metadata (``low_open``: > low;
    ``allow_inf``: +inf is a value, not an error)."""
    meta = {"unit": unit, "low": low, "high": high, "low_open": low_open, "choices": choices,
            "allow_inf": allow_inf}
    return field(default=default, metadata=meta)


@dataclass(frozen=True, slots=True)
class FieldRule:
    """What one field accepts: its kind, whether None is allowed, its range and unit."""

    name: str  # field name
    kind: str  # one of KINDS, or "other" (a table checked by its own class)
    optional: bool  # None (leaving the field out) is allowed
    low: float | None = None  # smallest value (or exclusive bound with low_open)
    high: float | None = None  # largest value, inclusive
    low_open: bool = False  # the low bound is exclusive
    unit: str = ""  # unit of a number: "s", "tokens", "GB", "req/s"
    choices: tuple[str, ...] | None = None  # allowed strings
    allow_inf: bool = False  # +inf is accepted (a float field meaning "unbounded")

    def describe(self) -> str:
        """``an integer >= 1 (tokens)``: what the field must be, for error messages."""
        if self.choices is not None:
            return f"one of {list(self.choices)}"
        text = {"bool": "true or false", "int": "an integer", "float": "a number",
                "str": "a string", "other": "a table"}[self.kind]
        bounds = []
        if self.low is not None:
            bounds.append(f"{'>' if self.low_open else '>='} {self.low:g}")
        if self.high is not None:
            bounds.append(f"<= {self.high:g}")
        text += (" " + " and ".join(bounds)) if bounds else ""
        return text + (f" ({self.unit})" if self.unit else "")


def _kind(annotation: Any) -> tuple[str, bool, tuple[str, ...] | None]:
    """(kind, optional, literal choices) of a type annotation."""
    optional = False
    if get_origin(annotation) in (typing.Union, types.UnionType):
        args = [a for a in get_args(annotation) if a is not type(None)]
        optional = len(args) < len(get_args(annotation))
        annotation = args[0] if len(args) == 1 else annotation
    if get_origin(annotation) is Literal:
        return "str", optional, tuple(str(a) for a in get_args(annotation))
    names = {bool: "bool", int: "int", float: "float", str: "str"}
    return names.get(annotation, "other"), optional, None


def rules(cls: type) -> list[FieldRule]:
    """Every public field of the dataclass ``cls`` as a FieldRule (type from its annotation)."""
    hints = get_type_hints(cls)
    out = []
    for f in fields(cls):
        if f.name.startswith("_") or not f.init:
            continue
        kind, optional, literal = _kind(hints[f.name])
        meta = f.metadata
        choices = meta.get("choices") or literal
        out.append(FieldRule(f.name, kind, optional, meta.get("low"), meta.get("high"),
                             bool(meta.get("low_open")), meta.get("unit", ""), choices,
                             bool(meta.get("allow_inf"))))
    return out


def check_value(where: str, value: Any, rule: FieldRule) -> Any:
    """``value`` if it is of the rule's kind and in its range (ints as int, floats as float)."""
    name = f"{where}.{rule.name}" if where else rule.name
    if value is None and rule.optional:
        return None
    if not _is_kind(value, rule.kind):
        raise ConfigError(f"{name} = {show(value)}: must be {rule.describe()}{_hint(value, rule)}")
    if rule.kind in ("int", "float"):
        number = float(value)
        too_low = rule.low is not None and (number <= rule.low if rule.low_open
                                            else number < rule.low)
        too_high = rule.high is not None and number > rule.high
        infinite = math.isinf(number) and not (rule.allow_inf and number > 0)
        if math.isnan(number) or infinite or too_low or too_high:
            raise ConfigError(f"{name} = {show(value)}: must be {rule.describe()}")
        return int(value) if rule.kind == "int" else number
    if rule.choices is not None and value not in rule.choices:
        raise ConfigError(f"{name} = {show(value)}: must be {rule.describe()}"
                          f"{did_you_mean(value, rule.choices)}")
    return value


def show(value: Any) -> str:
    """A value as the scenario file spells it: ``true`` (not ``True``), ``'16'``, ``8.7``."""
    if isinstance(value, bool):
        return "true" if value else "false"
    return repr(value)


def _is_kind(value: Any, kind: str) -> bool:
    if kind == "bool":
        return isinstance(value, bool)
    if isinstance(value, bool):
        return False
    if kind == "int":
        return isinstance(value, numbers.Integral)
    if kind == "float":
        return isinstance(value, numbers.Real)
    if kind == "str":
        return isinstance(value, str)
    return True


def _hint(value: Any, rule: FieldRule) -> str:
    """A word on the usual slip: a quoted number or boolean, a float for an integer (a
    word that is neither, ``abc`` for a count, gets no hint: quotes are not its fault)."""
    quoted = quote_hint(value, rule.kind)
    if quoted:
        return quoted
    if rule.kind == "int" and isinstance(value, float):
        return "; write a whole number without a decimal point or exponent"
    return ""


def quote_hint(value: Any, kind: str) -> str:
    """``"; write it without quotes"`` when ``value`` is a string that unquoted would be of
    ``kind`` ("int", "float" or "bool"; an integer serves a float), else ``""``."""
    got = _unquoted_kind(value.strip()) if isinstance(value, str) else None
    return "; write it without quotes" if got == kind or (got, kind) == ("int", "float") \
        else ""


def _unquoted_kind(text: str) -> str | None:
    """The kind ``text`` would be as a TOML value without quotes: "int", "float" or "bool",
    else None."""
    if text in ("true", "false"):
        return "bool"
    try:
        number = float(text)
    except ValueError:
        return None
    return "int" if number.is_integer() and text.lstrip("+-").isdigit() else "float"


def build_section(cls: type[T], table: Any, where: str) -> T:
    """Check the TOML ``table`` against the dataclass ``cls`` and build it."""
    if table is None:
        table = {}
    if not isinstance(table, Mapping):
        raise ConfigError(f"[{where}] must be a table, got {table!r}")
    by_name = {r.name: r for r in rules(cls)}
    for key in table:
        if key not in by_name:
            raise ConfigError(f"{where}.{key}: unknown field{did_you_mean(key, by_name)}; "
                              f"known: {list(by_name)}")
    return cls(**table)


def check_fields(obj: Any, where: str) -> None:
    """Check every field of the frozen dataclass ``obj`` in place (from its __post_init__);
    an int given to a float field is stored as a float."""
    for rule in rules(type(obj)):
        value = check_value(where, getattr(obj, rule.name), rule)
        object.__setattr__(obj, rule.name, value)


def default_of(cls: type, name: str) -> Any:
    """The declared default of field ``name`` of the dataclass ``cls``."""
    for f in fields(cls):
        if f.name == name:
            return None if f.default is MISSING else f.default
    raise KeyError(name)


@dataclass(frozen=True, slots=True)
class FieldInfo:
    """One field as a form shows it: its rule and the value a scenario that leaves it out
    runs with (built by ``simulator.scenario_types.field_rule``)."""

    key: str  # "section.field" (or "policy.<name>.<knob>"), as schema_rules names it
    rule: FieldRule  # kind, range, unit, choices
    default: Any  # what runs when the scenario leaves the field out (None: nothing)

    @property
    def choices(self) -> tuple[str, ...] | None:
        """The allowed strings, or None."""
        return self.rule.choices

    @property
    def low(self) -> float | None:
        """The smallest value (exclusive when ``low_open``), or None."""
        return self.rule.low

    @property
    def high(self) -> float | None:
        """The largest value (inclusive), or None."""
        return self.rule.high

    @property
    def low_open(self) -> bool:
        """Whether ``low`` itself is refused."""
        return self.rule.low_open

    @property
    def unit(self) -> str:
        """The unit of a number ("" when none)."""
        return self.rule.unit
