"""Serving stacks as presets: what vLLM, SGLang and TensorRT-LLM do out of the box.

A scenario's ``[stack]`` section names a stack (and optionally a version). The stack's
preset fills in what the user did not say: the ``[policy]`` (scheduler semantics and the
defaults a user gets: token budget, running-request cap, chunked prefill, admission and
preemption rules, multi-step), the ``[kv]`` layout (block size, memory share) and the
host costs (``[cost] overhead``), and chooses the stack's kernel tables
(``simulator/profiles/stacks/<profiles>/``, else the generic TensorRT-LLM-composed
profiles). Everything the scenario gives explicitly wins, knob by knob::

    [stack]
    name = "vllm-v1"        # none | vllm-v0 | vllm-v1 | sglang | trtllm
    version = "0.10"        # optional: a version where the defaults changed

``name = "none"`` (the default) changes nothing: servesim's own policy as the scenario
gives it. Each preset lists its sources (the file and release its defaults were read
from); docs/stacks.md explains every value.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from simulator.errors import ConfigError
from simulator.scenario_fields import check_fields, spec

NONE = "none"


@dataclass(frozen=True, slots=True)
class StackPreset:
    """One stack at one version: the tables it fills in and where its numbers come from."""

    stack: str  # vllm-v0 | vllm-v1 | sglang | trtllm
    version: str  # the release whose defaults these are
    policy: Mapping[str, Any]  # [policy] defaults: name and knobs
    kv: Mapping[str, Any] = field(default_factory=dict)  # [kv] defaults
    overhead: Mapping[str, float] = field(default_factory=dict)  # host costs, s
    # host costs that grow with the model's depth: s per layer (times num_layers)
    overhead_per_layer: Mapping[str, float] = field(default_factory=dict)
    profiles: str | None = None  # kernel tables: simulator/profiles/stacks/<profiles>/
    sources: tuple[str, ...] = ()  # where each default was read

    def host_costs(self, num_layers: int) -> dict[str, float]:
        """Host costs (s) for a model of ``num_layers`` layers: fixed plus per-layer terms."""
        out = dict(self.overhead)
        for key, per_layer in self.overhead_per_layer.items():
            out[key] = out.get(key, 0.0) + per_layer * num_layers
        return out

    def describe(self) -> str:
        """``vllm-v1 0.10``: the preset's name, for cost sources and summaries."""
        return f"{self.stack} {self.version}"


def _preset(stack: str, version: str, policy: dict[str, Any], kv: dict[str, Any] | None = None,
            overhead: dict[str, float] | None = None, profiles: str | None = None,
            sources: tuple[str, ...] = (),
            per_layer: dict[str, float] | None = None) -> StackPreset:
    return StackPreset(stack, version, MappingProxyType(policy), MappingProxyType(kv or {}),
                       MappingProxyType(overhead or {}), MappingProxyType(per_layer or {}),
                       profiles, sources)


# vLLM's per-request CPU dispatch before its first token, which kernel timings miss: 0.8 ms
# per layer, as NVIDIA recalibrated it "against the full silicon corpus" (AIConfigurator
# 0.12.0 aiconfigurator_core/sdk/backends/vllm_backend.py, _prefill_dispatch_overhead_ms;
# its TensorRT-LLM and SGLang backends add none). It delays each request's first token and
# blocks no one else: our non-blocking request_s.
VLLM_DISPATCH = {"request_s": 0.8e-3}
VLLM_DISPATCH_SOURCE = ("host: request_s 0.8 ms x layers, AIConfigurator 0.12.0 "
                        "sdk/backends/vllm_backend.py _prefill_dispatch_overhead_ms")


