"""The ``[policy]`` section: a policy from the one registry, built with its typed knobs.

Knob types, defaults and ranges belong to the policy dataclasses listed in
``simulator.policies.POLICIES``; this section only gathers the knobs a scenario gives
(shared ones, and ``[policy.<name>]`` subtables that override them for one policy).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from simulator.errors import ConfigError, did_you_mean
from simulator.policies import POLICIES, Policy, check_knob, knob_rules, make_policy, policy_knobs
from simulator.scenario_fields import check_fields, default_of, spec


@dataclass(frozen=True, slots=True)
class PolicySection:
    """``[policy]``: the batching policy by name, built with its knobs.

    Shared knobs (``max_num_seqs = 256``) apply to every policy that has them; a
    ``[policy.<name>]`` subtable overrides them for that policy. Every knob given is
    checked, also those of other policies (they matter in a sweep over ``name``).
    """

    name: str = spec("continuous")  # a key of simulator.policies.POLICIES
    knobs: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))
    policy: Policy | None = None  # built from name and knobs in __post_init__

    def __post_init__(self) -> None:
        check_fields(self, "policy")
        object.__setattr__(self, "knobs", MappingProxyType(dict(self.knobs)))
        object.__setattr__(self, "policy", make_policy(self.name, **self.knobs))

    @classmethod
    def from_table(cls, table: Mapping[str, Any]) -> PolicySection:
        """Check every knob and subtable of ``[policy]``; keep the knobs of the named policy."""
        table = dict(table)
        name = table.pop("name", default_of(cls, "name"))
        shared: dict[str, Any] = {}
        specific: dict[str, dict[str, Any]] = {}
        for key, value in table.items():
            if key in POLICIES:
                specific[key] = _subtable(key, value)
            elif key in knob_rules():
                shared[key] = check_knob(key, value)
            else:
                raise ConfigError(f"policy.{key}: unknown field; known: "
                                  f"{['name', *knob_rules(), *POLICIES]}")
        if not isinstance(name, str) or name not in POLICIES:
            raise ConfigError(f"policy.name = {name!r}: must be one of {list(POLICIES)}"
                              f"{did_you_mean(name, POLICIES)}")
        own = policy_knobs(name)
        knobs = {k: v for k, v in shared.items() if k in own} | specific.get(name, {})
        return cls(name=name, knobs=knobs)


def _subtable(policy: str, value: Any) -> dict[str, Any]:
    where = f"policy.{policy}"
    if not isinstance(value, Mapping):
        raise ConfigError(f"[{where}] = {value!r}: must be a table of that policy's knobs")
    own = policy_knobs(policy)
    for knob in value:
        if knob not in own:
            raise ConfigError(f"{where}.{knob}: not a knob of the {policy} policy; "
                              f"its knobs: {sorted(own)}")
    return {k: check_knob(k, v, where) for k, v in value.items()}
