"""What the explorer's form can show: each widget's choices and range, the values a scenario
point holds that no widget can show (refused, naming the field), and the fields the form
does not show at all (carried through unchanged and listed under the sidebar).

Choices, ranges, units and defaults are the scenario schema's
(``simulator.scenario_types.field_rule``); the form adds only what it says it adds: the
catalogue's model/GPU/dtype lists, TP_CHOICES, a cap on requests per run, and the length
widgets' ranges (length tables are not scalar schema fields).

A widget shows what runs: a scenario is seeded into the widgets only when every value the
form controls is one a widget can hold. Anything else in the point stays as it was
(``apply_knobs`` writes only the form's fields) and ``carried_fields`` names it.
"""

from __future__ import annotations

from typing import Any

from dashboard.logic.feature_knobs import draft_layer_bounds
from dashboard.logic.scenario_form import (
    MAX_DEFAULT_REQUESTS,
    POLICY_KNOBS,
    Knobs,
    collapse,
    load_shipped,
    policy_settings,
    shipped_scenarios,
)
from simulator.policies import POLICIES, policy_knobs
from simulator.scenario_fields import FieldInfo, check_value
from simulator.scenario_types import field_rule
from simulator.specs import HARDWARE, MODELS, WEIGHT_DTYPE_BYTES

MAX_REQUESTS = 20_000  # the form's cap on one run (keeps it to seconds); not a scenario limit
TP_CHOICES = (1, 2, 4, 8)  # GPUs per replica on one node (the scenario takes any integer >= 1)
# attention data-parallel ranks a replica (a MoE model's; the scenario takes any integer >= 1)
ATTENTION_DP_CHOICES = (1, 2, 4, 8)
# knob -> (section, key) of the scenario field it shows (policy knobs: see schema_key)
FIELDS = {
    "model": ("model", "name"), "weight_dtype": ("model", "weight_dtype"),
    "gpu": ("hardware", "gpu"), "tp": ("hardware", "tp"),
    "attention_dp": ("hardware", "attention_dp"), "policy": ("policy", "name"),
    "replicas": ("cluster", "replicas"), "router": ("cluster", "router"),
    "stack": ("stack", "name"),
    "arrival": ("workload", "arrival"), "rate": ("workload", "rate"),
    "cv": ("workload", "cv"), "concurrency": ("workload", "concurrency"),
    "num_requests": ("workload", "num_requests"), "ttft_ms": ("slo", "ttft_ms"),
    "tpot_ms": ("slo", "tpot_ms"), "percentile": ("slo", "percentile"),
    "prefix_caching": ("kv", "prefix_caching"),
    "system_prompt_tokens": ("workload", "system_prompt_tokens"),
    "system_prompt_share": ("workload", "system_prompt_share"),
    "session_turns": ("workload", "session_turns"),
    "spec_num_tokens": ("speculative", "num_tokens"),
    "spec_acceptance": ("speculative", "acceptance"),
    "spec_draft": ("speculative", "draft"), "spec_draft_layers": ("speculative", "draft_layers"),
}
LENGTH_KINDS = ("lognormal", "fixed", "uniform")  # the length distributions with widgets
# The length tables are not scalar schema fields (simulator/workload/lengths.py checks them):
# param -> (smallest, largest) the widgets offer.
LENGTH_RANGES: dict[str, tuple[int, int] | tuple[float, float]] = {
    "tokens": (1, 200_000), "low": (1, 200_000), "high": (1, 200_000),
    "mean": (1.0, 200_000.0), "sigma": (0.0, 3.0),
}
SHOWN = {(s, k) for s, k in FIELDS.values()} | {("workload", "prompt"), ("workload", "output"),
                                                 ("workload", "trace"),
                                                 ("speculative", "acceptance_counts")}


def schema_key(knob: str, policy: str | None = None) -> str:
    """The schema's name of the field behind ``knob`` (a policy knob: that policy's own)."""
    if knob in POLICY_KNOBS:
        return f"policy.{policy}.{knob}" if policy and knob in policy_knobs(policy) \
            else f"policy.{knob}"
    return ".".join(FIELDS[knob])


def form_field(knob: str, policy: str | None = None) -> FieldInfo:
    """The scenario schema's rule and default for ``knob`` (simulator.scenario_types)."""
    return field_rule(schema_key(knob, policy))


def choices(knob: str) -> tuple[Any, ...]:
    """What ``knob``'s select box offers: the catalogue's names for model, GPU and dtype (the
    GPU list without "cpu"), the form's TP_CHOICES and ATTENTION_DP_CHOICES, else the
    schema's choices."""
    catalogue: dict[str, tuple[Any, ...]] = {
        "model": tuple(MODELS), "gpu": tuple(g for g in HARDWARE if g != "cpu"),
        "weight_dtype": tuple(WEIGHT_DTYPE_BYTES), "tp": TP_CHOICES,
        "attention_dp": ATTENTION_DP_CHOICES}
    if knob in catalogue:
        return catalogue[knob]
    found = form_field(knob).choices
    if found is None:
        raise KeyError(f"{knob}: not a choice widget")
    return found


def bounds(knob: str, policy: str | None = None) -> tuple[Any, Any]:
    """``knob``'s widget range (low, high) from the schema, as ints for integer fields and
    floats else; None where the schema has no bound or its low bound is exclusive (the value
    is then checked by :func:`problem`). Requests are capped at MAX_REQUESTS."""
    info = form_field(knob, policy)
    cast = int if info.rule.kind == "int" else float
    low = None if info.low is None or info.low_open else cast(info.low)
    high = MAX_REQUESTS if knob == "num_requests" else (
        None if info.high is None else cast(info.high))
    return low, high


