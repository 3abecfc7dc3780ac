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
import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from simulator.errors import ConfigError
from simulator.kv_config import KVCacheConfig
from simulator.policies import caches_prefixes
from simulator.scenario_fields import build_section, check_fields, spec
from simulator.specs.dtypes import natural_kv_dtype
from simulator.specs.hardware import HardwareSpec
from simulator.specs.model_spec import ModelSpec
from simulator.stack_presets import STACKS, StackPreset

NONE = "none"
WINDOW_RULES = frozenset({"window_share", "window_held"})  # [kv]: how window layers are kept


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
        """The stack's preset at ``version`` (None for ``none``).

        A preset marks a release where the stack's behaviour changed, so a release between
        two presets gets the earlier one (``trtllm`` 0.13: the 0.12 preset) and one after
        the last gets the last. A ConfigError names the versions when ``version`` is older
        than the first preset or not a release number."""
        if self.name == NONE:
            return None
        presets = STACKS[self.name]
        if not self.version:
            return presets[-1]
        for p in presets:
            if p.version == self.version:
                return p
        asked = release(self.version)
        earlier = [p for p in presets
                   if asked is not None and (release(p.version) or ()) <= asked]
        if earlier:
            return earlier[-1]
        raise ConfigError(f"stack.version = {self.version!r}: {self.name} presets exist for "
                          f"{[p.version for p in presets]} (a later release takes the "
                          "newest preset at or before it)")

    def describe(self) -> str:
        """``none``, the preset's name (``vllm-v1 0.9``), or, for a release that takes an
        earlier preset, both: ``trtllm 0.12 (for 0.13)``."""
        preset = self.preset()
        if preset is None:
            return NONE
        asked = self.version and self.version != preset.version
        return f"{preset.describe()} (for {self.version})" if asked else preset.describe()


def _refuse_narrow(preset: StackPreset, hardware: HardwareSpec, model: Mapping[str, Any]) -> None:
    """A ConfigError naming the field when ``model`` asks ``preset``'s stack for FP8 or
    MXFP4 experts on a GPU without FP8 tensor cores (``StackPreset.fp8_needs_fp8_math``)."""
    weights = model.get("weight_dtype")
    kv = model.get("kv_dtype")
    if isinstance(weights, str) and weights.lower() == "mxfp4":
        raise ConfigError(
            f"model.weight_dtype = {weights}: {preset.describe()} has no MXFP4 expert kernels "
            f"for {hardware.name} (its W4A16 MXFP4 MoE needs Hopper or later: 'WFP4A16 MoE "
            "is unsupported on SM80', GPUStack's TensorRT-LLM runs of gpt-oss on an A100); "
            "use a vLLM or SGLang stack, which run MXFP4 experts on Ampere (Marlin)")
    if isinstance(weights, str) and weights.lower() == "fp8":
        field, value = "model.weight_dtype", weights
    elif isinstance(kv, str) and kv.lower() == "fp8":
        field, value = "model.kv_dtype", kv
    else:
        return
    raise ConfigError(
        f"{field} = {value}: {preset.describe()} runs FP8 only on GPUs with FP8 tensor cores "
        f"(Ada, Hopper, Blackwell), and {hardware.name} has none; use bf16, int8 or int4 "
        "weights with a 16-bit KV cache, or a vLLM or SGLang stack (FP8 weights as "
        "weight-only kernels)")


def release(version: str) -> tuple[int, ...] | None:
    """``"0.13"`` -> (0, 13), ``"0.6.2"`` -> (0, 6, 2); None when not a release number."""
    parts = version.strip().split(".")
    return tuple(int(p) for p in parts) if all(p.isdigit() for p in parts) else None


