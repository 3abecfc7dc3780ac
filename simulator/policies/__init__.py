"""Batching policies: pure scheduling logic shared by the simulator and the real engine.

A policy has one public method, ``schedule(state, now) -> Batch | Wait``, plus
``repeats(state, batch)`` which tells the simulator's fast-forward how many identical
pure-decode steps follow. Choose one by name with :func:`make_policy`.
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


def policy_knobs(name: str) -> set[str]:
    """The knobs the policy called ``name`` takes."""
    return {f.name for f in fields(_entry(name)[0])}


def _entry(name: str) -> tuple[type, dict[str, Any]]:
    entry = POLICIES.get(name)
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
    policy: Policy = cls(**{**knobs, **preset})
    return policy


__all__ = [
    "Batch", "ContinuousPolicy", "DynamicPolicy", "PaddedGroup", "POLICIES", "Policy",
    "Sequence", "ServerState", "StaticPolicy", "Wait", "complete", "decode_emitters",
    "make_policy", "policy_knobs",
]
