"""The form's prefix-caching and speculative-decoding knobs: read from a scenario point, and
written back into one.

Prefix caching is ``[kv] prefix_caching`` plus the workload's prefix knobs (a shared system
prompt of ``system_prompt_tokens`` for a ``system_prompt_share`` of requests; closed-loop
sessions of ``session_turns`` turns: simulator/workload/prefix_knobs.py). The workload
knobs shape the traffic whether or not the cache is on, so "off" and "on" compare the same
requests. Speculative decoding is the ``[speculative]`` section (simulator/speculative_section.py):
``num_tokens`` drafts per step, an acceptance ``alpha`` (or the scenario's measured
``acceptance_counts``), and a draft that is a catalogue model or the target's first layers.

Writing follows the rest of the form: a key the scenario had is written back (with the
form's value), a new key only when the form's value differs from what runs without it, so
a scenario with both features off gains no key. Static and dynamic batching take neither
feature (simulator/deployment.py and simulator/speculative_section.py refuse them); the
pages turn them off for those policies (:func:`supports_prefix`, :func:`supports_spec`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from simulator.policies import policy_knobs
from simulator.scenario_types import field_rule
from simulator.specs import MODELS
from simulator.specs.models import get_model
from simulator.speculative_section import KNOB as SPEC_KNOB

# What the speculative widgets start from when the scenario does not speculate (the schema
# has no default for these: unset means off). The draft starts as a quarter of the target's
# layers (LayerSkip-style early exit; docs/speculative.md's GPU example uses 4 of 32).
SPEC_STARTS: dict[str, Any] = {"num_tokens": 4, "acceptance": 0.7}
DRAFT_LAYER_FRACTION = 0.25
DRAFT_KINDS = ("layers", "model")  # the target's first layers, or a catalogue model
PREFIX_WORKLOAD_KEYS = ("system_prompt_tokens", "system_prompt_share", "system_prompts",
                        "session_turns")


@dataclass(frozen=True, slots=True)
class PrefixKnobs:
    """Prefix caching on or off, and the workload knobs that give requests shared prefixes."""

    on: bool  # [kv] prefix_caching
    system_prompt_tokens: int  # [workload] shared system prompt length (0: none)
    system_prompt_share: float  # share of requests (or sessions) that start with one, 0..1
    session_turns: int  # closed loop only: turns per session (1: no sessions)


@dataclass(frozen=True, slots=True)
class SpecKnobs:
    """The ``[speculative]`` section as the form shows it (values kept while it is off)."""

    on: bool  # num_tokens > 0
    num_tokens: int  # k: drafts a row verifies per step (what runs when on)
    acceptance: float  # alpha: P(a draft is accepted), used unless use_counts
    use_counts: bool  # run the scenario's measured acceptance_counts instead of alpha
    draft_kind: str  # one of DRAFT_KINDS
    draft_model: str | None  # the catalogue draft (None: no model shares the vocabulary)
    draft_layers: int  # the target's first L layers, for draft_kind "layers"


def supports_prefix(policy: str) -> bool:
    """Whether ``policy`` reuses prefixes (the padded policies have no ``chunked_prefill``
    and refuse it, simulator/deployment.py)."""
    return "chunked_prefill" in policy_knobs(policy)


def supports_spec(policy: str) -> bool:
    """Whether ``policy`` speculates (it has ``num_speculative_tokens``)."""
    return SPEC_KNOB in policy_knobs(policy)


def draft_models(target: str) -> tuple[str, ...]:
    """Catalogue models that can draft for ``target``: those sharing its vocabulary (the
    simulator refuses any other, simulator/costs/speculative.py) and no larger than it (a
    larger draft never saves time), the target excepted."""
    t = get_model(target)
    return tuple(n for n, m in MODELS.items() if n != target and m.vocab_size == t.vocab_size
                 and m.params_total <= t.params_total)


def draft_layer_bounds(target: str) -> tuple[int, int]:
    """The range of ``draft_layers``: the schema's low bound up to the target's layers - 1."""
    low = field_rule("speculative.draft_layers").rule.low
    return int(low if low is not None else 1), get_model(target).num_layers - 1


def _start_layers(target: str) -> int:
    low, high = draft_layer_bounds(target)
    return max(low, min(high, round(get_model(target).num_layers * DRAFT_LAYER_FRACTION)))


def prefix_from_point(point: dict[str, Any]) -> PrefixKnobs:
    """The prefix knobs ``point`` runs with (absent ones: the schema's defaults)."""
    kv, wl = point.get("kv", {}), point.get("workload", {})

    def get(table: dict[str, Any], section: str, key: str) -> Any:
        value = table.get(key)
        return field_rule(f"{section}.{key}").default if value is None else value

    return PrefixKnobs(
        on=bool(get(kv, "kv", "prefix_caching")),
        system_prompt_tokens=int(get(wl, "workload", "system_prompt_tokens")),
        system_prompt_share=float(get(wl, "workload", "system_prompt_share")),
        session_turns=int(get(wl, "workload", "session_turns")))


def spec_from_point(point: dict[str, Any], target: str) -> SpecKnobs:
    """The ``[speculative]`` knobs of ``point`` for the target model ``target``; a section
    that is absent or off shows SPEC_STARTS and a draft of the target's first layers."""
    sec = point.get("speculative") or {}
    k = int(sec.get("num_tokens") or 0)
    counts = sec.get("acceptance_counts")
    alpha = sec.get("acceptance")
    known = target in MODELS  # a config path: no catalogue drafts, layers from the section
    models = draft_models(target) if known else ()
    return SpecKnobs(
        on=k > 0,
        num_tokens=k or (len(counts) - 1 if counts else SPEC_STARTS["num_tokens"]),
        acceptance=float(SPEC_STARTS["acceptance"] if alpha is None else alpha),
        use_counts=counts is not None,
        draft_kind="model" if sec.get("draft") is not None else "layers",
        draft_model=sec.get("draft") or (models[0] if models else None),
        draft_layers=int(sec.get("draft_layers") or (_start_layers(target) if known else 1)))


def write_prefix(out: dict[str, Any], point: dict[str, Any], k: PrefixKnobs, *,
                 closed: bool, trace: bool) -> None:
    """Write ``k`` into ``out`` (a copy of ``point`` whose ``[workload]`` is its own):
    ``[kv] prefix_caching`` and the workload's prefix knobs. Knobs a run would refuse are
    dropped: with a trace all of them (its requests keep their own prefixes), sessions
    outside a closed loop, the share and count of system prompts without one."""
    kv = dict(out.get("kv", {}))
    if k.on or "prefix_caching" in kv:
        kv["prefix_caching"] = k.on
    if kv or "kv" in out:
        out["kv"] = kv
    wl, given = out["workload"], point.get("workload", {})
    if trace:
        for key in PREFIX_WORKLOAD_KEYS:
            wl.pop(key, None)
        return
    tokens = k.system_prompt_tokens
    if tokens or "system_prompt_tokens" in given:
        wl["system_prompt_tokens"] = tokens
    if not tokens:
        wl.pop("system_prompt_share", None)
        wl.pop("system_prompts", None)
    elif k.system_prompt_share != 1.0 or "system_prompt_share" in given:
        wl["system_prompt_share"] = k.system_prompt_share
    if not closed:
        wl.pop("session_turns", None)
    elif k.session_turns > 1 or "session_turns" in given:
        wl["session_turns"] = k.session_turns


def write_spec(out: dict[str, Any], point: dict[str, Any], k: SpecKnobs) -> None:
    """Write ``k`` into ``out`` as its ``[speculative]`` section: on, exactly the keys that
    run (k, one acceptance, one draft); off, the scenario's section with ``num_tokens = 0``
    (nothing when it had none)."""
    given = point.get("speculative")
    if not k.on:
        if given is not None:
            out["speculative"] = {**given, "num_tokens": 0}
        return
    section: dict[str, Any] = {"num_tokens": k.num_tokens}
    if k.use_counts and given and given.get("acceptance_counts") is not None:
        section["acceptance_counts"] = list(given["acceptance_counts"])
    else:
        section["acceptance"] = k.acceptance
    if k.draft_kind == "model" and k.draft_model is not None:
        section["draft"] = k.draft_model
    else:
        section["draft_layers"] = k.draft_layers
    out["speculative"] = section


def expected_tokens_per_step(alpha: float, k: int) -> float:
    """Mean tokens a row emits in a step given ``k`` drafts each accepted with probability
    ``alpha`` until the first rejection: sum_{j=0..k} alpha^j = (1 - alpha^(k+1)) / (1 - alpha)
    (docs/speculative.md; the simulation draws acceptance, this is only the reference)."""
    return float(sum(alpha ** j for j in range(k + 1)))
