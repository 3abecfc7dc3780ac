"""The Fleet page's widget groups: router and replicas, the autoscaler, the front door, and
priority scheduling with its classes (docs/fleet.md).

Each group draws into ``where`` under the page's ``fl_`` keys, seeded from the scenario's
values like every other widget (dashboard/page_form.py), and returns what runs. Choices
and ranges are the scenario schema's (``field_rule``), never restated here.
"""

from __future__ import annotations

from typing import Any

import streamlit as st

from dashboard.logic.fleet import (
    AUTOSCALE_KEYS,
    CLASS_SLO_KEYS,
    FLEET_STARTS,
    AdmissionKnobs,
    AutoscaleKnobs,
    ClassKnobs,
    start_classes,
)
from dashboard.logic.fleet_disagg import DISAGG_KEYS, DisaggKnobs
from dashboard.page_form import choice, number, seed
from simulator.scenario_types import field_rule

P = "fl_"
SIGNAL_UNITS = {"queue": "requests waiting per serving replica",
                "kv": "KV blocks used / blocks, 0-1", "ttft": "rolling TTFT percentile, ms"}
LABELS = {"min_replicas": "Min replicas", "max_replicas": "Max replicas",
          "scale_up_above": "Scale up above", "scale_down_below": "Scale down below",
          "cold_start_s": "Cold start (s)"}
CLASS_LABELS = {"ttft_ms": "TTFT target (ms)", "tpot_ms": "TPOT target (ms)",
                "e2el_ms": "E2E target (ms)"}
SHARE_TOLERANCE = 1e-9  # simulator/workload/classes.py refuses shares further from 1
WIDGET_KEYS = (  # keys a scenario change refills (class keys are added per class)
    "replicas", "router", "autoscale", *AUTOSCALE_KEYS, "rate_limit_on", "rate_limit",
    "burst", "max_queue_on", "max_queue", "queue_scope", "scheduling", "classes_on",
    "disagg", *DISAGG_KEYS)


def limits(key: str) -> tuple[Any, Any]:
    """The schema's range of the field ``key`` (``autoscale.cold_start_s``) for a number
    box: ints for integer fields, None for no bound or an open low bound."""
    info = field_rule(key)
    cast = int if info.rule.kind == "int" else float
    low = None if info.low is None or info.low_open else cast(info.low)
    return low, None if info.high is None else cast(info.high)


def _num(where: Any, label: str, key: str, value: Any, field: str, step: Any = None) -> Any:
    return number(where, label, field.rpartition(".")[2], value, P + key, step, limits(field))


def _pick(where: Any, label: str, field: str, value: str, **kw: Any) -> str:
    """A choice among the schema's values of ``field`` ("section.key"), keyed by the key."""
    options = list(field_rule(field).choices or ())
    return str(choice(where, label, options, value, P + field.rpartition(".")[2], **kw))


def _checkbox(where: Any, label: str, value: bool, key: str, **kw: Any) -> bool:
    seed(P + key, bool(value))
    return bool(where.checkbox(label, key=P + key, **kw))


def router_widgets(where: Any, replicas: int, router: str) -> tuple[int, str]:
    """Replicas (at t = 0 with the autoscaler) and the router."""
    n = int(_num(where, "Replicas (at t = 0)", "replicas", replicas, "cluster.replicas"))
    chosen = _pick(where, "Router", "cluster.router", router,
                   help="which serving replica gets each request (docs/fleet.md)")
    return n, chosen


def disagg_widgets(where: Any, d: DisaggKnobs) -> DisaggKnobs:
    """``[disaggregated]``: on or off, the pools' replica counts, the link and its scope."""
    on = _checkbox(where, "Disaggregated prefill/decode", d.on, "disagg",
                   help="[disaggregated]: prompts on a prefill pool, tokens on a decode "
                        "pool, the KV sent over a link between them (docs/fleet.md)")
    if not on:
        return DisaggKnobs(False, *(getattr(d, k) for k in DISAGG_KEYS))
    pre = int(_num(where, "Prefill replicas", "prefill_replicas", d.prefill_replicas,
                   "disaggregated.prefill_replicas"))
    dec = int(_num(where, "Decode replicas", "decode_replicas", d.decode_replicas,
                   "disaggregated.decode_replicas"))
    link = _pick(where, "KV link", "disaggregated.link", d.link)
    scope = _pick(where, "Link per", "disaggregated.link_scope", d.link_scope,
                  help="replica: each prefill replica sends over its own link; pool: "
                       "every transfer shares one link")
    reserve = _pick(where, "Decode KV reserved", "disaggregated.decode_reserve",
                    d.decode_reserve,
                    help="before_transfer (vLLM): the KV is sent once the decode replica has "
                         "its blocks; before_prefill (SGLang): the prompt waits for them "
                         "before its prefill; on_arrival: no reservation (docs/fleet.md)")
    return DisaggKnobs(True, pre, dec, link, scope, reserve)


