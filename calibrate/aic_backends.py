"""Which of AIConfigurator's tables each serving stack's composition reads.

AIConfigurator 0.12.0 (``aiconfigurator-core``) ships per-op kernel tables for three
engines under ``systems/data/<system>/<op>/<backend>/<version>/``: TensorRT-LLM
(``trtllm``), vLLM (``vllm``) and SGLang (``sglang``). calibrate/aiconfigurator.py composes
engine steps from one backend's tables; this module names, per backend, the table versions,
the kernel lane of tables that hold more than one, and the dtype rules that differ.

All three backends compose a step the same way in AIConfigurator: ``backends/base_backend.py``
``run_static`` sums the ops of the model's op list (``models/llama.py``, which does not
depend on the backend for a dense Llama without context parallelism), and neither
``vllm_backend.py`` nor ``sglang_backend.py`` overrides the per-step sum. What they add is
serving-level and per request (vLLM: ``_prefill_dispatch_overhead_ms`` = 0.8 ms x layers
on the TTFT of ``run_agg``; both: memory-fraction defaults, mixed-step and TTFT queuing
heuristics), which the simulator's own scheduler and host costs stand for, so the
composed steps here are kernel time only, as for TensorRT-LLM.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from simulator.costs.profile import PROFILES_DIR
from simulator.errors import ConfigError

DEFAULT_BACKEND = "trtllm"  # the shipped generic profiles (simulator/profiles/*.json)
# Our catalogue name -> (AIConfigurator system, table version) per backend: the "current"
# query slots of AIConfigurator 0.12.0 ``systems/query_versions.yaml`` (defaults, with the
# a100_sxm overrides). Every op family used (gemm, attention, comm) has that version.
VERSIONS: dict[str, dict[str, tuple[str, str]]] = {
    "trtllm": {"a100-80gb": ("a100_sxm", "1.0.0"), "h100-sxm": ("h100_sxm", "1.3.0rc20"),
               "h200": ("h200_sxm", "1.3.0rc20")},
    "vllm": {"a100-80gb": ("a100_sxm", "0.14.0"), "h100-sxm": ("h100_sxm", "0.24.0"),
             "h200": ("h200_sxm", "0.24.0")},
    "sglang": {"a100-80gb": ("a100_sxm", "0.5.10"), "h100-sxm": ("h100_sxm", "0.5.14"),
               "h200": ("h200_sxm", "0.5.14")},
}
BACKENDS = tuple(VERSIONS)
# More GPUs whose TensorRT-LLM tables are complete (gemm, attention and custom all-reduce at
# the "current" slot): calibrate/aic_models.py composes every model there, so the shipped
# Llama-3.1 set above keeps its deployments.
EXTRA_VERSIONS: dict[str, dict[str, tuple[str, str]]] = {
    "trtllm": {"l40s": ("l40s", "1.3.0rc20"), "b200": ("b200_sxm", "1.3.0rc20")},
}
ENGINE_NAMES = {"trtllm": "TensorRT-LLM", "vllm": "vLLM", "sglang": "SGLang"}
# Attention lane (the tables' ``kernel_source``) per (backend, SM version): AIConfigurator's
# framework-default map ``systems/attention_lane_defaults.yaml`` (sglang 0.5.14: sm90 fa3).
# A backend or SM without an entry takes the lane that holds the queried rows; for the
# Llama shapes (head_dim 128, no window) every other table has exactly one.
ATTENTION_LANES: dict[tuple[str, int], str] = {("sglang", 90): "fa3"}
# All-reduce lane: vLLM and SGLang time their custom all-reduce eager and captured in a
# CUDA graph; AIConfigurator's engine reads the graph rows (checked against run_static:
# SGLang h100 tp2, 32,768 elements, 2.96 us = the graph row; eager is 31.6 us).
ALLREDUCE_LANES = {"vllm": "vLLM_custom_graph", "sglang": "SGLang_CustomAllReduce_graph"}
# Context-attention (FMHA) compute dtype when the KV cache is fp8: vLLM's FlashAttention-3
# tables have only bf16 compute (fp8 KV read, bf16 math); AIConfigurator's engine refuses
# fmha fp8 on vllm ("context attention data missing"). TensorRT-LLM and SGLang run fp8.
FMHA_DTYPE = {("vllm", "fp8"): "bfloat16"}


def check_backend(backend: str) -> str:
    """``backend`` if AIConfigurator ships tables for it here, else a ConfigError."""
    if backend not in VERSIONS:
        raise ConfigError(f"backend={backend!r}: expected one of {', '.join(BACKENDS)}")
    return backend


def systems(backend: str) -> dict[str, tuple[str, str]]:
    """Our GPU name -> (AIConfigurator system, table version) for ``backend``."""
    return VERSIONS[check_backend(backend)]


def gpu_of_system(system: str) -> str:
    """Our GPU name of an AIConfigurator system (any backend, extra GPUs included)."""
    for table in (*VERSIONS.values(), *EXTRA_VERSIONS.values()):
        for hw, (name, _) in table.items():
            if name == system:
                return hw
    raise ConfigError(f"AIConfigurator system {system!r}: no catalogue GPU maps to it")


def fmha_dtype(backend: str, attn_dtype: str) -> str:
    """The context-attention compute dtype ``backend``'s tables hold for ``attn_dtype``."""
    return FMHA_DTYPE.get((backend, attn_dtype), attn_dtype)


