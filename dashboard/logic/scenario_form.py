"""Scenario dicts <-> the explorer's sidebar values (``Knobs``).

The explorer starts from a scenario (shipped or uploaded), collapses any sweep to one
point, reads the sidebar's defaults from it (``knobs_from_point``) and writes the
user's choices back into a copy (``apply_knobs``). Sections the sidebar does not show
(``[kv]``, ``[cost]``, ``[run]``) pass through unchanged.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from simulator.scenario import NOT_SWEPT, POLICY_NAMES, load_scenario

SCENARIOS_DIR = Path(__file__).resolve().parents[2] / "scenarios"
DEFAULT_SCENARIO = "chat"
MAX_DEFAULT_REQUESTS = 600  # keeps one explorer run near a second on a 2-core machine
POLICY_LABELS = {
    "static": "static (padded batches)",
    "dynamic": "dynamic (size or timeout)",
    "continuous": "continuous (vLLM v0)",
    "chunked": "continuous + chunked prefill (vLLM v1)",
}
DEFAULT_LENGTHS = {
    "prompt": {"dist": "lognormal", "mean": 1100, "sigma": 1.0},
    "output": {"dist": "lognormal", "mean": 265, "sigma": 0.9},
}


def shipped_scenarios() -> dict[str, Path]:
    """Shipped scenario files by name (file stem), sorted."""
    return {p.stem: p for p in sorted(SCENARIOS_DIR.glob("*.toml"))}


def load_shipped(name: str) -> dict[str, Any]:
    """A shipped scenario's raw dict (as ``load_scenario`` gives it)."""
    return load_scenario(shipped_scenarios()[name])


