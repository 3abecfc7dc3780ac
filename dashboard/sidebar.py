"""The explorer's sidebar: pick a scenario, then every knob as a widget (returns ``Knobs``).

Widgets show what runs. Each widget's value lives in ``st.session_state`` under a stable
key (``rate``, ``policy``, ...; tests set them by key; the other pages prefix theirs).
When the starting scenario changes (another shipped one, or an uploaded TOML: by its
bytes) every key is rewritten from that scenario, so each widget takes the scenario's
value; widgets are created without their own default, so nothing but the session state
decides what they show (``dashboard.page_form``). Choices, ranges and the values a
scenario leaves out are the scenario schema's (``dashboard.logic.form_fields``). A scenario value
that no widget can hold is refused with a message naming the field; fields the form does
not show are carried through and listed (``dashboard.logic.form_fields``).
"""

from __future__ import annotations

import hashlib
import tomllib
from dataclasses import replace
from pathlib import Path
from typing import Any

import streamlit as st

from dashboard.feature_widgets import FEATURE_KEYS, prefix_widgets, spec_widgets
from dashboard.logic.feature_knobs import supports_prefix, supports_spec
from dashboard.logic.form_fields import (
    LENGTH_KINDS,
    LENGTH_RANGES,
    bounds,
    choices,
    form_notes,
    form_problems,
    usable_scenarios,
)
from dashboard.logic.scenario_form import (
    DEFAULT_SCENARIO,
    POLICY_KNOBS,
    Knobs,
    collapse,
    load_shipped,
    policy_label,
    stack_versions,
    sweep_note,
    with_stack,
)
from dashboard.page_form import KNOB_STEPS, choice, knob_label, number, refill, seed
from dashboard.ui import BAD_INPUT, upload
from simulator.policies import policy_knobs
from simulator.scenario import check_structure
from simulator.specs import MODELS
from simulator.workload.traces import load_trace

LENGTH_KEYS = tuple(f"{w}_{k}" for w in ("prompt", "output")
                    for k in ("dist", "mean", "sigma", "tokens", "low", "high"))
KNOB_KEYS = (*Knobs.__dataclass_fields__, "use_trace", *LENGTH_KEYS, *FEATURE_KEYS)
TRACE_TYPES = ("csv", "json", "jsonl", "parquet", "pq")
LENGTH_DEFAULTS = {"mean": 1000.0, "sigma": 1.0, "tokens": 512, "low": 64, "high": 1024}


@st.cache_data(show_spinner=False)
def usable_shipped() -> list[str]:
    """:func:`usable_scenarios`, read once per session."""
    return usable_scenarios()


def scenario_picker() -> tuple[dict[str, Any], str]:
    """The starting scenario (shipped, or an uploaded TOML) collapsed to one point, and its
    name; the widgets are refilled from it when it is not the one they show."""
    names = usable_shipped()
    name = st.sidebar.selectbox("Start from scenario", names,
                                index=names.index(DEFAULT_SCENARIO), key="scenario")
    f = st.sidebar.file_uploader("...or upload a scenario TOML", type=["toml"],
                                 key="scenario_file")
    raw, source, label = load_shipped(name), f"shipped:{name}", f"{name}.toml"
    if f is not None:
        try:
            raw = _parse_upload(f.name, f.getvalue())
            source, label = "upload:" + hashlib.sha256(f.getvalue()).hexdigest(), f.name
        except BAD_INPUT as e:
            st.error(f"Uploaded scenario not used: {e}")
    base = collapse(raw)
    note = sweep_note(raw, label)
    if note:
        st.sidebar.caption(note)
    refill("explorer", source, KNOB_KEYS)
    return base, label


