"""The typed scenario: one frozen, validated object per scenario point.

``Scenario.from_dict(point, source)`` is the one constructor: it checks every section of
one (non-sweep) point strictly (types, ranges, unknown fields; simulator/scenario_fields.py
says what strict means) and every default lives here, in the section dataclasses, or in
the classes they reuse (``KVCacheConfig``, ``WorkloadConfig``, ``SLO``, the policy
classes listed in ``simulator.policies.POLICIES``). Callers read the fields; they never
restate a default. ``[cost]`` stays a (read-only) table: its forms are many and
``cost_model_from_config`` checks it against the model and GPU it prices.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Any

from simulator.errors import ConfigError, did_you_mean
from simulator.fleet.disagg_section import DISAGG_OFF, DisaggSection
from simulator.fleet.sections import (
    ADMISSION_OFF,
    AUTOSCALE_OFF,
    AdmissionSection,
    AutoscaleSection,
)
from simulator.kv_config import KVCacheConfig
from simulator.policies import POLICIES, knob_rules, make_policy, policy_knobs
from simulator.router import ROUTERS
from simulator.scenario_fields import (
    FieldInfo,
    FieldRule,
    build_section,
    check_fields,
    default_of,
    rules,
    spec,
)
from simulator.scenario_policy import PolicySection
from simulator.slo import SLO
from simulator.specs.dtypes import kv_dtype_bytes, natural_kv_dtype, weight_dtype_bytes
from simulator.specs.hardware import HardwareSpec, get_hardware
from simulator.specs.models import ModelSpec, get_model
from simulator.speculative_section import SpeculativeSection, speculating
from simulator.stacks import StackSection, apply_stack
from simulator.steplog import STEP_LOG_MODES
from simulator.workload.config import WorkloadConfig


@dataclass(frozen=True, slots=True)
class ModelSection:
    """``[model]``: the model served and its data types."""

    # catalogue name, Hugging Face id, or a folder / config.json (relative: to the scenario)
    name: str = spec("llama-3.1-8b")
    weight_dtype: str = spec("bf16")  # fp32, fp16, bf16, fp8, int8, int4 or mxfp4
    # fp16, bf16 or fp8; None: see kv_dtype_used (vLLM's and SGLang's [stack] presets give
    # quantised weights a bf16 cache, their --kv-cache-dtype auto: simulator/stacks.py)
    kv_dtype: str | None = spec(None)

    def __post_init__(self) -> None:
        check_fields(self, "model")
        if not self.name.strip():
            raise ConfigError(f"model.name = {self.name!r}: must name a model")
        weight_dtype_bytes(self.weight_dtype, "model.weight_dtype")
        if self.kv_dtype is not None:
            kv_dtype_bytes(self.kv_dtype, "model.kv_dtype")

    @property
    def kv_dtype_used(self) -> str:
        """The KV cache's dtype: as given, else bf16 for 16/32-bit weights and fp8 below."""
        if self.kv_dtype is not None:
            return self.kv_dtype
        return natural_kv_dtype(self.weight_dtype)


@dataclass(frozen=True, slots=True)
class HardwareSection:
    """``[hardware]``: the device, the tensor-parallel degree and the attention
    data-parallel ranks (a MoE model's experts spread over them: simulator/costs/roofline.py,
    "attention data parallel")."""

    gpu: str = spec("h100-sxm")  # a name or alias in simulator/specs/hardware.py
    tp: int = spec(1, unit="GPUs per attention rank", low=1)
    # attention data-parallel ranks of tp GPUs each (TensorRT-LLM's DEP: tp 1); a replica's
    # GPUs are tp x attention_dp, its batch limits and KV cache the ranks' together
    attention_dp: int = spec(1, unit="ranks per replica", low=1)
    # under attention_dp: each GPU holds E / attention_dp whole experts (expert parallel:
    # TensorRT-LLM's DEP, vLLM's --enable-expert-parallel); false: every expert split over
    # the ranks (SGLang's DP attention without expert parallelism). No effect at
    # attention_dp 1, where tensor parallelism splits every expert already (as mixed_chunks
    # has none without chunked prefill), so a sweep over attention_dp may hold it fixed
    expert_parallel: bool = spec(True)

    @property
    def gpus(self) -> int:
        """GPUs per replica: tp x attention_dp."""
        return self.tp * self.attention_dp

    def __post_init__(self) -> None:
        check_fields(self, "hardware")
        try:
            get_hardware(self.gpu)
        except ConfigError as e:
            raise ConfigError(f"hardware.gpu = {self.gpu!r}: {_reason(e)}") from None


@dataclass(frozen=True, slots=True)
class ClusterSection:
    """``[cluster]``: identical replicas behind a router."""

    replicas: int = spec(1, unit="replicas", low=1)
    router: str = spec("round_robin", choices=tuple(ROUTERS))

    def __post_init__(self) -> None:
        check_fields(self, "cluster")