def collapse(raw: dict[str, Any]) -> dict[str, Any]:
    """One point of a sweep: each list takes its middle value; a policy list prefers chunked.

    The middle of a rate sweep is a more telling start than its first, idle-server value.
    """
    point = copy.deepcopy(raw)
    for section, table in point.items():
        if not isinstance(table, dict):
            continue
        for key, value in table.items():
            if isinstance(value, list) and (section, key) not in NOT_SWEPT and value:
                if (section, key) == ("policy", "name") and "chunked" in value:
                    table[key] = "chunked"
                else:
                    table[key] = value[len(value) // 2]
    return point


@dataclass(frozen=True, slots=True)
class Knobs:
    """Every value the explorer's sidebar sets (units in the names)."""

    model: str = "llama-3.1-8b"
    gpu: str = "h100-sxm"
    weight_dtype: str = "bf16"
    tp: int = 1
    policy: str = "chunked"  # one of POLICY_NAMES
    batch_size: int = 16  # static
    max_batch_size: int = 32  # dynamic
    max_wait_s: float = 0.1  # dynamic
    max_num_seqs: int = 256  # continuous / chunked
    max_num_batched_tokens: int = 2048  # continuous / chunked
    arrival: str = "poisson"  # poisson | gamma | constant | closed | trace
    rate: float = 10.0  # req/s (open loop; trace: rescale to it)
    cv: float = 1.0  # gamma only
    concurrency: int = 32  # closed only
    num_requests: int = MAX_DEFAULT_REQUESTS
    prompt: dict[str, Any] = field(default_factory=lambda: dict(DEFAULT_LENGTHS["prompt"]))
    output: dict[str, Any] = field(default_factory=lambda: dict(DEFAULT_LENGTHS["output"]))
    trace: str | None = None  # path of a trace giving lengths (and arrivals for "trace")
    ttft_ms: float = 500.0
    tpot_ms: float = 50.0
    percentile: float = 99.0
    replicas: int = 1
    router: str = "round_robin"


def policy_settings(point: dict[str, Any], name: str) -> dict[str, Any]:
    """The knobs policy ``name`` would get: shared knobs, then its ``[policy.<name>]`` table."""
    table = point.get("policy", {})
    shared = {k: v for k, v in table.items() if k not in POLICY_NAMES and k != "name"}
    return {**shared, **table.get(name, {})}


def knobs_from_point(point: dict[str, Any]) -> Knobs:
    """Sidebar defaults from a one-point scenario; absent fields keep ``Knobs`` defaults."""
    d = Knobs()
    model, hw = point.get("model", {}), point.get("hardware", {})
    wl, slo, cl = point.get("workload", {}), point.get("slo", {}), point.get("cluster", {})
    policy = point.get("policy", {}).get("name", d.policy)
    knobs = policy_settings(point, policy)
    chunk = policy_settings(point, "chunked").get("max_num_batched_tokens")
    tokens = knobs.get("max_num_batched_tokens", d.max_num_batched_tokens)
    n = wl.get("num_requests")
    return Knobs(
        model=model.get("name", d.model), gpu=hw.get("gpu", d.gpu),
        weight_dtype=model.get("weight_dtype", d.weight_dtype), tp=hw.get("tp", d.tp),
        policy=policy, batch_size=knobs.get("batch_size", d.batch_size),
        max_batch_size=knobs.get("max_batch_size", d.max_batch_size),
        max_wait_s=float(knobs.get("max_wait_s", d.max_wait_s)),
        max_num_seqs=knobs.get("max_num_seqs", d.max_num_seqs),
        max_num_batched_tokens=chunk if policy == "chunked" and chunk else tokens,
        arrival=wl.get("arrival", "trace" if wl.get("trace") else d.arrival),
        rate=float(wl.get("rate") or d.rate), cv=float(wl.get("cv", d.cv)),
        concurrency=wl.get("concurrency", d.concurrency),
        num_requests=min(n, MAX_DEFAULT_REQUESTS) if n else MAX_DEFAULT_REQUESTS,
        prompt=dict(wl.get("prompt", DEFAULT_LENGTHS["prompt"])),
        output=dict(wl.get("output", DEFAULT_LENGTHS["output"])),
        trace=wl.get("trace"),
        ttft_ms=float(slo.get("ttft_ms", d.ttft_ms)), tpot_ms=float(slo.get("tpot_ms", d.tpot_ms)),
        percentile=float(slo.get("percentile", d.percentile)),
        replicas=cl.get("replicas", d.replicas), router=cl.get("router", d.router),
    )


def policy_table(k: Knobs) -> dict[str, Any]:
    """The ``[policy]`` table for the chosen policy with only its own knobs, flattened."""
    if k.policy == "static":
        return {"name": "static", "batch_size": k.batch_size}
    if k.policy == "dynamic":
        return {"name": "dynamic", "max_batch_size": k.max_batch_size, "max_wait_s": k.max_wait_s}
    return {"name": k.policy, "max_num_seqs": k.max_num_seqs,
            "max_num_batched_tokens": k.max_num_batched_tokens}


def workload_table(k: Knobs) -> dict[str, Any]:
    """The ``[workload]`` table: arrival process, and lengths from distributions or a trace."""
    wl: dict[str, Any] = {"arrival": k.arrival}
    if k.arrival == "closed":
        wl["concurrency"] = k.concurrency
    else:
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
    """A copy of ``point`` with the sidebar's values written in (one point, no lists)."""
    out = copy.deepcopy(point)
    out["model"] = {**out.get("model", {}), "name": k.model, "weight_dtype": k.weight_dtype}
    if k.weight_dtype != point.get("model", {}).get("weight_dtype"):
        out["model"].pop("kv_dtype", None)  # let resolve pick the KV dtype for the new weights
    out["hardware"] = {"gpu": k.gpu, "tp": k.tp}
    out["policy"] = policy_table(k)
    out["workload"] = workload_table(k)
    out["slo"] = {"ttft_ms": k.ttft_ms, "tpot_ms": k.tpot_ms, "percentile": k.percentile}
    out["cluster"] = {"replicas": k.replicas, "router": k.router}
    return out
