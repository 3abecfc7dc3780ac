"""Candidate deployments for a plan: the scenario's lists (as in a sweep) and flag lists.

A candidate is one scenario point with the rate and replica count left to the planner.
Names that are not in the catalogues (an unknown GPU, policy or dtype) are errors that
name the bad value; a deployment that cannot run (the weights do not fit, a tensor
parallelism the device cannot do) is kept as an infeasible candidate with its reason.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from simulator.deployment import resolve
from simulator.errors import ConfigError
from simulator.policies import policy_knobs
from simulator.scenario import expand_sweep
from simulator.scenario_types import Scenario
from simulator.specs.dtypes import weight_dtype_bytes
from simulator.specs.hardware import get_hardware

AXES: dict[str, tuple[str, str]] = {
    # flag / keyword -> scenario field
    "gpus": ("hardware", "gpu"),
    "tp": ("hardware", "tp"),
    "attention_dp": ("hardware", "attention_dp"),
    "dtypes": ("model", "weight_dtype"),
    "policies": ("policy", "name"),
    "max_num_seqs": ("policy", "max_num_seqs"),
    "chunk": ("policy", "max_num_batched_tokens"),
}
_CHECKS: dict[str, Callable[[Any], object]] = {
    "gpus": get_hardware, "dtypes": weight_dtype_bytes, "policies": policy_knobs}
PLANNED = (("workload", "rate"), ("workload", "num_requests"), ("cluster", "replicas"))


@dataclass(frozen=True, slots=True)
class Candidate:
    """One deployment to size: its identity and its scenario point (one replica)."""

    name: str  # "h100-sxm x1 bf16 chunked max_num_seqs=128"
    labels: dict[str, Any]  # gpu, tp, weight_dtype, policy and any other swept field
    point: dict[str, Any]  # the scenario point; rate and replicas are set per simulation
    gpu: str  # catalogue name
    tp: int  # GPUs per replica
    infeasible: str | None = None  # why it cannot run at all, None when it can


def _apply_axes(raw: dict[str, Any], axes: dict[str, list[Any]]) -> dict[str, Any]:
    out = copy.deepcopy(raw)
    for flag, values in axes.items():
        if flag not in AXES:
            raise ConfigError(f"unknown candidate axis {flag!r}; known: {sorted(AXES)}")
        if not values:
            continue
        check = _CHECKS.get(flag)
        for value in values:
            if check is not None:
                try:
                    check(value)
                except ConfigError as e:
                    raise ConfigError(f"--{flag.replace('_', '-')} {value!r}: {e}") from None
        section, key = AXES[flag]
        out.setdefault(section, {})[key] = list(values)
    return out


def build_candidates(raw: dict[str, Any], axes: dict[str, list[Any]] | None = None,
                     ) -> list[Candidate]:
    """Every candidate of the scenario ``raw`` with the flag ``axes`` applied."""
    raw = _apply_axes(raw, axes or {})
    for section, key in PLANNED:  # the planner sets these; a list there is not a candidate
        if isinstance(raw.get(section, {}).get(key), list):
            raw[section][key] = raw[section][key][0]
    out, errors = [], []
    for labels, point in expand_sweep(raw):
        cand = _candidate(labels, point)
        out.append(cand)
        if cand.infeasible is not None:
            errors.append(cand.infeasible)
    if out and len(errors) == len(out):
        raise ConfigError(f"no candidate can run; first: {out[0].name}: {errors[0]}")
    return out


def _candidate(labels: dict[str, Any], point: dict[str, Any]) -> Candidate:
    sc = Scenario.from_dict(point)  # a field of the wrong type is an error, not a candidate
    if sc.workload.arrival == "closed":
        raise ConfigError("workload.arrival = 'closed': a plan sizes for a request rate; use "
                          "an open-loop arrival (poisson, gamma, constant or trace)")
    if sc.workload.rate_schedule is not None:
        peak = max(sc.workload.rate_schedule.rate)
        raise ConfigError("workload.rate_schedule: a plan sizes for one steady request rate, "
                          "not a schedule over time; remove the schedule from the scenario "
                          f"and plan at its peak (--rate {peak:g}), or size an autoscaled "
                          "fleet for it with servesim run (docs/fleet.md)")
    ident = {"gpu": sc.hardware_spec().name, "tp": sc.hardware.tp,
             **({"attention_dp": sc.hardware.attention_dp} if sc.hardware.attention_dp > 1
                else {}),
             "weight_dtype": sc.model.weight_dtype, "policy": sc.policy.name}
    extra = {k: v for k, v in labels.items()
             if k not in ("gpu", "tp", "attention_dp", "weight_dtype", "policy")}
    dp = sc.hardware.attention_dp  # attention data parallel: a replica is dp x tp GPUs
    name = (f"{ident['gpu']} x{sc.hardware.gpus}{f' attention-DP{dp}' if dp > 1 else ''} "
            f"{ident['weight_dtype']} {sc.policy.name}")
    name += "".join(f" {k}={v}" for k, v in extra.items())
    reason = None
    try:
        resolve(sc)
    except ValueError as e:  # ConfigError or CapacityError: this deployment cannot run
        reason = str(e)
    return Candidate(name, {**ident, **extra}, point, sc.hardware_spec().name,
                     sc.hardware.gpus, reason)
