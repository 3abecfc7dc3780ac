"""Batching policies: pure scheduling logic shared by the simulator and the real engine.

A policy has one public method, ``schedule(state, now) -> Batch | Wait``, plus
``repeats(state, batch)`` which tells the simulator's fast-forward how many identical
pure-decode steps follow. Choose one by name with :func:`make_policy`.

:data:`POLICIES` is the one place a policy is listed: its name, its class and its preset
knobs. Everything else derives from it: the scenario's ``[policy]`` fields and
``[policy.<name>]`` subtables, each knob's type (the class's field annotation), default
and range (its ``spec``; ``__post_init__`` repeats the range). Adding a policy is one line.
"""

from __future__ import annotations

from dataclasses import fields
from typing import Any, Protocol

from simulator.errors import ConfigError
from simulator.policies.continuous import ContinuousPolicy
from simulator.policies.dynamic import DynamicPolicy
from simulator.policies.state import Batch, PaddedGroup, Sequence, ServerState, Wait
from simulator.policies.static import StaticPolicy
from simulator.policies.step import complete, decode_emitters
from simulator.scenario_fields import FieldRule, check_value, rules


class Policy(Protocol):
    """What a replica or the engine needs from a batching policy."""

    def schedule(self, state: ServerState, now: float) -> Batch | Wait: ...

    def repeats(self, state: ServerState, batch: Batch) -> int: ...


POLICIES: dict[str, tuple[type, dict[str, Any]]] = {
    "static": (StaticPolicy, {}),
    "dynamic": (DynamicPolicy, {}),
    "continuous": (ContinuousPolicy, {}),
    "chunked": (ContinuousPolicy, {"chunked_prefill": True}),  # continuous + chunked prefill
}


def caches_prefixes(name: str) -> bool:
    """Whether policy ``name`` can reuse cached prompt prefixes: the continuous family
    (``chunked_prefill`` and all); a padded batch (static, dynamic) prefills every prompt
    in full, and simulator/deployment.py refuses ``kv.prefix_caching`` with it."""
    cls = POLICIES[name][0] if name in POLICIES else None
    return cls is not None and hasattr(cls, "chunked_prefill")


def knob_rules() -> dict[str, tuple[type, FieldRule]]:
    """Every knob of every policy: the first class declaring it and its typed rule."""
    out: dict[str, tuple[type, FieldRule]] = {}
    for cls, _ in POLICIES.values():
        for rule in rules(cls):
            out.setdefault(rule.name, (cls, rule))
    return out


def check_knob(knob: str, value: Any, where: str = "policy") -> Any:
    """``value`` checked as the knob's type and range (its class's own checks), or ConfigError."""
    found = knob_rules().get(knob)
    if found is None:
        raise ConfigError(f"{where}.{knob}: not a policy knob; knobs: {sorted(knob_rules())}")
    cls, rule = found
    checked = check_value(where, value, rule)
    try:
        cls(**{knob: checked})  # the class's __post_init__ holds the range
    except ConfigError as e:
        raise ConfigError(f"{where}.{knob} = {value!r}: {_reason(str(e))}") from None
    return checked


def _reason(message: str) -> str:
    """``must be >= 1`` out of ``policy.max_num_seqs = 0: must be >= 1``."""
    return message.split(": ", 1)[-1]


def policy_knobs(name: str) -> set[str]:
    """The knobs the policy called ``name`` takes."""
    return {f.name for f in fields(_entry(name)[0])}


def _entry(name: str) -> tuple[type, dict[str, Any]]:
    entry = POLICIES.get(name) if isinstance(name, str) else None
    if entry is None:
        raise ConfigError(f"policy.name = {name!r}: unknown; known: {sorted(POLICIES)}")
    return entry


def make_policy(name: str, **knobs: Any) -> Policy:
    """Build the policy called ``name`` with its knobs; unknown names or knobs raise ConfigError."""
    cls, preset = _entry(name)
    known = {f.name for f in fields(cls)}
    unknown = sorted(set(knobs) - known)
    if unknown:
        raise ConfigError(
            f"policy.{unknown[0]}: not a knob of the {name} policy; "
            f"its knobs: {sorted(known)}"
        )
    typed = {r.name: r for r in rules(cls)}
    checked = {k: check_value("policy", v, typed[k]) for k, v in knobs.items()}
    policy: Policy = cls(**{**checked, **preset})
    return policy


__all__ = [
    "Batch", "ContinuousPolicy", "DynamicPolicy", "PaddedGroup", "POLICIES", "Policy",
    "Sequence", "ServerState", "StaticPolicy", "Wait", "complete", "decode_emitters",
    "check_knob", "knob_rules", "make_policy", "policy_knobs",
]
