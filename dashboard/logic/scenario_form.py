"""Scenario dicts <-> the explorer's sidebar values (``Knobs``).

The explorer starts from a scenario (shipped or uploaded), collapses any sweep to one
point, reads the sidebar's values from it (``knobs_from_point``) and writes the user's
choices back into a copy (``apply_knobs``). Every field the sidebar does not show passes
through unchanged: whole sections (``[cost]``, ``[run]``), other keys of the shown
sections (``[kv]`` but ``prefix_caching``), and ``[policy.<name>]`` subtables (a knob the
chosen policy's subtable sets is written there, where it wins). Prefix caching and the
``[speculative]`` section are read and written by ``dashboard.logic.feature_knobs``.
``dashboard.logic.form_fields`` says which fields those are, and which values the form
cannot show at all.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, replace
from typing import Any

from dashboard.logic.feature_knobs import (
    PrefixKnobs,
    SpecKnobs,
    prefix_from_point,
    spec_from_point,
    write_prefix,
    write_spec,
)

# the shipped-scenario helpers live in scenario_files.py; the pages import them from here
from dashboard.logic.scenario_files import (
    DEFAULT_SCENARIO,
    SCENARIOS_DIR,
    collapse,
    load_shipped,
    shipped_scenarios,
    sweep_note,
)
from simulator.errors import ConfigError
from simulator.policies import POLICIES, policy_knobs
from simulator.scenario_types import Scenario, field_rule
from simulator.specs.hardware import get_hardware
from simulator.specs.models import get_model
from simulator.stacks import STACKS, StackSection, apply_stack
from simulator.workload.lengths import Fixed, LogNormal, Uniform

MAX_DEFAULT_REQUESTS = 600  # keeps one explorer run near a second on a 2-core machine
POLICY_LABELS = {
    "static": "static (padded batches)",
    "dynamic": "dynamic (size or timeout)",
    "continuous": "continuous (vLLM v0)",
    "chunked": "continuous + chunked prefill (vLLM v1)",
}
# the knobs of every policy the form has widgets for (a policy shows those it takes)
POLICY_KNOBS = ("batch_size", "max_batch_size", "max_wait_s", "max_num_seqs",
                "max_num_batched_tokens")
# Where the scenario has no default (the field is optional and unset means "none"), the
# form still needs a value to show: these start the widget. Every other default is the
# scenario schema's (simulator.scenario_types.field_rule).
FORM_STARTS: dict[str, Any] = {"workload.concurrency": 32, "slo.ttft_ms": 500.0,
                               "slo.tpot_ms": 50.0}
# [workload] keys a run refuses outside a closed loop, and inside one (WorkloadConfig)
CLOSED_ONLY = ("think_time_s", "client_start", "client_ramp_s", "session_turns")
OPEN_ONLY = ("max_concurrency",)


def policy_label(name: str) -> str:
    """A policy's label in pickers (its name when it has none)."""
    return POLICY_LABELS.get(name, name)


@dataclass(frozen=True, slots=True)
class Knobs:
    """Every value the explorer's sidebar sets (units in the names). No defaults here:
    :func:`default_knobs` gives the scenario schema's."""

    model: str
    gpu: str
    weight_dtype: str
    tp: int
    attention_dp: int  # attention data-parallel ranks a replica (1: none; MoE models)
    policy: str  # a key of simulator.policies.POLICIES
    batch_size: int  # static
    max_batch_size: int  # dynamic
    max_wait_s: float  # dynamic
    max_num_seqs: int  # continuous / chunked
    max_num_batched_tokens: int  # continuous / chunked
    arrival: str  # poisson | gamma | constant | closed | trace
    rate: float  # req/s (open loop; trace: rescale to it)
    cv: float  # gamma only
    concurrency: int  # closed only
    num_requests: int
    prompt: dict[str, Any]  # a length table: {"dist": "lognormal", "mean": ..., ...}
    output: dict[str, Any]
    trace: str | None  # path of a trace giving lengths (and arrivals for "trace")
    rescale_trace: bool  # arrival "trace": rescale its arrivals to ``rate``
    ttft_ms: float
    tpot_ms: float
    percentile: float
    replicas: int
    router: str
    stack: str  # none | a key of simulator.stacks.STACKS
    stack_version: str  # "" = the stack's latest preset, else a release (stack_versions)
    prefix: PrefixKnobs  # [kv] prefix_caching and the workload's prefix knobs
    spec: SpecKnobs  # [speculative]