def apply_stack(point: Mapping[str, Any], preset: StackPreset | None,
                model: ModelSpec | None = None, hardware: HardwareSpec | None = None,
                gpus: int = 1) -> dict[str, Any]:
    """``point`` with the preset's tables under the scenario's own (what it gives wins).

    ``[policy]``: the preset's knobs (for ``model`` on ``hardware`` when given) are shared
    knobs: they apply to every policy that has them, and a static or dynamic policy named
    by the scenario keeps its own. ``[kv]``: the preset's fields (on ``gpus`` x
    ``hardware`` when given, for a stack whose memory share follows them) unless the
    scenario sets them (its prefix caching not under a static or dynamic policy, nor with
    ``[disaggregated]`` pools). ``[model] kv_dtype``: for quantised weights the scenario
    gives without one, the stack's (``fp8_kv_with``); FP8 on a GPU the stack cannot run it
    on is refused.
    ``[cost] overhead``: the preset's host costs (for ``model``'s depth on ``gpus``
    GPUs, the scenario's ``hardware.tp``), term by term under the scenario's, unless the
    scenario prices steps itself (a fitted ``form``: inline coefficients, host work
    included; ``profile``: a file, whose host terms are its own). ``form = "roofline"``
    keeps them: its knobs are the prior's kernels, as when an empty section falls back to
    the prior, which gets the stack's host costs too.
    """
    out = copy.deepcopy(dict(point))
    if preset is None:
        return out
    own = dict(out.get("policy") or {})
    if model is not None and isinstance(own.get("max_model_len"), int) and own["max_model_len"] > 0:
        # defaults that follow the context (vLLM v0's long-context chunked prefill) follow
        # the max_model_len the user serves with, as vLLM's EngineArgs read it
        model = dataclasses.replace(model, max_context_tokens=own["max_model_len"])
    defaults = (preset.policy_for(model, hardware, own) if model and hardware
                else dict(preset.policy))
    out["policy"] = {**defaults, **own}
    own_kv = out.get("kv")
    fraction = own_kv.get("gpu_memory_utilization") if isinstance(own_kv, Mapping) else None
    if not (isinstance(fraction, (int, float)) and not isinstance(fraction, bool)
            and 0 < fraction <= 1):
        fraction = None  # none of its own (a bad one is left for [kv]'s own check)
    # by GPU and TP where the stack's are, and the scenario's own fraction's reserve
    layout = preset.kv_for(hardware, gpus, defaults, fraction)
    split = out.get("disaggregated")
    pools = isinstance(split, Mapping) and split.get("enabled", True) is not False
    name = out["policy"].get("name")
    if pools or (isinstance(name, str) and not caches_prefixes(name)):
        # a padded policy cannot reuse prefixes, nor can [disaggregated] pools yet
        # (simulator/deployment.py and fleet/disagg_build.py refuse the scenario's own)
        layout.pop("prefix_caching", None)
    own_layout = dict(out.get("kv") or {})
    if WINDOW_RULES & own_layout.keys():  # the scenario's own window rule replaces the
        for key in WINDOW_RULES:  # stack's whole (a share and a held window exclude
            layout.pop(key, None)  # each other: KVCacheConfig)
    out["kv"] = {**layout, **own_layout}
    section = out.get("model")
    section = dict(section) if isinstance(section, Mapping) else {}
    weights = section.get("weight_dtype")
    if (preset.fp8_kv_with is not None and section.get("kv_dtype") is None
            and isinstance(weights, str) and natural_kv_dtype(weights) == "fp8"):
        # quantised weights: the checkpoint decides the cache (servesim's own default: fp8)
        kv = "fp8" if weights.lower() in preset.fp8_kv_with else "bf16"
        section = {**section, "kv_dtype": kv}
        out["model"] = section
    if preset.fp8_needs_fp8_math and hardware is not None and hardware.fp8_tflops is None:
        _refuse_narrow(preset, hardware, section)
    cost = dict(out.get("cost") or {})
    given = cost.get("overhead", {})
    host = preset.host_costs(model.num_layers if model else 0, gpus, hardware)
    fitted_form = cost.get("form", "roofline") != "roofline"
    if host and not fitted_form and "profile" not in cost and isinstance(
            given, Mapping):  # a bad overhead value is left for [cost]'s own check
        cost["overhead"] = {**host, **dict(given)}
        out["cost"] = cost
    policy = out["policy"]
    if (preset.slots_rule is not None and model is not None and hardware is not None
            and "max_num_seqs" in policy and "max_num_seqs" not in own):
        tokens = _pool_tokens(out, model, hardware, gpus)
        context = policy.get("max_model_len")
        if not (isinstance(context, int) and context > 0):
            context = model.max_context_tokens
        if tokens is not None and tokens >= 2:
            policy["max_num_seqs"] = preset.slots_rule(tokens, context)
    return out


def _pool_tokens(point: Mapping[str, Any], model: ModelSpec, hardware: HardwareSpec,
                 gpus: int) -> int | None:
    """The KV tokens ``point``'s ``[kv]`` gives a replica of ``gpus`` x ``hardware`` (as
    ``deployment.resolve`` sizes it), or None where its ``[model]`` or ``[kv]`` is not
    valid or nothing fits (left for the scenario's own checks to report)."""
    section = point.get("model")
    section = section if isinstance(section, Mapping) else {}
    weights = section.get("weight_dtype", "bf16")
    try:
        kv = build_section(KVCacheConfig, point.get("kv"), "kv")
        cache = section.get("kv_dtype") or natural_kv_dtype(weights)
        tp = dict(point.get("hardware") or {}).get("tp", 1)  # checked by the scenario
        blocks = kv.capacity_blocks(memory_bytes=hardware.memory_bytes, tp=gpus,
                                    weight_bytes=model.weight_bytes(weights),
                                    kv_bytes_per_token=kv.pool_bytes_per_token(model, cache, tp))
    except (ConfigError, ValueError, TypeError, KeyError):
        return None
    return blocks * kv.block_size