@dataclass(frozen=True, slots=True)
class RunSection:
    """``[run]``: how the simulation runs."""

    horizon_s: float | None = spec(None, unit="s", low=0, low_open=True)  # None: run it all
    fast_forward: bool = spec(True)  # skip runs of identical decode steps (same answer)
    check_invariants: bool = spec(False)  # assert the scheduler's invariants every step
    # what is kept of the step log: every row, a summary (ITL within 0.1%), nothing
    step_log: str = spec("full", choices=STEP_LOG_MODES)

    def __post_init__(self) -> None:
        check_fields(self, "run")


SECTIONS = ("model", "hardware", "stack", "kv", "policy", "workload", "slo", "cluster", "cost",
            "run", "speculative", "admission", "autoscale", "disaggregated")
TOP_LEVEL = ("name", "description", "seed")


@dataclass(frozen=True, slots=True)
class Scenario:
    """One scenario point, every section typed and checked; built by :meth:`from_dict`."""

    name: str = spec("scenario")
    description: str = spec("")
    seed: int = spec(0, low=0)  # seed of the point's numpy Generator
    base_dir: str | None = spec(None)  # the scenario file's folder: relative paths start here
    model: ModelSection = field(default_factory=ModelSection)
    hardware: HardwareSection = field(default_factory=HardwareSection)
    stack: StackSection = field(default_factory=StackSection)
    kv: KVCacheConfig = field(default_factory=KVCacheConfig)
    policy: PolicySection = field(default_factory=PolicySection)
    workload: WorkloadConfig = field(default_factory=WorkloadConfig)
    slo: SLO | None = None  # None: no [slo] (or an empty one)
    cluster: ClusterSection = field(default_factory=ClusterSection)
    cost: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))
    run: RunSection = field(default_factory=RunSection)
    speculative: SpeculativeSection = field(default_factory=SpeculativeSection)
    admission: AdmissionSection = ADMISSION_OFF  # [admission] (docs/fleet.md): off unless given
    autoscale: AutoscaleSection = AUTOSCALE_OFF  # [autoscale] (docs/fleet.md): off unless given
    # [disaggregated] (docs/fleet.md): prefill and decode pools; off unless given
    disaggregated: DisaggSection = DISAGG_OFF

    def __post_init__(self) -> None:
        check_fields(self, "")

    @classmethod
    def from_dict(cls, point: Mapping[str, Any], source: str | None = None) -> Scenario:
        """Check one scenario point (a dict as ``load_scenario`` and ``expand_sweep`` give)
        and build it; errors name ``section.field``, the bad value and ``source``."""
        try:
            return cls._build(point)
        except ConfigError as e:
            if source and not str(e).startswith(str(source)):
                raise ConfigError(f"{source}: {e}") from None
            raise

    @classmethod
    def _build(cls, point: Mapping[str, Any]) -> Scenario:
        for key, value in point.items():
            if key.startswith("_") or key in TOP_LEVEL:
                continue
            if key not in SECTIONS:
                raise ConfigError(f"unknown section [{key}]{did_you_mean(key, SECTIONS)}; "
                                  f"known: {sorted(SECTIONS)}")
            if not isinstance(value, Mapping):
                raise ConfigError(f"[{key}] must be a table, got {value!r}")
        stack = build_section(StackSection, point.get("stack"), "stack")
        base = point.get("_base_dir")
        preset = stack.preset()
        if preset is not None:  # the stack's defaults under the point's own
            model = build_section(ModelSection, point.get("model"), "model")
            hardware = build_section(HardwareSection, point.get("hardware"), "hardware")
            point = apply_stack(point, preset,
                                get_model(model.name, base_dir=base, where="model.name"),
                                get_hardware(hardware.gpu), gpus=hardware.gpus)
        top = {k: point[k] for k in TOP_LEVEL if k in point}
        slo = point.get("slo")
        speculative = SpeculativeSection.from_table(point.get("speculative"))
        return cls(
            **top, base_dir=None if base is None else str(base),
            model=build_section(ModelSection, point.get("model"), "model"),
            hardware=build_section(HardwareSection, point.get("hardware"), "hardware"),
            stack=stack,
            kv=build_section(KVCacheConfig, point.get("kv"), "kv"),
            policy=speculating(point.get("policy") or {}, speculative),
            workload=WorkloadConfig.from_dict(point.get("workload") or {}, base_dir=base),
            slo=SLO.from_dict(slo) if slo else None,
            cluster=build_section(ClusterSection, point.get("cluster"), "cluster"),
            cost=_cost_table(point.get("cost") or {}),
            run=build_section(RunSection, point.get("run"), "run"),
            speculative=speculative,
            admission=build_section(AdmissionSection, point.get("admission"), "admission"),
            autoscale=_autoscale(point.get("autoscale"), point.get("cluster")),
            disaggregated=build_section(DisaggSection, point.get("disaggregated"),
                                        "disaggregated") if "disaggregated" in point
            else DISAGG_OFF,
        )

    def model_spec(self) -> ModelSpec:
        """The model's spec; a relative config path is taken from the scenario's folder."""
        return get_model(self.model.name, base_dir=self.base_dir, where="model.name")

    def hardware_spec(self) -> HardwareSpec:
        """The device's spec from the catalogue."""
        return get_hardware(self.hardware.gpu)

    def served_context(self) -> int:
        """The longest sequence (prompt + output) served: the model's own context, or a
        longer ``policy.max_model_len`` (an engine built for longer sequences than the
        config's positions, such as trtllm-bench's ``max_seq_len`` = ISL + OSL, or vLLM with
        ``VLLM_ALLOW_LONG_MAX_MODEL_LEN``). A shorter one does not shorten requests: the
        policy refuses those over it, as vLLM does at its API."""
        own = self.model_spec().max_context_tokens
        return max(own, int(getattr(self.policy.policy, "max_model_len", 0) or 0))