def policy_settings(point: dict[str, Any], name: str) -> dict[str, Any]:
    """The knobs policy ``name`` would get: shared knobs, then its ``[policy.<name>]`` table."""
    table = point.get("policy", {})
    shared = {k: v for k, v in table.items() if k not in POLICIES and k != "name"}
    return {**shared, **table.get(name, {})}


def default(key: str) -> Any:
    """What the form shows for the scenario field ``key`` when the scenario leaves it out:
    the schema's default (what runs), else the form's FORM_STARTS."""
    value = field_rule(key).default
    return FORM_STARTS[key] if value is None else value


def length_table(dist: Any) -> dict[str, Any]:
    """A length distribution as its scenario table (``{"dist": "lognormal", ...}``)."""
    if isinstance(dist, LogNormal):
        return {"dist": "lognormal", "mean": dist.mean_tokens, "sigma": dist.sigma}
    if isinstance(dist, Fixed):
        return {"dist": "fixed", "tokens": dist.tokens}
    if isinstance(dist, Uniform):
        return {"dist": "uniform", "low": dist.low, "high": dist.high}
    raise ValueError(f"{dist!r}: no table for this length distribution")


def knobs_from_point(point: dict[str, Any]) -> Knobs:
    """Sidebar values from a one-point scenario. An absent field shows what the simulator
    would run (the scenario schema's default, :func:`default`); requests are capped at
    ``MAX_DEFAULT_REQUESTS``."""
    def get(section: str, key: str) -> Any:
        value = point.get(section, {}).get(key)
        return default(f"{section}.{key}") if value is None else value

    wl = point.get("workload", {})
    policy = get("policy", "name")
    settings = policy_settings(point, policy)
    knobs = {k: settings[k] if k in settings else default(
        f"policy.{policy}.{k}" if k in policy_knobs(policy) else f"policy.{k}")
        for k in POLICY_KNOBS}
    knobs["max_wait_s"] = float(knobs["max_wait_s"])
    lengths = Scenario.from_dict({}).workload
    n = wl.get("num_requests") or default("workload.num_requests")
    return Knobs(
        model=get("model", "name"), gpu=get("hardware", "gpu"),
        weight_dtype=get("model", "weight_dtype"), tp=get("hardware", "tp"),
        attention_dp=get("hardware", "attention_dp"), policy=policy,
        **knobs,
        arrival=get("workload", "arrival"), rate=float(get("workload", "rate")),
        cv=float(get("workload", "cv")), concurrency=get("workload", "concurrency"),
        num_requests=min(n, MAX_DEFAULT_REQUESTS),
        prompt=dict(wl.get("prompt") or length_table(lengths.prompt)),
        output=dict(wl.get("output") or length_table(lengths.output)),
        trace=wl.get("trace"),
        rescale_trace=wl.get("arrival") != "trace" or wl.get("rate") is not None,
        ttft_ms=float(get("slo", "ttft_ms")), tpot_ms=float(get("slo", "tpot_ms")),
        percentile=float(get("slo", "percentile")),
        replicas=get("cluster", "replicas"), router=get("cluster", "router"),
        stack=get("stack", "name"),
        stack_version=str(point.get("stack", {}).get("version") or ""),
        prefix=prefix_from_point(point), spec=spec_from_point(point, get("model", "name")),
    )


def default_knobs() -> Knobs:
    """The form for a scenario that sets nothing: the schema's defaults."""
    return knobs_from_point({})


def policy_table(k: Knobs) -> dict[str, Any]:
    """The ``[policy]`` table for the chosen policy with only its own knobs, flattened."""
    own = policy_knobs(k.policy)
    return {"name": k.policy, **{knob: getattr(k, knob) for knob in POLICY_KNOBS
                                 if knob in own}}


def _policy(point: dict[str, Any], k: Knobs) -> dict[str, Any]:
    """The ``[policy]`` table with the form's choices: each knob of the chosen policy goes
    into its ``[policy.<name>]`` subtable when that sets it (the subtable wins), else at the
    top; every other key and subtable is kept."""
    table = copy.deepcopy(point.get("policy", {}))
    own = table.get(k.policy) if isinstance(table.get(k.policy), dict) else {}
    for key, value in policy_table(k).items():
        (own if key in own else table)[key] = value
    return table


