"""The scenario hook: a scenario's ``[cost]`` section -> a cost model and where it came from.

Forms of the section (any of them may add ``time_scale = 0.8``, a what-if multiplier, and
``jitter_cv = 0.05``, random step-to-step variation; a measured profile that recorded its
repeat-to-repeat variation, ``fit.step_time_cv``, applies it unless ``jitter_cv = 0``)::

    [cost]                                  # empty: the shipped profile for this deployment,
                                            # else a roofline prior built on the fly
    [cost]
    profile = "profiles/mine.json"          # a cost-profile file (relative to the cwd, or a
                                            # shipped profile's file name); one measured for
    force = true                            # another hardware, model, tp or dtype is refused
                                            # unless forced (the run's cost source says so)
    [cost]
    form = "linear"                         # inline fitted coefficients (LinearCost fields;
                                            # form = "piecewise": PiecewiseCost fields)
    step_s = 0.004
    decode_seq_s = 2e-5
    [cost]
    form = "roofline"                       # roofline prior with knobs overridden
    memory_efficiency = 0.7

Any form may add host costs (simulator/costs/host.py), in seconds::

    overhead = { step_s = 2e-4, admit_s = 1e-3, token_s = 5e-5, request_s = 5e-3 }

They are added after ``jitter_cv`` and ``time_scale``, which scale the kernel-level steps
only. A profile that already has an ``overhead`` (a black-box calibration) keeps its terms
except those the section names: the section's keys replace the profile's, one by one.

``decode_kv_reads = 4`` prices a decode kernel that reads each KV head's cache 4 times a
step (an older TensorRT-LLM's masked MHA on a grouped-query model:
simulator/costs/kv_reads.py); it scales a fitted profile's decode-context term only.
``prefill_scale = 1.1`` and ``decode_scale = 1.1`` scale the steps that only prefill and
the steps with decode rows (simulator/costs/prefill_pass.py).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from simulator.costs.allreduce_sync import with_allreduce_sync
from simulator.costs.base import CostModel, JitterCost, ScaledCost, check_number
from simulator.costs.decode_walk import with_decode_walk
from simulator.costs.host import Overhead, split_host, with_overhead
from simulator.costs.kv_reads import scales_decode_reads, with_decode_kv_reads
from simulator.costs.lookup import STACKS_DIR, find_default_profile, tables_of
from simulator.costs.machine import machine_note
from simulator.costs.moe_tables import moe_kinds
from simulator.costs.prefill_pass import (
    DECODE_SCALE_HIGH,
    DECODE_SCALE_LOW,
    weight_pass_s,
    with_prefill_pass,
)
from simulator.costs.prior_efficiency import fitted_prior, prior_note, sibling_knobs
from simulator.costs.profile import (
    FITTED,
    FORMS,
    LINEAR_COEFFICIENTS,
    PIECEWISE_COEFFICIENTS,
    PROFILES_DIR,
    CostProfile,
    load_profile,
)
from simulator.costs.roofline import (
    DECODE_KV_READS_HIGH,
    DECODE_KV_READS_LOW,
    KNOBS,
    RooflineCost,
    check_knob,
)
from simulator.costs.shape_equivalent import LogitsOffsetCost, logits_delta_s, stand_in_note
from simulator.costs.sibling import SiblingCost, sibling_note
from simulator.costs.weight_only import SIXTEEN_BIT, NarrowWeightsCost, narrow_note, weight_only
from simulator.errors import ConfigError
from simulator.fingerprint import HOW_TO_FIX
from simulator.profile_cache import profile_stem
from simulator.specs.dtypes import same_cost_dtype
from simulator.specs.hardware import HardwareSpec, sibling_of
from simulator.specs.models import ModelSpec

ROOFLINE_ON_THE_FLY = "roofline prior (built on the fly)"
Found = tuple[Path, CostProfile, ModelSpec | None]  # a profile lookup's hit (lookup.py)
COEFFICIENT_KEYS = tuple(dict.fromkeys((*LINEAR_COEFFICIENTS, *PIECEWISE_COEFFICIENTS, *KNOBS)))
SECTION_KEYS = ("profile", "form", "time_scale", "force", "jitter_cv", "overhead",
                "decode_kv_reads", "decode_walk_s", "allreduce_sync_s", "prefill_pass_s",
                "prefill_scale", "decode_scale",
                "moe_kind", *COEFFICIENT_KEYS)
NOT_COEFFICIENTS = ("profile", "force", "form", "time_scale", "jitter_cv", "overhead",
                    "decode_kv_reads", "decode_walk_s", "allreduce_sync_s", "prefill_pass_s",
                    "prefill_scale", "decode_scale", "moe_kind")


def cost_model_from_config(
    section: dict[str, Any],
    model: ModelSpec,
    hw: HardwareSpec,
    tp: int,
    weight_dtype: str,
    kv_dtype: str,
    where: str = "cost",
    stack: str | None = None,
    stack_kv_reads: float = 1.0,
    stack_walk_s: float = 0.0,
    stack_sync_s: float = 0.0,
    stack_prefill_passes: float = 0.0,
    stack_prefill_scale: float = 1.0,
    stack_moe_kind: str | None = None,
    stack_attention_efficiency: float = 1.0,
    attention_dp: int = 1,
    expert_parallel: bool = True,
) -> tuple[CostModel, str]:
    """Build the cost model a ``[cost]`` section asks for; also say which profile was used.

    ``stack`` (a serving stack's name) makes an empty section look in
    ``simulator/profiles/stacks/<stack>/`` first; ``stack_kv_reads`` (the stack preset's
    ``decode_kv_reads``) then scales that table's decode attention unless the section sets
    ``decode_kv_reads`` itself (the stack's factor: a prior, or a profile or form the scenario
    gives, keeps one read unless the section says otherwise); ``stack_walk_s`` (the
    preset's decode walk, s per context token and layer) likewise adds decode attention's
    longest walk unless the section sets
    ``decode_walk_s`` (simulator/costs/decode_walk.py); ``stack_sync_s`` (the preset's
    all-reduce handshake, s per all-reduce) unless it sets ``allreduce_sync_s``
    (simulator/costs/allreduce_sync.py); ``stack_prefill_passes`` (the preset's extra
    weight passes a prefilling step) unless it sets ``prefill_pass_s``, and
    ``stack_prefill_scale`` (the preset's factor on those steps) unless it sets
    ``prefill_scale`` (simulator/costs/prefill_pass.py); ``stack_moe_kind`` (the preset's
    ``moe_kind``: whose MoE kernels a prior's experts read) unless it sets ``moe_kind``;
    ``stack_attention_efficiency`` (the preset's attention kernel, as a share of the
    matmuls' compute efficiency) for the prior an empty section falls back to (a measured
    table times the stack's own kernels; a section's ``form`` sets its own knobs).
    ``attention_dp`` > 1 (attention data parallelism: roofline.py; ``expert_parallel``: its
    experts split whole over the ranks, else each over all of them) is priced by the
    roofline prior only, the shipped profiles and fitted forms being tensor-parallel steps.
    Errors name the field as ``<where>.<key>`` and show the bad value.
    """
    unknown = [k for k in section if k not in SECTION_KEYS]
    if unknown:
        raise ConfigError(
            f"{where}.{unknown[0]} is not a cost setting; known: {', '.join(SECTION_KEYS)}"
        )
    coefficients = {k: v for k, v in section.items() if k not in NOT_COEFFICIENTS}
    try:
        moe = _moe_kind(section, stack, where, stack_moe_kind)
        dp: dict[str, Any] = ({"attention_dp": attention_dp, "expert_parallel": expert_parallel}
                              if attention_dp > 1 else {})
        if dp and ("profile" in section or section.get("form", "roofline") != "roofline"):
            raise ConfigError(f"{where}: attention data parallelism (attention_dp = "
                              f"{attention_dp}) is priced by the roofline prior only; a "
                              "profile or fitted form prices tensor-parallel steps")
        if "force" in section and "profile" not in section:
            raise ConfigError(f"{where}.force applies only with {where}.profile (a profile "
                              "file to use although it was measured for another deployment)")
        cv = 0.0
        if "profile" in section:
            cost, used, cv = _from_profile(
                section, coefficients, model, hw, tp, weight_dtype, kv_dtype, where, moe
            )
        elif "form" in section:
            cost, used = _inline(
                section["form"], coefficients, model, hw, tp, weight_dtype, kv_dtype, where,
                moe, dp
            )
        elif coefficients:
            key = next(iter(coefficients))
            raise ConfigError(f"{where}.{key} needs {where}.form (one of {FORMS})")
        else:
            cost, used, cv = _default(model, hw, tp, weight_dtype, kv_dtype, stack, moe, dp,
                                      stack_attention_efficiency)
        cost, host = split_host(cost)  # a calibrated profile's host costs go on last
        if isinstance(cost, ScaledCost):
            used = f"{used}, x fitted time_scale {cost.time_scale:g}"
        # kernel-level, before jitter and time_scale: the section's own read count, else
        # the stack's for its own tables (not a profile or form the scenario gives, not a
        # prior, which keeps no decode-context term apart)
        own = _stack_tables(section, cost)
        if "decode_kv_reads" in section:
            reads = check_number(f"{where}.decode_kv_reads", section["decode_kv_reads"],
                                 low=DECODE_KV_READS_LOW, high=DECODE_KV_READS_HIGH)
            cost = with_decode_kv_reads(cost, reads, f"{where}.decode_kv_reads")
            used = f"{used}, decode KV cache read {reads:g}x a step"
        elif stack_kv_reads > 1.0 and own:
            cost = with_decode_kv_reads(cost, stack_kv_reads, f"{where}.decode_kv_reads")
            used = (f"{used}, the stack's 16-bit decode attention reading the KV cache "
                    f"{stack_kv_reads:.3g}x a step")
        cost, used = _decode_walk(cost, used, section, model, stack_walk_s if own else 0.0,
                                  where)
        cost, used = _allreduce_sync(cost, used, section, model, tp,
                                     stack_sync_s if own else 0.0, where)
        passes = stack_prefill_passes if own else 0.0
        cost, used = _prefill_pass(cost, used, section,
                                   passes * weight_pass_s(model, hw, tp, weight_dtype),
                                   stack_prefill_scale if own else 1.0, where)
        if "overhead" in section:
            mine = Overhead.from_mapping(section["overhead"], f"{where}.overhead")
            given = {k: getattr(mine, k) for k in section["overhead"]}
            host = Overhead(**{**host.to_dict(), **given})  # the section's keys win
        if "jitter_cv" in section:
            cv = check_number(f"{where}.jitter_cv", section["jitter_cv"], high=1.0)
        if cv > 0:
            cost, used = JitterCost(cost, cv), f"{used}, step jitter CV {cv:.1%}"
        if "time_scale" in section:
            scale = check_number(f"{where}.time_scale", section["time_scale"], low_open=True)
            cost, used = ScaledCost(cost, scale), f"{used}, x time_scale {scale:g}"
        if host.to_dict():
            cost, used = with_overhead(cost, host), f"{used} + host overhead {host.describe()}"
    except ConfigError as e:
        named = str(e).startswith((f"{where}.", f"{where}:"))
        raise (e if named else ConfigError(f"{where}: {e}")) from None
    return cost, used


def _stack_tables(section: dict[str, Any], cost: CostModel) -> bool:
    """Whether a stack's kernel terms apply: its own tables price the steps (not a profile
    or form the scenario gives, nor a prior, which keeps no decode-context term apart)."""
    return "profile" not in section and "form" not in section and scales_decode_reads(cost)


def _own_or_stack(section: dict[str, Any], key: str, stack_value: float, high: float,
                  where: str, low: float = 0.0) -> float:
    """The section's own ``key`` (checked: a number in [``low``, ``high``]), else the
    stack's value (0, or 1 for a factor, unless the stack's own tables price the steps)."""
    if key in section:
        return check_number(f"{where}.{key}", section[key], low=low, high=high)
    return stack_value


def _decode_walk(cost: CostModel, used: str, section: dict[str, Any], model: ModelSpec,
                 stack_walk_s: float, where: str) -> tuple[CostModel, str]:
    """``cost`` with decode walks: the section's ``decode_walk_s``, else ``stack_walk_s``
    (the stack's, 0 unless its own tables price the steps); unchanged when neither
    applies."""
    walk = _own_or_stack(section, "decode_walk_s", stack_walk_s, 1e-6, where)
    if "decode_walk_s" in section and walk > 0 and not scales_decode_reads(cost):
        raise ConfigError(
            f"{where}.decode_walk_s={walk:g}: applies to a fitted profile (linear or "
            f"piecewise), whose decode-context term the walk is compared with; these "
            f"steps are priced by {type(cost).__name__}")
    if walk <= 0:
        return cost, used
    note = (f"{used}, decode attention walking each sequence alone ({walk * 1e9:.3g} ns a "
            "token and layer)")
    return with_decode_walk(cost, walk, model.num_layers), note


def _allreduce_sync(cost: CostModel, used: str, section: dict[str, Any], model: ModelSpec,
                    tp: int, stack_sync_s: float, where: str) -> tuple[CostModel, str]:
    """``cost`` with an all-reduce handshake: the section's ``allreduce_sync_s`` (any cost
    model), else ``stack_sync_s`` (the stack's, 0 unless its own tables price the steps);
    unchanged on one GPU or with neither."""
    sync = _own_or_stack(section, "allreduce_sync_s", stack_sync_s, 1e-3, where)
    if sync <= 0 or tp < 2:
        return cost, used
    note = f"{used}, each all-reduce's handshake {sync * 1e6:.3g} us"
    return with_allreduce_sync(cost, sync, model.layer_allreduces, tp, model.hidden_size), note


def _prefill_pass(cost: CostModel, used: str, section: dict[str, Any], stack_pass_s: float,
                  stack_scale: float, where: str) -> tuple[CostModel, str]:
    """``cost`` with every step that only prefills scaled and given a fixed time more: the
    section's ``prefill_scale`` and ``prefill_pass_s`` (any cost model), else the stack's
    (1 and 0 unless its own tables price the steps); and every step with decode rows scaled
    by the section's ``decode_scale`` (no stack sets one); unchanged with none of them."""
    pass_s = _own_or_stack(section, "prefill_pass_s", stack_pass_s, 1.0, where)
    scale = _own_or_stack(section, "prefill_scale", stack_scale, 4.0, where, low=0.25)
    decode = _own_or_stack(section, "decode_scale", 1.0, DECODE_SCALE_HIGH, where,
                           low=DECODE_SCALE_LOW)
    if pass_s <= 0 and scale == 1.0 and decode == 1.0:
        return cost, used
    more = f"{pass_s * 1e3:.3g} ms more" if pass_s > 0 else ""
    notes = []
    if scale != 1.0 or more:
        notes.append(f"each prefill step {more}" if scale == 1.0 else
                     f"each prefill step x {scale:.3g}" + (f" and {more}" if more else ""))
    if decode != 1.0:
        notes.append(f"each step with decode rows x {decode:.3g}")
    return (with_prefill_pass(cost, pass_s, scale, decode),
            ", ".join([used, *notes]))


def _from_profile(
    section: dict[str, Any],
    coefficients: dict[str, Any],
    model: ModelSpec,
    hw: HardwareSpec,
    tp: int,
    weight_dtype: str,
    kv_dtype: str,
    where: str,
    moe_kind: str | None = None,
) -> tuple[CostModel, str, float]:
    if coefficients or "form" in section:
        extra = next(iter(coefficients), "form")
        raise ConfigError(f"{where}.{extra} cannot be combined with {where}.profile")
    value = section["profile"]
    path = profile_file(value, where)
    force = section.get("force", False)
    if not isinstance(force, bool):
        raise ConfigError(f"{where}.force={force!r} must be true or false")
    profile = load_profile(path)
    expected = {
        "model": model.name,
        "hardware": hw.name,
        "tp": tp,
        "weight_dtype": weight_dtype,
        "kv_dtype": kv_dtype,
    }
    mismatches = []  # (field, the profile's value, the scenario's value)
    for key, want in expected.items():
        got = getattr(profile, key)
        if key.endswith("dtype") and same_cost_dtype(str(got), str(want)):
            continue  # fp16 and bf16 cost the same
        if str(got).lower() != str(want).lower():
            mismatches.append((key, got, want))
    if mismatches and not force:
        differ = "; and ".join(f"{k}={got!r}, but the scenario has {k}={want!r}"
                               for k, got, want in mismatches)
        raise ConfigError(
            f"{where}.profile={str(value)!r} is for {differ}. Use a profile measured for "
            f"this deployment, or set {where}.force = true to price the steps with it anyway"
        )
    used = with_machine_note(describe(profile, path), profile)
    cv = measured_cv(profile)
    if not mismatches:
        cost = profile.build(model, hw, moe_kind=moe_kind)
        return cost, with_prior_notes(used, cost), cv
    if profile.form in FITTED:
        cost = profile.build(model, hw)  # its coefficients as measured, for its deployment
    else:  # a prior's knobs, applied to the scenario's own deployment
        knobs: dict[str, Any] = {k: float(v) for k, v in profile.coefficients.items()}
        knobs.update(_moe_arg(moe_kind))
        cost = profile.calibrated(RooflineCost(model, hw, tp, weight_dtype, kv_dtype,
                                               **knobs))
    theirs = ", ".join(f"{k}={got!r}" for k, got, _ in mismatches)
    ours = ", ".join(f"{k}={want!r}" for k, _, want in mismatches)
    used = with_prior_notes(used, cost)
    return cost, f"{used}, FORCED ({where}.force = true): the profile is for {theirs}; " \
                 f"the scenario has {ours}", cv


def profile_file(value: object, where: str = "cost") -> Path:
    """The file a ``profile`` value names: a path from the cwd, or a shipped file's name."""
    if not isinstance(value, str | Path) or not str(value):
        raise ConfigError(f"{where}.profile={value!r} must be a path to a cost-profile JSON")
    path = Path(value).expanduser()
    if not path.is_file() and (PROFILES_DIR / path.name).is_file() and path.name == str(value):
        path = PROFILES_DIR / path.name  # a bare shipped-profile file name
    if not path.is_file():
        raise ConfigError(f"{where}.profile={str(value)!r}: no such file (from {Path.cwd()})")
    return path


def describe(profile: CostProfile, path: Path) -> str:
    """``file (source)``: which profile priced the steps, and whether it was measured."""
    source = profile.provenance.get("source", "source not stated")
    shipped = path.parent == PROFILES_DIR or path.parent.parent == STACKS_DIR
    name = str(path.relative_to(PROFILES_DIR)) if shipped else str(path)
    return f"{name} ({source})"


def _inline(
    form: object,
    coefficients: dict[str, Any],
    model: ModelSpec,
    hw: HardwareSpec,
    tp: int,
    weight_dtype: str,
    kv_dtype: str,
    where: str,
    moe_kind: str | None = None,
    dp: dict[str, Any] | None = None,
) -> tuple[CostModel, str]:
    if form not in FORMS:
        raise ConfigError(f"{where}.form={form!r} must be one of {FORMS}")
    allowed = FITTED[form][1] if form in FITTED else KNOBS
    for key, value in coefficients.items():
        if key not in allowed:
            raise ConfigError(f"{where}.{key} does not apply to form = {form!r}")
        if form in FITTED:
            check_number(f"{where}.{key}", value)
        else:
            check_knob(key, value, where=f"{where}.")
    values = {k: float(v) for k, v in coefficients.items()}
    if form in FITTED:
        return FITTED[form][0](**values), f"inline {form} coefficients ({where} section)"
    # A scenario that sets the all-reduce formula's knobs gets the formula, not the
    # measured curve (simulator/costs/collectives.py).
    formula = any(k in values for k in ("allreduce_latency_s", "link_efficiency"))
    # the GPU's fitted knobs first (prior_efficiency.py), the section's over them
    cost = fitted_prior(model, hw, tp, weight_dtype, kv_dtype, **values,
                        **({"allreduce_kind": ""} if formula else {}), **_moe_arg(moe_kind),
                        **(dp or {}))
    knobs = ", ".join(f"{k}={v:g}" for k, v in values.items())
    label = f"{ROOFLINE_ON_THE_FLY}, {prior_note(hw.name, weight_dtype)}"
    return cost, with_prior_notes(label + (f"; with {knobs}" if knobs else ""), cost)


def _default(model: ModelSpec, hw: HardwareSpec, tp: int, weight_dtype: str, kv_dtype: str,
             stack: str | None = None, moe_kind: str | None = None,
             dp: dict[str, Any] | None = None,
             attention_efficiency: float = 1.0) -> tuple[CostModel, str, float]:
    if dp:  # attention data parallel: the prior (the shipped profiles are TP steps)
        prior = fitted_prior(model, hw, tp, weight_dtype, kv_dtype, **_moe_arg(moe_kind), **dp,
                             attention_efficiency=attention_efficiency)
        return prior, with_prior_notes(_prior_label(model, hw, tp, weight_dtype), prior), 0.0
    found, measured = _measured(model, hw, tp, weight_dtype, kv_dtype, stack)
    if measured is not None:
        return measured
    sibling = _sibling(model, hw, tp, weight_dtype, kv_dtype, stack)
    if sibling is not None:
        return sibling
    if found is not None:  # the deployment's shipped prior file
        return _profiled(found, model, hw, tp, stack, moe_kind, attention_efficiency)
    prior = fitted_prior(model, hw, tp, weight_dtype, kv_dtype, **_moe_arg(moe_kind),
                         attention_efficiency=attention_efficiency)
    return prior, with_prior_notes(_prior_label(model, hw, tp, weight_dtype), prior), 0.0


def _measured(model: ModelSpec, hw: HardwareSpec, tp: int, weight_dtype: str, kv_dtype: str,
              stack: str | None) -> tuple[Found | None, tuple[CostModel, str, float] | None]:
    """The profile lookup's hit (maybe a prior file), and the cost a measured profile gives
    the deployment: its own, or a 16-bit one repriced for weights narrower than the math;
    None when only a prior is there."""
    found = find_default_profile(model, hw, tp, weight_dtype, kv_dtype, stack=stack)
    if (found is None or found[1].form == "roofline") and weight_only(weight_dtype, hw):
        bf16 = find_default_profile(model, hw, tp, SIXTEEN_BIT, kv_dtype, stack=stack)
        if bf16 is not None and bf16[1].form != "roofline":
            return found, _narrow_weights(_profiled(bf16, model, hw, tp, stack), model, hw,
                                          tp, weight_dtype, kv_dtype)
    if found is not None and found[1].form != "roofline":
        return found, _profiled(found, model, hw, tp, stack)
    return found, None


def _sibling(model: ModelSpec, hw: HardwareSpec, tp: int, weight_dtype: str, kv_dtype: str,
             stack: str | None) -> tuple[CostModel, str, float] | None:
    """The sibling GPU's measured cost scaled to ``hw`` (simulator/costs/sibling.py), or
    None when ``hw`` has no sibling or the sibling no measured profile of the deployment."""
    other = sibling_of(hw.name)
    if other is None:
        return None
    _, measured = _measured(model, other, tp, weight_dtype, kv_dtype, stack)
    if measured is None:
        return None
    cost, used, cv = measured
    # the sibling's knobs (same chip and kernels), eff_c scaled by the boards' measured
    # matmul shares of peak
    knobs, scale = sibling_knobs(hw.name, other.name, weight_dtype)
    target = fitted_prior(model, hw, tp, weight_dtype, kv_dtype, **knobs, **PAIRED)
    source = fitted_prior(model, other, tp, weight_dtype, kv_dtype, **PAIRED)
    cost = _under_host(cost, lambda kernel: SiblingCost(kernel, target, source))
    return cost, sibling_note(hw.name, other.name, used, scale), cv


def _moe_kind(section: dict[str, Any], stack: str | None, where: str,
              stack_moe_kind: str | None = None) -> str | None:
    """Whose measured MoE kernels a prior's experts read (moe_tables.py): the section's
    ``moe_kind`` ("" for the experts' roofline), else the one the stack's preset names
    (``stack_moe_kind``), else the stack's own where NVIDIA timed them, else None (the
    default's, TensorRT-LLM's)."""
    if "moe_kind" in section:
        kind = section["moe_kind"]
        if kind != "" and kind not in moe_kinds():
            raise ConfigError(f"{where}.moe_kind={kind!r} must be \"\" (the experts' "
                              f"roofline) or one of {', '.join(moe_kinds())}")
        return str(kind)
    if stack_moe_kind is not None:
        return stack_moe_kind
    return stack if stack in moe_kinds() else None


def _moe_arg(moe_kind: str | None) -> dict[str, str]:
    """``moe_kind`` as a RooflineCost keyword, none for the default."""
    return {} if moe_kind is None else {"moe_kind": moe_kind}


# Priors that price a ratio or a difference (a sibling GPU's, narrower weights') keep the
# experts' roofline on both sides: a measured MoE curve exists for one GPU or dtype of the
# pair at most, and the pair must be priced alike.
PAIRED = {"moe_kind": ""}


def _profiled(found: Found, model: ModelSpec, hw: HardwareSpec, tp: int, stack: str | None,
              moe_kind: str | None = None,
              attention_efficiency: float = 1.0) -> tuple[CostModel, str, float]:
    """The cost a found profile gives ``model``: its own, or a stand-in's with the
    vocabulary corrected (simulator/costs/shape_equivalent.py); a prior file takes the
    stack's ``attention_efficiency``."""
    path, profile, stand_in = found
    used = with_machine_note(describe(profile, path), profile)
    cost = profile.build(model if stand_in is None else stand_in, hw, moe_kind=moe_kind,
                         attention_efficiency=attention_efficiency)
    if stand_in is not None:
        delta = logits_delta_s(model, stand_in, hw, tp)
        cost = _under_host(cost, lambda kernel: LogitsOffsetCost(kernel, delta))
        tables = f", {stack}'s kernel tables" if stack and tables_of(path, profile) == stack \
            else ""
        used = f"{stand_in_note(model, stand_in, delta)}{tables}: {used}"
    return cost, with_prior_notes(used, cost), measured_cv(profile)


def _narrow_weights(priced: tuple[CostModel, str, float], model: ModelSpec, hw: HardwareSpec,
                    tp: int, weight_dtype: str, kv_dtype: str) -> tuple[CostModel, str, float]:
    """Weights that ``hw`` multiplies in bf16 (simulator/costs/weight_only.py): ``priced``,
    the measured bf16 profile's cost, plus the weight reads saved."""
    cost, used, cv = priced
    source = fitted_prior(model, hw, tp, SIXTEEN_BIT, kv_dtype, **PAIRED)
    target = fitted_prior(model, hw, tp, weight_dtype, kv_dtype, **PAIRED)  # bf16's knobs too
    cost = _under_host(cost, lambda kernel: NarrowWeightsCost(kernel, source, target))
    return cost, f"{narrow_note(weight_dtype, hw.name)}: {used}", cv


def _under_host(cost: CostModel, wrap: Callable[[CostModel], CostModel]) -> CostModel:
    """``cost`` with its kernel part wrapped by ``wrap``, under a fitted ``time_scale`` and
    with the host terms still outside."""
    kernel, host = split_host(cost)
    if isinstance(kernel, ScaledCost):
        kernel = ScaledCost(wrap(kernel.inner), kernel.time_scale)
    else:
        kernel = wrap(kernel)
    return with_overhead(kernel, host) if host.to_dict() else kernel


def with_prior_notes(used: str, cost: CostModel) -> str:
    """The cost source, plus what prices a roofline prior's all-reduces (tp > 1 only) and a
    MoE model's experts."""
    kernel, _ = split_host(cost)
    if isinstance(kernel, ScaledCost):
        kernel = kernel.inner
    if not isinstance(kernel, RooflineCost):
        return used
    note, moe = kernel.allreduce_source(), kernel.moe_source()
    what = "all-reduce" if kernel.attention_dp == 1 else "collectives"
    eff_a = kernel.attention_efficiency
    attention = "" if eff_a == 1.0 else (
        f"; attention computes at {eff_a:g} of the matmuls' efficiency (eff_a)")
    return (used + (f"; {what}: {note}" if note else "") + (f"; experts: {moe}" if moe else "")
            + attention)


def _prior_label(model: ModelSpec, hw: HardwareSpec, tp: int, weight_dtype: str) -> str:
    """The cost source of the fallback prior; on a CPU, also that no measured profile
    exists and the command that measures one (a CPU's speed is not on a datasheet: the
    prior is off by a machine-dependent factor)."""
    if hw.name != "cpu":
        return f"{ROOFLINE_ON_THE_FLY}, {prior_note(hw.name, weight_dtype)}"
    stem = profile_stem(hw.name, model.name, weight_dtype, tp)
    fix = HOW_TO_FIX.format(model=model.name, threads=1)
    return (f"{ROOFLINE_ON_THE_FLY}: NOT MEASURED: no {stem} profile ships and none was "
            f"measured on this machine; `{fix}` measures one")


def default_profile_path(model: ModelSpec, hw: HardwareSpec, tp: int, weight_dtype: str,
                         kv_dtype: str, threads: int = 1,
                         stack: str | None = None) -> Path | None:
    """The profile an empty ``[cost]`` section uses: one measured on this machine (the
    per-user cache, ``servesim calibrate --here``), else the shipped one (a stack's own
    first, then a measured stand-in of the same layer shapes, then a prior), else None (a
    roofline prior built on the fly). Only CPU profiles are looked up in the cache: a
    simulation of a GPU is a prediction for that GPU, whatever machine runs the simulator."""
    found = find_default_profile(model, hw, tp, weight_dtype, kv_dtype, threads, stack)
    return None if found is None else found[0]


def profile_path_for(section: dict[str, Any], model: ModelSpec, hw: HardwareSpec, tp: int,
                     weight_dtype: str, kv_dtype: str, threads: int = 1,
                     stack: str | None = None) -> Path | None:
    """The profile file a ``[cost]`` section prices steps with (None: inline or a prior)."""
    if "profile" in section:
        return profile_file(section["profile"], "cost")
    if "form" in section:
        return None
    return default_profile_path(model, hw, tp, weight_dtype, kv_dtype, threads, stack)


def with_machine_note(used: str, profile: CostProfile) -> str:
    """The cost source, followed by whether the profile was measured on this machine."""
    note = machine_note(profile)
    return f"{used}; {note}" if note else used


def measured_cv(profile: CostProfile) -> float:
    """The step-to-step variation the profile measured (``fit.step_time_cv``), else 0."""
    value = profile.fit.get("step_time_cv", 0.0)
    return float(value) if isinstance(value, int | float) and value > 0 else 0.0