def _parse_upload(name: str, data: bytes) -> dict[str, Any]:
    try:
        raw = tomllib.loads(data.decode("utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as e:
        raise ValueError(f"{name}: not valid TOML: {e}") from e
    check_structure(raw, name)
    raw.setdefault("name", name.removesuffix(".toml"))
    problems = form_problems(collapse(raw))
    if problems:
        raise ValueError(f"{name}: the explorer's form cannot show " + "; ".join(problems)
                         + " (run it with `servesim run`)")
    return raw


def _choice(label: str, options: list[Any], default: Any, key: str, **kw: Any) -> Any:
    return choice(st.sidebar, label, options, default, key, **kw)


def _number(label: str, knob: str, default: Any, step: Any = None, key: str | None = None,
            limits: tuple[Any, Any] | None = None, policy: str | None = None) -> Any:
    return number(st.sidebar, label, knob, default, key or knob, step, limits, policy)


def _lengths(which: str, d: dict[str, Any]) -> dict[str, Any]:
    """A length distribution table from widgets (lognormal, fixed or uniform)."""
    if d.get("dist") not in LENGTH_KINDS:  # e.g. {dist = "trace", path = ...}: no widgets
        st.sidebar.caption(f"{which.title()} lengths: {d} (from the scenario, not editable here)")
        return dict(d)
    kind = _choice(f"{which.title()} lengths", list(LENGTH_KINDS), d.get("dist"),
                   f"{which}_dist")
    def n(label: str, param: str, step: Any = None) -> Any:
        default = d.get(param, LENGTH_DEFAULTS[param]) if d.get("dist") == kind else \
            LENGTH_DEFAULTS[param]
        return _number(label, param, default, step, f"{which}_{param}", LENGTH_RANGES[param])

    if kind == "fixed":
        return {"dist": "fixed", "tokens": n("tokens", "tokens")}
    if kind == "uniform":
        low, high = n("low (tokens)", "low"), n("high (tokens)", "high")
        return {"dist": "uniform", "low": low, "high": max(low, high)}
    return {"dist": "lognormal", "mean": n("mean (tokens)", "mean"),
            "sigma": n("sigma (log-space)", "sigma", 0.1)}


def _trace(d: Knobs, base: dict[str, Any]) -> tuple[str | None, int]:
    """The trace that runs: an uploaded one, else the scenario's own (shown, and checked here
    so a bad row or a missing file is named at once); with its row count."""
    path = upload("Trace for lengths/arrivals", TRACE_TYPES, "trace_file",
                  help="Azure, BurstGPT, Mooncake JSONL, vLLM bench JSON, length-only CSV, "
                       "or a request table (CSV/Parquet)", where=st.sidebar)
    if path is None and d.trace:
        seed("use_trace", True)
        if not st.sidebar.checkbox(f"Use the scenario's trace ({Path(d.trace).name})",
                                   key="use_trace"):
            return None, 0
    if path is None and not d.trace:
        return None, 0
    shown = str(path) if path is not None else str(d.trace)
    full = Path(base.get("_base_dir", "."), shown) if path is None else path
    try:
        loaded = load_trace(full)
    except BAD_INPUT as e:
        where = "Uploaded trace" if path is not None else (
            f"The scenario's workload.trace = {shown!r}")
        st.error(f"{where} not used: {e}")
        if path is not None:
            return None, 0
        st.stop()
    origin = "uploaded" if path is not None else "from the scenario"
    st.sidebar.caption(f"trace: {Path(str(shown)).name} ({origin}): {loaded.format}, "
                       f"{len(loaded.table)} requests")
    return str(shown), len(loaded.table)


def knob_widgets(d: Knobs, base: dict[str, Any] | None = None, source: str = "") -> Knobs:
    """Every sidebar knob, seeded from ``d``; returns the values that will run."""
    base = base or {}
    sb = st.sidebar
    sb.subheader("Deployment")
    model = _choice("Model", list(choices("model")), d.model, "model")
    gpu = _choice("GPU", list(choices("gpu")), d.gpu, "gpu")
    dtype = _choice("Weight dtype", list(choices("weight_dtype")), d.weight_dtype, "weight_dtype")
    tp = _choice("Tensor parallelism (GPUs per replica)", list(choices("tp")), d.tp, "tp")
    ranks = 1
    if MODELS[model].num_experts > 1:  # attention data parallel needs experts to spread
        offered = list(choices("attention_dp"))  # and a scenario's own, e.g. 16
        ranks = _choice("Attention data parallel (ranks per replica)",
                        offered + ([d.attention_dp] if d.attention_dp not in offered else []),
                        d.attention_dp, "attention_dp",
                        help="each GPU an attention rank of tp 1 with its own requests and "
                             "KV cache, the experts spread over the ranks (TensorRT-LLM's "
                             "DEP; docs/gpu-profiles.md)")
    if ranks > 1:
        sb.caption(f"attention data parallel x {ranks}: a replica is {tp * ranks} GPUs"
                   + (" (tp must then be 1)" if tp > 1 else ", one rank each"))
    replicas = _number("Replicas", "replicas", d.replicas)
    router = _choice("Router", list(choices("router")), d.router, "router")
    stack = _choice("Serving stack", list(choices("stack")), d.stack, "stack",
                    help="a stack's scheduler rules, defaults, kernels and host costs "
                         "(docs/stacks.md); its knobs show below and may be changed")
    version = ""
    if stack != "none":  # newest first: a scenario without a version runs the first
        named = d.stack_version if base.get("stack", {}).get("name") == stack else ""
        version = _choice("Stack version", stack_versions(stack, named), named, "stack_version",
                          help="the release whose defaults and host costs run; a release "
                               "between two presets takes the earlier (docs/stacks.md)")
    shown = (stack, version, model, gpu) if stack != "none" else ("none",)
    if st.session_state.get("_stack_shown") != shown:  # re-seed the policy from the stack
        if "_stack_shown" in st.session_state:
            for key in ("policy", *POLICY_KNOBS):
                st.session_state.pop(key, None)
        st.session_state["_stack_shown"] = shown
    d = with_stack(base, replace(d, stack=stack, stack_version=version, model=model, gpu=gpu))
    sb.subheader("Batching policy")
    policy = _choice("Policy", list(choices("policy")), d.policy, "policy",
                     format_func=policy_label)
    own = policy_knobs(policy)
    k: dict[str, Any] = {
        knob: _number(knob_label(knob, policy), knob, getattr(d, knob),
                      KNOB_STEPS.get(knob), policy=policy)
        for knob in POLICY_KNOBS if knob in own}
    sb.subheader("Traffic")
    trace, trace_rows = _trace(d, base)
    arrivals = [a for a in choices("arrival") if a != "trace" or trace]
    arrival = _choice("Arrival process", arrivals, d.arrival, "arrival")
    rescale = True
    if arrival == "trace":
        seed("rescale_trace", d.rescale_trace)
        rescale = sb.checkbox("Rescale the trace's arrivals to a mean rate",
                              key="rescale_trace")
    if arrival == "closed":
        k["concurrency"] = _number("Clients", "concurrency", d.concurrency)
    elif rescale:
        k["rate"] = _number("Rate (req/s)", "rate", d.rate, 0.5)
    if arrival == "gamma":
        k["cv"] = _number("Burstiness (CV)", "cv", d.cv, 0.25)
    top = (1, trace_rows) if trace else bounds("num_requests")
    n = _number("Requests", "num_requests", min(d.num_requests, top[1]), 100, limits=top)
    prompt = d.prompt if trace else _lengths("prompt", d.prompt)
    output = d.output if trace else _lengths("output", d.output)
    if trace:
        sb.caption("Prompt and output lengths come from the trace.")
    sb.subheader("Prefix caching")
    prefix = prefix_widgets(sb, d.prefix, supported=supports_prefix(policy),
                            closed=arrival == "closed", trace=bool(trace))
    sb.subheader("Speculative decoding")
    spec = spec_widgets(sb, d.spec, model, supported=supports_spec(policy),
                        counts=base.get("speculative", {}).get("acceptance_counts"))
    sb.subheader("Targets (SLO)")
    ttft = _number("TTFT target (ms)", "ttft_ms", d.ttft_ms, 50.0)
    tpot = _number("TPOT target (ms)", "tpot_ms", d.tpot_ms, 5.0)
    q = _number("Percentile", "percentile", d.percentile, 1.0)
    for note in form_notes(base, d, source):
        sb.caption(note)
    return replace(d, **k, model=model, gpu=gpu, weight_dtype=dtype, tp=tp, attention_dp=ranks,
                   replicas=replicas, router=router, stack=stack, stack_version=version,
                   policy=policy,
                   arrival=arrival,
                   rescale_trace=rescale, num_requests=n, prompt=prompt, output=output,
                   trace=trace, ttft_ms=ttft, tpot_ms=tpot, percentile=q, prefix=prefix,
                   spec=spec)