def workload_table(point: dict[str, Any], k: Knobs) -> dict[str, Any]:
    """The ``[workload]`` table: arrival process, and lengths from distributions or a trace;
    keys the form does not show (``trace_format``, ``think_time_s``, ...) are kept, but for
    the keys of one kind of loop when the form runs the other (CLOSED_ONLY, OPEN_ONLY)."""
    wl = copy.deepcopy(point.get("workload", {}))
    for key in ("rate", "cv", "concurrency", "prompt", "output", "trace",
                *(OPEN_ONLY if k.arrival == "closed" else CLOSED_ONLY)):
        wl.pop(key, None)
    wl["arrival"] = k.arrival
    if k.arrival not in ("poisson", "constant"):  # a rate schedule is for these only
        wl.pop("rate_schedule", None)
    if k.arrival == "closed":
        wl["concurrency"] = k.concurrency
    elif "rate_schedule" in wl:
        pass  # the schedule's rates run (docs/fleet.md); the form has no widget for them
    elif k.arrival != "trace" or k.rescale_trace:
        wl["rate"] = k.rate
    if k.arrival == "gamma":
        wl["cv"] = k.cv
    if k.trace:
        wl["trace"] = k.trace
    else:
        wl["prompt"], wl["output"] = dict(k.prompt), dict(k.output)
    wl["num_requests"] = k.num_requests
    return wl


def apply_knobs(point: dict[str, Any], k: Knobs) -> dict[str, Any]:
    """A copy of ``point`` with the sidebar's values written in (one point, no lists); every
    field the sidebar does not show is kept as it was."""
    out = copy.deepcopy(point)
    out["model"] = {**out.get("model", {}), "name": k.model, "weight_dtype": k.weight_dtype}
    if k.weight_dtype != point.get("model", {}).get("weight_dtype"):
        out["model"].pop("kv_dtype", None)  # let resolve pick the KV dtype for the new weights
    out["hardware"] = {**out.get("hardware", {}), "gpu": k.gpu, "tp": k.tp}
    if k.attention_dp > 1 or "attention_dp" in out["hardware"]:
        out["hardware"]["attention_dp"] = k.attention_dp
    out["policy"] = _policy(point, k)
    out["workload"] = workload_table(point, k)
    write_prefix(out, point, k.prefix, closed=k.arrival == "closed", trace=bool(k.trace))
    write_spec(out, point, k.spec)
    out["slo"] = {**out.get("slo", {}), "ttft_ms": k.ttft_ms, "tpot_ms": k.tpot_ms,
                  "percentile": k.percentile}
    out["cluster"] = {**out.get("cluster", {}), "replicas": k.replicas, "router": k.router}
    if k.stack != "none" or out.get("stack"):
        latest = k.stack == "none" or k.stack_version in ("", STACKS[k.stack][-1].version)
        out["stack"] = {"name": k.stack, **({} if latest else {"version": k.stack_version})}
    return out


def stack_versions(stack: str, own: str = "") -> list[str]:
    """What the version box offers for ``stack``: its presets, newest first (the first is
    what a scenario without a version runs), and ``own``, a release that takes an earlier
    preset (``trtllm`` 0.13), when the scenario names one; none for ``none``."""
    if stack == "none":
        return []
    versions = [p.version for p in reversed(STACKS[stack])]
    return versions + ([own] if own and own not in versions else [])


def with_stack(point: dict[str, Any], k: Knobs) -> Knobs:
    """``k`` with the policy and knobs the stack ``k.stack`` (at ``k.stack_version``) gives
    ``k.model`` on ``k.gpu``, under what ``point``'s own ``[policy]`` sets (as a run
    resolves them); ``k`` for none."""
    try:
        preset = StackSection(name=k.stack, version=k.stack_version).preset()
    except ConfigError:  # a release this stack has no preset for: its latest
        preset = StackSection(name=k.stack).preset()
    if preset is None:
        return k
    base = {**point, "model": {"name": k.model}, "hardware": {"gpu": k.gpu, "tp": k.tp}}
    applied = apply_stack(base, preset, get_model(k.model), get_hardware(k.gpu),
                          gpus=k.tp * k.attention_dp)
    shown = knobs_from_point({**applied, "policy": applied["policy"]})
    return replace(k, policy=shown.policy,
                   **{knob: getattr(shown, knob) for knob in POLICY_KNOBS})


__all__ = ["DEFAULT_SCENARIO", "SCENARIOS_DIR", "Knobs", "apply_knobs", "collapse",
           "default", "default_knobs", "knobs_from_point", "load_shipped", "policy_label",
           "policy_settings", "policy_table", "shipped_scenarios", "stack_versions",
           "sweep_note", "with_stack", "workload_table"]