def _autoscale(table: Any, cluster: Any) -> AutoscaleSection:
    """``[autoscale]``, off when absent; on, ``[cluster] replicas`` must lie in its range."""
    if table is None:
        return AUTOSCALE_OFF
    section = build_section(AutoscaleSection, table, "autoscale")
    if section.enabled:
        section.check_start(build_section(ClusterSection, cluster, "cluster").replicas)
    return section


def _cost_table(table: Mapping[str, Any]) -> Mapping[str, Any]:
    """``[cost]`` read-only, its keys checked (values: by cost_model_from_config)."""
    from simulator.costs.from_config import SECTION_KEYS

    for key in table:
        if key not in SECTION_KEYS:
            raise ConfigError(f"cost.{key} is not a cost setting; known: {', '.join(SECTION_KEYS)}")
    return MappingProxyType({k: MappingProxyType(dict(v)) if isinstance(v, Mapping) else v
                             for k, v in table.items()})


def _reason(e: ConfigError) -> str:
    """The part of a catalogue error after the name: ``is not a known device; known: ...``."""
    text = str(e)
    return text.split(" ", 1)[1] if text.startswith("hardware=") else text


def section_fields() -> dict[str, tuple[str, ...]]:
    """Each section's field names (empty: a table its own class checks), for check_structure."""
    typed = {"model": ModelSection, "hardware": HardwareSection, "stack": StackSection,
             "kv": KVCacheConfig, "cluster": ClusterSection, "run": RunSection,
             "speculative": SpeculativeSection, "admission": AdmissionSection,
             "autoscale": AutoscaleSection, "disaggregated": DisaggSection}
    out = {s: tuple(r.name for r in rules(c)) for s, c in typed.items()}
    out["policy"] = ("name", *knob_rules(), *POLICIES)
    out.update(workload=(), slo=(), cost=())
    return {s: out[s] for s in SECTIONS}


def schema_rules() -> dict[str, FieldRule]:
    """Every scalar field of the schema by ``section.field`` (top-level: ``field``): what
    each accepts. ``[cost]`` is left out (its keys depend on its form), and so are the
    length tables ``workload.prompt`` and ``workload.output``."""
    out = {r.name: r for r in rules(Scenario) if r.kind != "other" and r.name != "base_dir"}
    typed = {"model": ModelSection, "hardware": HardwareSection, "stack": StackSection,
             "kv": KVCacheConfig, "cluster": ClusterSection, "run": RunSection,
             "workload": WorkloadConfig, "slo": SLO, "speculative": SpeculativeSection,
             "admission": AdmissionSection, "autoscale": AutoscaleSection,
             "disaggregated": DisaggSection}
    for section, cls in typed.items():
        out.update({f"{section}.{r.name}": r for r in rules(cls)
                    if r.kind != "other" and r.name not in ("where", "ignored")})
    policy = next(r for r in rules(PolicySection) if r.name == "name")
    out["policy.name"] = replace(policy, choices=tuple(POLICIES))  # the registry, as it is now
    for knob, (_, rule) in knob_rules().items():
        out[f"policy.{knob}"] = rule
        for name in POLICIES:
            if knob in policy_knobs(name):
                out[f"policy.{name}.{knob}"] = rule
    return out


def field_rule(key: str) -> FieldInfo:
    """The field ``key`` (``section.field`` as :func:`schema_rules` names it) with its
    default: the value ``Scenario.from_dict({})`` runs with (``workload.rate``: the rate
    used when none is given), a policy knob's from its policy class (``policy.<knob>``:
    the first class declaring it), an ``[slo]`` field's from the SLO class. Faces (the
    dashboard's form) read defaults, choices and ranges here instead of restating them."""
    rule = schema_rules().get(key)
    if rule is None:
        raise KeyError(f"{key}: not a scalar scenario field")
    parts = key.split(".")
    if parts[0] == "policy" and len(parts) == 3:
        return FieldInfo(key, rule, getattr(make_policy(parts[1]), parts[2]))
    if parts[0] == "policy" and parts[1] != "name":
        return FieldInfo(key, rule, default_of(knob_rules()[parts[1]][0], parts[1]))
    value: Any = Scenario.from_dict({})
    for part in parts:
        value = default_of(SLO, part) if value is None else getattr(value, part)
    return FieldInfo(key, rule, value)


__all__ = ["ClusterSection", "HardwareSection", "ModelSection", "PolicySection", "RunSection",
           "Scenario", "StackSection", "field_rule", "schema_rules", "section_fields"]
