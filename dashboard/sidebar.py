"""The explorer's sidebar: pick a scenario, then every knob as a widget (returns ``Knobs``).

Widget keys are stable names (``rate``, ``policy``, ...) so tests can set them. Choosing
another scenario clears them, so the widgets take that scenario's values.
"""

from __future__ import annotations

import tomllib
from dataclasses import replace
from typing import Any

import streamlit as st

from dashboard.logic.scenario_form import (
    DEFAULT_SCENARIO,
    POLICY_LABELS,
    Knobs,
    collapse,
    load_shipped,
    shipped_scenarios,
)
from dashboard.ui import BAD_INPUT, upload
from simulator.router import ROUTERS
from simulator.scenario import POLICY_NAMES, check_structure
from simulator.specs import HARDWARE, MODELS, WEIGHT_DTYPE_BYTES
from simulator.workload.config import ARRIVALS
from simulator.workload.traces import load_trace

KNOB_KEYS = (*Knobs.__dataclass_fields__, "prompt_dist", "output_dist", "prompt_mean",
             "prompt_sigma", "prompt_tokens", "prompt_low", "prompt_high", "output_mean",
             "output_sigma", "output_tokens", "output_low", "output_high")
TRACE_TYPES = ("csv", "json", "jsonl", "parquet", "pq")


def _reset_knobs() -> None:
    for key in KNOB_KEYS:
        st.session_state.pop(key, None)


def scenario_picker() -> dict[str, Any]:
    """The starting scenario (shipped, or an uploaded TOML), collapsed to one point."""
    names = list(shipped_scenarios())
    name = st.sidebar.selectbox("Start from scenario", names, index=names.index(DEFAULT_SCENARIO),
                                key="scenario", on_change=_reset_knobs)
    f = st.sidebar.file_uploader("...or upload a scenario TOML", type=["toml"],
                                 key="scenario_file", on_change=_reset_knobs)
    if f is None:
        return collapse(load_shipped(name))

    def parse() -> dict[str, Any]:
        try:
            raw = tomllib.loads(f.getvalue().decode("utf-8"))
        except (tomllib.TOMLDecodeError, UnicodeDecodeError) as e:
            raise ValueError(f"{f.name}: not valid TOML: {e}") from e
        check_structure(raw, f.name)
        raw.setdefault("name", f.name.removesuffix(".toml"))
        return collapse(raw)

    try:
        return parse()
    except BAD_INPUT as e:
        st.error(f"Uploaded scenario not used: {e}")
        return collapse(load_shipped(name))


def _choice(label: str, options: list[Any], default: Any, key: str, **kw: Any) -> Any:
    index = options.index(default) if default in options else 0
    return st.sidebar.selectbox(label, options, index=index, key=key, **kw)


def _lengths(which: str, d: dict[str, Any]) -> dict[str, Any]:
    """A length distribution table from widgets (lognormal, fixed or uniform)."""
    kinds = ["lognormal", "fixed", "uniform"]
    kind = _choice(f"{which.title()} lengths", kinds, d.get("dist"), f"{which}_dist")
    n = st.sidebar.number_input
    if kind == "fixed":
        return {"dist": "fixed", "tokens": int(n("tokens", 1, 200_000, int(d.get("tokens", 512)),
                                                 key=f"{which}_tokens"))}
    if kind == "uniform":
        low = int(n("low (tokens)", 1, 200_000, int(d.get("low", 64)), key=f"{which}_low"))
        high = int(n("high (tokens)", 1, 200_000, max(low, int(d.get("high", 1024))),
                     key=f"{which}_high"))
        return {"dist": "uniform", "low": low, "high": max(low, high)}
    mean = float(n("mean (tokens)", 1.0, 200_000.0, float(d.get("mean", 1000)),
                   key=f"{which}_mean"))
    sigma = float(n("sigma (log-space)", 0.0, 3.0, float(d.get("sigma", 1.0)), 0.1,
                    key=f"{which}_sigma"))
    return {"dist": "lognormal", "mean": mean, "sigma": sigma}