# Each stack's versions, oldest first; the last is the default. Values are the defaults of
# the stack's OpenAI-compatible server (what `vllm serve`, `python -m sglang.launch_server`
# and `trtllm-serve` do without flags) on an 80 GB-class GPU.
STACKS: Mapping[str, tuple[StackPreset, ...]] = MappingProxyType({
    "vllm-v0": (
        _preset("vllm-v0", "0.6", {
            "name": "continuous", "max_num_seqs": 256, "max_num_batched_tokens": 8192,
            "chunked_prefill": False},
            kv={"block_size": 16, "gpu_memory_utilization": 0.9}, profiles="vllm",
            per_layer=VLLM_DISPATCH,
            sources=(VLLM_DISPATCH_SOURCE, "vllm v0.6.x vllm/engine/arg_utils.py (max_num_seqs 256, block_size 16, "
                     "gpu_memory_utilization 0.9); vllm/config.py SchedulerConfig "
                     "(max_num_batched_tokens = max(max_model_len, 2048) without chunked "
                     "prefill)",)),
    ),
    "vllm-v1": (
        _preset("vllm-v1", "0.8", {
            "name": "chunked", "max_num_seqs": 256, "max_num_batched_tokens": 2048},
            kv={"block_size": 16, "gpu_memory_utilization": 0.9}, profiles="vllm",
            per_layer=VLLM_DISPATCH,
            sources=(VLLM_DISPATCH_SOURCE, "vllm v0.8.x vllm/engine/arg_utils.py _set_default_args_v1 (online "
                     "server: max_num_batched_tokens 2048, max_num_seqs 256; chunked prefill "
                     "always on in V1)",)),
        _preset("vllm-v1", "0.10", {
            "name": "chunked", "max_num_seqs": 1024, "max_num_batched_tokens": 8192},
            kv={"block_size": 16, "gpu_memory_utilization": 0.9}, profiles="vllm",
            per_layer=VLLM_DISPATCH,
            sources=(VLLM_DISPATCH_SOURCE, "vllm v0.10.x vllm/engine/arg_utils.py _set_default_args_v1 (GPUs of "
                     "70 GB or more, online server: max_num_batched_tokens 8192, "
                     "max_num_seqs 1024)",)),
    ),
    "sglang": (
        _preset("sglang", "0.5", {
            "name": "chunked", "max_num_seqs": 1024, "max_num_batched_tokens": 8192},
            kv={"block_size": 1, "gpu_memory_utilization": 0.88}, profiles="sglang",
            sources=("sglang v0.5 python/sglang/srt/server_args.py (chunked_prefill_size "
                     "8192 on 80 GB-class GPUs, page_size 1, mem_fraction_static ~0.88)",)),
    ),
    "trtllm": (
        _preset("trtllm", "1.0", {
            "name": "continuous", "max_num_seqs": 2048, "max_num_batched_tokens": 8192,
            "chunked_prefill": False},
            kv={"block_size": 32, "gpu_memory_utilization": 0.9}, profiles=None,
            sources=("TensorRT-LLM 1.0 tensorrt_llm/llmapi/llm_args.py (max_batch_size 2048, "
                     "max_num_tokens 8192, enable_chunked_prefill false, tokens_per_block 32, "
                     "free_gpu_memory_fraction 0.9)",)),
    ),
})


def stack_names() -> tuple[str, ...]:
    """``none`` and every stack with a preset."""
    return (NONE, *STACKS)


@dataclass(frozen=True, slots=True)
class StackSection:
    """``[stack]``: the serving stack whose defaults, kernels and host costs to use."""

    name: str = spec(NONE, choices=stack_names())  # none: servesim's own policy as given
    version: str = spec("")  # "": the stack's latest preset; see STACKS for the versions

    def __post_init__(self) -> None:
        check_fields(self, "stack")
        if self.name == NONE and self.version:
            raise ConfigError(f"stack.version = {self.version!r}: needs stack.name (a stack "
                              f"among {list(STACKS)})")
        if self.name != NONE:
            self.preset()  # the version must exist

    def preset(self) -> StackPreset | None:
        """The stack's preset at ``version`` (None for ``none``); a ConfigError naming the
        versions when there is no such version."""
        if self.name == NONE:
            return None
        presets = STACKS[self.name]
        if not self.version:
            return presets[-1]
        for p in presets:
            if p.version == self.version:
                return p
        raise ConfigError(f"stack.version = {self.version!r}: {self.name} presets exist for "
                          f"{[p.version for p in presets]}")


def apply_stack(point: Mapping[str, Any], preset: StackPreset | None,
                num_layers: int = 0) -> dict[str, Any]:
    """``point`` with the preset's tables under the scenario's own (what it gives wins).

    ``[policy]``: the preset's knobs are shared knobs (they apply to every policy that has
    them; a static or dynamic policy named by the scenario keeps its own). ``[kv]``: the
    preset's fields unless the scenario sets them. ``[cost] overhead``: the preset's host
    costs (for a model of ``num_layers`` layers), term by term under the scenario's, unless the scenario prices steps itself
    (``form``: inline coefficients; ``profile``: a file, whose host terms are its own).
    """
    out = copy.deepcopy(dict(point))
    if preset is None:
        return out
    out["policy"] = {**preset.policy, **dict(out.get("policy") or {})}
    out["kv"] = {**preset.kv, **dict(out.get("kv") or {})}
    cost = dict(out.get("cost") or {})
    given = cost.get("overhead", {})
    host = preset.host_costs(num_layers)
    if host and "form" not in cost and "profile" not in cost and isinstance(
            given, Mapping):  # a bad overhead value is left for [cost]'s own check
        cost["overhead"] = {**host, **dict(given)}
        out["cost"] = cost
    return out
