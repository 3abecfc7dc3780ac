"""The Fleet page's knobs: the autoscaler, the front door, the router and priority classes,
read from a scenario point and written back into one (docs/fleet.md).

Writing follows the rest of the form (dashboard/logic/feature_knobs.py): a key the
scenario had is written back with the form's value, a new key only when the form's value
differs from what runs without it, so a shipped fleet scenario round-trips unchanged and a
scenario with a feature off gains no key. Turning a feature off keeps the scenario's
section but off: ``[autoscale] enabled = false``; ``[admission]`` without ``rate_limit``
and ``max_queue`` (the section is on only when one is set); ``[workload] classes``
removed. Defaults and ranges are the scenario schema's (``field_rule``); the values a
widget starts from where the schema has none (unset means off) are FLEET_STARTS.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any

from dashboard.logic.scenario_files import collapse, load_shipped, shipped_scenarios
from simulator.policies import policy_knobs
from simulator.scenario_types import field_rule

AUTOSCALE_KEYS = ("min_replicas", "max_replicas", "signal", "scale_up_above",
                  "scale_down_below", "cold_start_s")
CLASS_SLO_KEYS = ("ttft_ms", "tpot_ms", "e2el_ms")  # the per-class targets the form shows
# Starts for widgets whose field is unset (off) in a scenario: a rate limit, a queue bound,
# and two classes (the split of scenarios/priority-overload.toml).
FLEET_STARTS: dict[str, Any] = {"rate_limit": 10.0, "max_queue": 8,
                                "classes": (("interactive", 0.3, 1000.0, 100.0, None),
                                            ("batch", 0.7, None, None, 180_000.0))}


@dataclass(frozen=True, slots=True)
class AutoscaleKnobs:
    """``[autoscale]`` as the page shows it (values kept while it is off)."""

    on: bool
    min_replicas: int
    max_replicas: int
    signal: str  # queue | kv | ttft
    scale_up_above: float  # the signal's unit: waiting requests, KV fraction, or TTFT ms
    scale_down_below: float
    cold_start_s: float


@dataclass(frozen=True, slots=True)
class AdmissionKnobs:
    """``[admission]``: a token bucket and a queue bound, each off when None."""

    rate_limit: float | None  # req/s
    burst: int  # requests
    max_queue: int | None  # requests waiting (per replica or fleet-wide)
    queue_scope: str  # replica | fleet


@dataclass(frozen=True, slots=True)
class ClassKnobs:
    """One priority class: its share of requests and its own targets (None: not judged on it
    by the class; a class with no target is judged on ``[slo]``)."""

    name: str
    share: float | None  # 0..1, the classes' shares sum to 1; None: a trace column gives it
    ttft_ms: float | None
    tpot_ms: float | None
    e2el_ms: float | None


@dataclass(frozen=True, slots=True)
class FleetKnobs:
    """Every value the Fleet page sets."""

    replicas: int  # [cluster] replicas (at t = 0 with the autoscaler)
    router: str
    autoscale: AutoscaleKnobs
    admission: AdmissionKnobs
    scheduling: str  # fcfs | priority (continuous and chunked policies)
    classes: tuple[ClassKnobs, ...]  # () : no classes


def _default(key: str) -> Any:
    return field_rule(key).default


def _classes(table: Any) -> tuple[ClassKnobs, ...]:
    if not isinstance(table, dict):
        return ()
    out = []
    for name, c in table.items():
        c = c if isinstance(c, dict) else {"share": c}
        share = None if c.get("share") is None else float(c["share"])
        out.append(ClassKnobs(name, share,
                              *(None if c.get(k) is None else float(c[k]) for k in CLASS_SLO_KEYS)))
    return tuple(out)


def policy_name(point: dict[str, Any]) -> str:
    """The policy ``point`` runs."""
    return str(point.get("policy", {}).get("name") or _default("policy.name"))


def supports_scheduling(policy: str) -> bool:
    """Whether ``policy`` takes ``scheduling`` (continuous and chunked do)."""
    return "scheduling" in policy_knobs(policy)


def fleet_from_point(point: dict[str, Any]) -> FleetKnobs:
    """The fleet knobs ``point`` runs with (absent fields: the schema's defaults)."""
    cluster, auto = point.get("cluster", {}), point.get("autoscale")
    adm, pol = point.get("admission", {}), point.get("policy", {})
    policy = policy_name(point)
    own = pol.get(policy) if isinstance(pol.get(policy), dict) else {}
    a = auto or {}
    return FleetKnobs(
        replicas=int(cluster.get("replicas", _default("cluster.replicas"))),
        router=str(cluster.get("router", _default("cluster.router"))),
        autoscale=AutoscaleKnobs(
            on=auto is not None and bool(a.get("enabled", True)),
            **{k: a.get(k, _default(f"autoscale.{k}")) for k in AUTOSCALE_KEYS}),
        admission=AdmissionKnobs(
            rate_limit=adm.get("rate_limit"),
            burst=int(adm.get("burst", _default("admission.burst"))),
            max_queue=adm.get("max_queue"),
            queue_scope=str(adm.get("queue_scope", _default("admission.queue_scope")))),
        scheduling=str(own.get("scheduling", pol.get("scheduling", _default("policy.scheduling")))),
        classes=_classes(point.get("workload", {}).get("classes")))


def _write(table: dict[str, Any], given: dict[str, Any], key: str, value: Any,
           default: Any) -> None:
    """Set ``key`` when the scenario had it or ``value`` is not what runs without it."""
    if key in given or value != default:
        table[key] = value


def _write_autoscale(out: dict[str, Any], point: dict[str, Any], k: AutoscaleKnobs) -> None:
    given = point.get("autoscale")
    if not k.on:
        if given is not None:
            out["autoscale"] = {**given, "enabled": False}
        return
    table = dict(given or {})
    if "enabled" in table:
        table["enabled"] = True
    for key in AUTOSCALE_KEYS:
        _write(table, given or {}, key, getattr(k, key), _default(f"autoscale.{key}"))
    out["autoscale"] = table


def _write_admission(out: dict[str, Any], point: dict[str, Any], k: AdmissionKnobs) -> None:
    given = point.get("admission")
    table = dict(given or {})
    for key in ("rate_limit", "max_queue"):
        value = getattr(k, key)
        if value is None:
            table.pop(key, None)
        else:
            table[key] = value
    for key in ("burst", "queue_scope"):
        _write(table, given or {}, key, getattr(k, key), _default(f"admission.{key}"))
    if table or given is not None:
        out["admission"] = table


def _write_classes(wl: dict[str, Any], given: Any, classes: tuple[ClassKnobs, ...]) -> None:
    if not classes:
        wl.pop("classes", None)
        return
    given = given if isinstance(given, dict) else {}
    table: dict[str, Any] = {}
    for c in classes:
        before = given.get(c.name)
        slo = {key: getattr(c, key) for key in CLASS_SLO_KEYS if getattr(c, key) is not None}
        if not isinstance(before, dict) and not slo:
            table[c.name] = c.share  # the short form {name = share}
            continue
        entry = {k: v for k, v in (before or {}).items() if k not in CLASS_SLO_KEYS}
        share = {} if c.share is None else {"share": c.share}
        table[c.name] = {**entry, **share, **slo}
    wl["classes"] = table


def _write_scheduling(out: dict[str, Any], point: dict[str, Any], value: str) -> None:
    policy = policy_name(point)
    if not supports_scheduling(policy):
        return
    pol = out.setdefault("policy", {})
    own = pol.get(policy) if isinstance(pol.get(policy), dict) else None
    if own is not None and "scheduling" in own:
        own["scheduling"] = value
    else:
        _write(pol, point.get("policy", {}), "scheduling", value, _default("policy.scheduling"))


def apply_fleet(point: dict[str, Any], k: FleetKnobs) -> dict[str, Any]:
    """A copy of ``point`` with the page's fleet values written in; all else kept."""
    out = copy.deepcopy(point)
    cluster = dict(out.get("cluster", {}))
    given = point.get("cluster", {})
    _write(cluster, given, "replicas", k.replicas, _default("cluster.replicas"))
    _write(cluster, given, "router", k.router, _default("cluster.router"))
    if cluster or "cluster" in point:
        out["cluster"] = cluster
    _write_autoscale(out, point, k.autoscale)
    _write_admission(out, point, k.admission)
    _write_scheduling(out, point, k.scheduling)
    wl = out.setdefault("workload", {})
    _write_classes(wl, point.get("workload", {}).get("classes"), k.classes)
    return out


def start_classes() -> tuple[ClassKnobs, ...]:
    """The classes a scenario without any starts from when they are turned on."""
    return tuple(ClassKnobs(*c) for c in FLEET_STARTS["classes"])


def is_fleet(point: dict[str, Any]) -> bool:
    """Whether ``point`` uses a fleet feature: more than one replica, the front door, the
    autoscaler, a rate schedule, priority classes or disaggregated pools."""
    wl = point.get("workload", {})
    return bool({"autoscale", "admission", "disaggregated"} & set(point) or "classes" in wl
                or "rate_schedule" in wl or point.get("cluster", {}).get("replicas", 1) > 1)


def fleet_scenarios() -> list[str]:
    """Shipped scenarios that use a fleet feature (a sweep: its first point)."""
    return [n for n in shipped_scenarios() if is_fleet(collapse(load_shipped(n)))]


def scale_time(point: dict[str, Any], scale: float) -> dict[str, Any]:
    """``point`` run for ``scale`` of its length: ``num_requests`` and the rate schedule's
    start times multiplied by ``scale``, rates unchanged (the same load curve in less
    simulated time; the autoscaler's intervals and cold start stay as they are)."""
    out = copy.deepcopy(point)
    wl = out.setdefault("workload", {})
    n = wl.get("num_requests") or _default("workload.num_requests")
    wl["num_requests"] = max(1, round(n * scale))
    sched = wl.get("rate_schedule")
    if isinstance(sched, dict) and scale != 1.0:
        wl["rate_schedule"] = {**sched, "start_s": [round(s * scale, 6)
                                                          for s in sched["start_s"]]}
    return out