def problem(knob: str, value: Any, policy: str | None = None,
            where: str | None = None) -> str | None:
    """Why ``value`` cannot be ``knob``'s value by the scenario schema, naming the field
    (in ``where``, the table it came from: by default the schema's section)."""
    key = schema_key(knob, policy)
    try:
        check_value(where or key.rpartition(".")[0], value, field_rule(key).rule)
    except ValueError as e:
        return str(e)
    return None


def _check(name: str, value: Any, knob: str, policy: str | None = None) -> str | None:
    """Why ``value`` (the scenario's field ``name``) cannot sit in ``knob``'s widget."""
    if knob in ("model", "gpu", "weight_dtype", "tp", "policy"):
        offered = choices(knob)
        return None if value in offered else f"{name} = {value!r}: the form offers {list(offered)}"
    if knob == "spec_draft" and value not in MODELS:
        return f"{name} = {value!r}: the form offers catalogue models ({', '.join(MODELS)})"
    # num_requests above MAX_REQUESTS is no problem: capped, and said so (form_notes)
    return problem(knob, value, policy, name.rpartition(".")[0])


def _draft_layers_check(point: dict[str, Any]) -> str | None:
    """``speculative.draft_layers`` beyond the target's layers (no widget can hold it)."""
    layers = point.get("speculative", {}).get("draft_layers")
    model = point.get("model", {}).get("name", field_rule("model.name").default)
    if not isinstance(layers, int) or model not in MODELS:
        return None
    low, high = draft_layer_bounds(model)
    return None if low <= layers <= high else (
        f"speculative.draft_layers = {layers}: {model} has {high + 1} layers; a draft takes "
        f"{low} to {high} of them")


def _length_check(name: str, value: Any, param: str) -> str | None:
    low, high = LENGTH_RANGES[param]
    if isinstance(value, bool) or not isinstance(value, int | float):
        return f"{name} = {value!r}: not a number"
    if isinstance(low, int) and value != int(value):
        return f"{name} = {value!r}: the form takes whole numbers"
    if not low <= value <= high:
        return f"{name} = {value!r}: outside the form's range {low:g} to {high:g}"
    return None


def form_problems(point: dict[str, Any]) -> list[str]:
    """Values the form controls but cannot show, each naming its field; [] when none."""
    out = []
    for knob, (section, key) in FIELDS.items():
        value = point.get(section, {}).get(key)
        if value is not None:
            out.append(_check(f"{section}.{key}", value, knob))
    name = point.get("policy", {}).get("name", field_rule("policy.name").default)
    if name in POLICIES:
        settings = policy_settings(point, name)
        own = point.get("policy", {}).get(name, {})
        out += [_check(f"policy.{name}.{k}" if k in own else f"policy.{k}", settings[k], k, name)
                for k in POLICY_KNOBS if k in settings]
    for which in ("prompt", "output"):
        dist = point.get("workload", {}).get(which)
        if isinstance(dist, dict) and dist.get("dist") in LENGTH_KINDS:
            out += [_length_check(f"workload.{which}.{k}", v, k)
                    for k, v in dist.items() if k in LENGTH_RANGES]
    out.append(_draft_layers_check(point))
    return [p for p in out if p]


def usable_scenarios() -> list[str]:
    """Shipped scenarios every value of which the form can show (``validate-cpu`` runs on
    the CPU, which the dashboard's GPU lists do not offer)."""
    return [n for n in shipped_scenarios() if not form_problems(collapse(load_shipped(n)))]


def carried_fields(point: dict[str, Any]) -> list[str]:
    """Fields of ``point`` no widget shows, as ``section.key``: they run and are written as
    they are (``[policy.<name>]`` knobs the form sets are shown, the rest carried)."""
    out = [k for k in ("seed",) if k in point]
    name = point.get("policy", {}).get("name", field_rule("policy.name").default)
    for section, table in point.items():
        if section.startswith("_") or not isinstance(table, dict):
            continue
        for key, value in table.items():
            if (section, key) in SHOWN:
                continue
            if section == "policy" and key in POLICY_KNOBS:
                continue
            if section == "policy" and isinstance(value, dict):
                hidden = [k for k in value if not (key == name and k in POLICY_KNOBS)]
                out += [f"policy.{key}.{k}" for k in hidden]
                continue
            out.append(f"{section}.{key}")
    return out


def form_notes(point: dict[str, Any], knobs: Knobs, source: str) -> list[str]:
    """What a reader should know about how ``source`` sits in the form."""
    notes = []
    n = point.get("workload", {}).get("num_requests")
    if isinstance(n, int) and n > knobs.num_requests:
        notes.append(f"{source} asks for {n} requests; the explorer starts at "
                     f"{min(MAX_DEFAULT_REQUESTS, n)} (raise 'Requests' to run more)")
    slo = point.get("slo", {})
    unset = [f"slo.{k} = {getattr(knobs, k):g}" for k in ("ttft_ms", "tpot_ms", "percentile")
             if k not in slo]
    if unset:
        notes.append(f"{source} sets no {', '.join(u.split(' ')[0] for u in unset)}: the "
                     f"form's targets run ({', '.join(unset)})")
    carried = carried_fields(point)
    if carried:
        notes.append("Not on this form, run and downloaded as the scenario sets them: "
                     + ", ".join(carried))
    return notes