def profiles_dir(backend: str) -> Path:
    """Where ``backend``'s profiles are written: the generic folder for TensorRT-LLM,
    ``simulator/profiles/stacks/<backend>/`` for the others."""
    if check_backend(backend) == DEFAULT_BACKEND:
        return PROFILES_DIR
    return PROFILES_DIR / "stacks" / backend


def select_lane(table: pd.DataFrame, backend: str, sm_version: int,
                family: str) -> pd.DataFrame:
    """The rows of one kernel lane of an attention or all-reduce table (``family``
    "attention" or "comm"); a table with a single lane is returned unchanged."""
    lanes = table["kernel_source"].unique() if "kernel_source" in table else []
    if len(lanes) <= 1:
        return table
    if family == "comm":
        lane = ALLREDUCE_LANES.get(backend)
    else:
        lane = ATTENTION_LANES.get((backend, sm_version))
    if lane is None:  # no framework default: keep every lane, the query's slice picks
        return table
    if lane not in lanes:
        raise ConfigError(f"{backend} {family} table: lane {lane!r} not among {sorted(lanes)}")
    return table[table["kernel_source"] == lane]


def lanes_used(backend: str, sm_version: int) -> dict[str, str]:
    """The lane names recorded in a profile's provenance."""
    return {"attention": ATTENTION_LANES.get((backend, sm_version), "the table's only lane"),
            "allreduce": ALLREDUCE_LANES.get(backend, "the table's only lane")}


def provenance_extra(backend: str, sm_version: int) -> dict[str, object]:
    """Provenance fields a non-default backend's profile adds to the TensorRT-LLM ones:
    the query slot, kernel lanes, dtype rule and composition used."""
    engine = ENGINE_NAMES[backend]
    fmha = ("context attention in bf16 over the fp8 KV cache (the tables have no fp8 FMHA)"
            if (backend, "fp8") in FMHA_DTYPE else "context attention in the KV dtype")
    per_request = (" AIConfigurator's vLLM backend adds 0.8 ms x layers of CPU dispatch to"
                   " each request's TTFT in run_agg only; it is a host cost, not modelled"
                   " here." if backend == "vllm" else "")
    return {
        "query_slot": "current (AIConfigurator 0.12.0 systems/query_versions.yaml)",
        "lanes": lanes_used(backend, sm_version),
        "fmha": fmha,
        "composition": f"{engine} kernel tables composed as AIConfigurator's run_static does "
                       "for every backend: the sum of LLAMAModel's ops per step, no per-step "
                       f"overhead (sdk/backends/{backend}_backend.py adds none).{per_request}",
    }