def _trace() -> tuple[str | None, int]:
    """An uploaded trace (any loader format), checked here so a bad row is named at once."""
    path = upload("Trace for lengths/arrivals", TRACE_TYPES, "trace_file",
                  help="Azure, BurstGPT, Mooncake JSONL, vLLM bench JSON, length-only CSV, "
                       "or a request table (CSV/Parquet)", where=st.sidebar)
    if path is None:
        return None, 0
    try:
        loaded = load_trace(path)
    except BAD_INPUT as e:
        st.error(f"Uploaded trace not used: {e}")
        return None, 0
    st.sidebar.caption(f"{path.name}: {loaded.format}, {len(loaded.table)} requests")
    return str(path), len(loaded.table)


def knob_widgets(d: Knobs) -> Knobs:
    """Every sidebar knob, defaults from ``d``; returns the chosen values."""
    sb = st.sidebar
    sb.subheader("Deployment")
    model = _choice("Model", list(MODELS), d.model, "model")
    gpu = _choice("GPU", [g for g in HARDWARE if g != "cpu"], d.gpu, "gpu")
    dtype = _choice("Weight dtype", list(WEIGHT_DTYPE_BYTES), d.weight_dtype, "weight_dtype")
    tp = _choice("Tensor parallelism (GPUs per replica)", [1, 2, 4, 8], d.tp, "tp")
    replicas = int(sb.number_input("Replicas", 1, 64, d.replicas, key="replicas"))
    router = _choice("Router", list(ROUTERS), d.router, "router")
    sb.subheader("Batching policy")
    policy = _choice("Policy", list(POLICY_NAMES), d.policy, "policy",
                     format_func=lambda p: POLICY_LABELS[p])
    k: dict[str, Any] = {}
    if policy == "static":
        k["batch_size"] = int(sb.number_input("batch_size", 1, 1024, d.batch_size,
                                              key="batch_size"))
    elif policy == "dynamic":
        k["max_batch_size"] = int(sb.number_input("max_batch_size", 1, 1024, d.max_batch_size,
                                                  key="max_batch_size"))
        k["max_wait_s"] = float(sb.number_input("max_wait_s (s)", 0.0, 10.0, d.max_wait_s,
                                                0.01, key="max_wait_s"))
    else:
        k["max_num_seqs"] = int(sb.number_input("max_num_seqs", 1, 4096, d.max_num_seqs,
                                                key="max_num_seqs"))
        k["max_num_batched_tokens"] = int(sb.number_input(
            "max_num_batched_tokens", 16, 1_000_000, d.max_num_batched_tokens, 256,
            key="max_num_batched_tokens"))
    sb.subheader("Traffic")
    trace, trace_rows = _trace()
    arrivals = [a for a in ARRIVALS if a != "trace" or trace]
    arrival = _choice("Arrival process", arrivals, d.arrival, "arrival")
    if arrival == "closed":
        k["concurrency"] = int(sb.number_input("Clients", 1, 4096, d.concurrency,
                                               key="concurrency"))
    else:
        k["rate"] = float(sb.number_input("Rate (req/s)", 0.01, 10_000.0, d.rate, 0.5, key="rate"))
    if arrival == "gamma":
        k["cv"] = float(sb.number_input("Burstiness (CV)", 0.05, 10.0, d.cv, 0.25, key="cv"))
    n = int(sb.number_input("Requests", 10, 20_000, d.num_requests, 100, key="num_requests"))
    n = min(n, trace_rows) if trace else n
    prompt = d.prompt if trace else _lengths("prompt", d.prompt)
    output = d.output if trace else _lengths("output", d.output)
    sb.subheader("Targets (SLO)")
    ttft = float(sb.number_input("TTFT target (ms)", 1.0, 1e6, d.ttft_ms, 50.0, key="ttft_ms"))
    tpot = float(sb.number_input("TPOT target (ms)", 1.0, 1e5, d.tpot_ms, 5.0, key="tpot_ms"))
    q = float(_choice("Percentile", [50.0, 90.0, 95.0, 99.0], d.percentile, "percentile"))
    return replace(d, **k, model=model, gpu=gpu, weight_dtype=dtype, tp=tp,
                   replicas=replicas, router=router, policy=policy, arrival=arrival,
                   num_requests=n, prompt=prompt, output=output, trace=trace, ttft_ms=ttft,
                   tpot_ms=tpot, percentile=q)