def autoscale_widgets(where: Any, d: AutoscaleKnobs) -> AutoscaleKnobs:
    """``[autoscale]``: on or off, bounds, signal, thresholds and cold start."""
    on = _checkbox(where, "Autoscaler", d.on, "autoscale",
                   help="[autoscale]: start replicas when the signal is above the up "
                        "threshold, drain one when it stays below the down threshold")
    if not on:
        return AutoscaleKnobs(False, *(getattr(d, k) for k in AUTOSCALE_KEYS))
    low = int(_num(where, LABELS["min_replicas"], "min_replicas", d.min_replicas,
                   "autoscale.min_replicas"))
    high = int(_num(where, LABELS["max_replicas"], "max_replicas", d.max_replicas,
                    "autoscale.max_replicas"))
    signal = _pick(where, "Signal", "autoscale.signal", d.signal,
                   format_func=lambda s: f"{s} ({SIGNAL_UNITS[s]})")
    up = float(_num(where, LABELS["scale_up_above"], "scale_up_above", d.scale_up_above,
                    "autoscale.scale_up_above", 0.05))
    down = float(_num(where, LABELS["scale_down_below"], "scale_down_below", d.scale_down_below,
                      "autoscale.scale_down_below", 0.05))
    cold = float(_num(where, LABELS["cold_start_s"], "cold_start_s", d.cold_start_s,
                      "autoscale.cold_start_s", 5.0))
    return AutoscaleKnobs(True, low, high, signal, up, down, cold)


def admission_widgets(where: Any, d: AdmissionKnobs) -> AdmissionKnobs:
    """``[admission]``: a token-bucket rate limit (with its burst) and a queue bound."""
    rate, queue = d.rate_limit, d.max_queue
    if _checkbox(where, "Rate limit (token bucket)", rate is not None, "rate_limit_on"):
        rate = float(_num(where, "Rate limit (req/s)", "rate_limit",
                          rate if rate is not None else FLEET_STARTS["rate_limit"],
                          "admission.rate_limit", 1.0))
    else:
        rate = None
    burst = d.burst
    if rate is not None:
        burst = int(_num(where, "Burst (requests)", "burst", d.burst, "admission.burst"))
    if _checkbox(where, "Queue bound", queue is not None, "max_queue_on"):
        queue = int(_num(where, "Max waiting (requests)", "max_queue",
                         queue if queue is not None else FLEET_STARTS["max_queue"],
                         "admission.max_queue"))
        scope = _pick(where, "Counted on", "admission.queue_scope", d.queue_scope)
    else:
        queue, scope = None, d.queue_scope
    return AdmissionKnobs(rate, burst, queue, scope)


def class_keys(classes: tuple[ClassKnobs, ...]) -> list[str]:
    """Widget keys of the class rows (refilled with the scenario)."""
    return [f"{P}class_{c.name}_{k}" for c in classes for k in ("share", *CLASS_SLO_KEYS)]


def class_widgets(where: Any, rows: Any, classes: tuple[ClassKnobs, ...],
                  scheduling: str | None) -> tuple[str | None, tuple[ClassKnobs, ...]]:
    """Scheduling (None: the policy takes none) and the classes switched on or off in
    ``where``; then in ``rows``, one row per class: its share and its own targets (an empty
    box: the class is not judged on that metric)."""
    if scheduling is not None:
        scheduling = str(choice(where, "Scheduling", list(field_rule("policy.scheduling")
                                                           .choices or ()), scheduling,
                                P + "scheduling",
                                help="priority: the urgent class jumps the queue and evicts "
                                     "lower classes when the KV cache is full"))
    else:
        where.caption("Scheduling by class: not with this policy (continuous and chunked only)")
    if not _checkbox(where, "Priority classes", bool(classes), "classes_on",
                     help="[workload] classes: each request draws a class by share, most "
                          "urgent first; each class may have its own targets"):
        return scheduling, ()
    out = []
    for c in classes or start_classes():
        cols = rows.columns([1, 1, 1, 1, 1])
        cols[0].markdown(f"**class {c.name}**")
        share = c.share
        if share is None:
            cols[1].caption("share: from the trace's priority_class column")
        else:
            share = float(number(cols[1], f"{c.name}: share", "share", share,
                                 f"{P}class_{c.name}_share", 0.05, (0.0, 1.0)))
        slo = []
        for col, key in zip(cols[2:], CLASS_SLO_KEYS, strict=True):
            seed(f"{P}class_{c.name}_{key}", getattr(c, key))
            slo.append(col.number_input(f"{c.name}: {CLASS_LABELS[key]}", min_value=0.0,
                                        step=50.0, key=f"{P}class_{c.name}_{key}",
                                        placeholder="none (class not judged on it)"))
        out.append(ClassKnobs(c.name, share, *slo))
    total = sum(c.share for c in out if c.share is not None)
    if out[0].share is not None and abs(total - 1.0) > SHARE_TOLERANCE:
        st.error(f"Not run: the classes' shares sum to {total:g}, not 1")
        st.stop()
    return scheduling, tuple(out)
