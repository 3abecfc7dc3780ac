"""Widgets for prefix caching and speculative decoding, shared by the Explorer's sidebar and
the Policy comparison page.

Each function draws its group into ``where`` (``st.sidebar`` or a column) under the page's
key prefix (``""`` for the Explorer, ``"pol_"`` for the policies page), seeded from the
scenario's values like every other widget (dashboard/page_form.py), and returns what runs.
Ranges are the scenario schema's (dashboard/logic/form_fields.py); the draft's layer range
and model list come from the target model (dashboard/logic/feature_knobs.py).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from dashboard.logic.feature_knobs import (
    DRAFT_KINDS,
    PrefixKnobs,
    SpecKnobs,
    draft_layer_bounds,
    draft_models,
)
from dashboard.logic.form_fields import bounds
from dashboard.page_form import choice, number, seed

PREFIX_KEYS = ("prefix_caching", "system_prompt_tokens", "system_prompt_share",
               "session_turns")
SPEC_KEYS = ("speculative", "spec_num_tokens", "spec_counts", "spec_acceptance",
             "spec_draft_kind", "spec_draft", "spec_draft_layers")
FEATURE_KEYS = (*PREFIX_KEYS, *SPEC_KEYS)  # widget keys a scenario change refills
DRAFT_LABELS = {"layers": "the target's first layers", "model": "a catalogue model"}


def _checkbox(where: Any, label: str, value: bool, key: str, **kw: Any) -> bool:
    seed(key, bool(value))
    return bool(where.checkbox(label, key=key, **kw))


def prefix_widgets(where: Any, d: PrefixKnobs, prefix: str = "", *, supported: bool = True,
                   closed: bool = False, trace: bool = False) -> PrefixKnobs:
    """The "Prefix caching" group: the cache on or off, a shared system prompt (tokens and
    share of requests), and turns per session in a closed loop. ``supported``: whether the
    policy takes prefix caching (off, with a note, when not)."""
    on = False
    if supported:
        on = _checkbox(where, "Prefix caching (reuse cached prompt prefixes)", d.on,
                       f"{prefix}prefix_caching",
                       help="[kv] prefix_caching: a request skips the prefill of the prompt "
                            "blocks already cached (docs/prefix-caching.md)")
    else:
        where.caption("Prefix caching: not with this policy (it pads every prompt in full)")
    if trace:
        where.caption("Prefixes come from the trace (Mooncake hash_ids; other formats "
                      "have none)")
        return replace(d, on=on)
    tokens = int(number(where, "Shared system prompt (tokens)", "system_prompt_tokens",
                        d.system_prompt_tokens, f"{prefix}system_prompt_tokens", 100))
    share = d.system_prompt_share
    if tokens > 0:
        share = float(number(where, "Share of requests with it", "system_prompt_share",
                             d.system_prompt_share, f"{prefix}system_prompt_share", 0.05))
    turns = d.session_turns
    if closed:
        turns = int(number(where, "Turns per session", "session_turns", d.session_turns,
                           f"{prefix}session_turns"))
    return PrefixKnobs(on=on, system_prompt_tokens=tokens, system_prompt_share=share,
                       session_turns=turns)


def spec_widgets(where: Any, d: SpecKnobs, target: str, prefix: str = "", *,
                 supported: bool = True, counts: list[float] | None = None) -> SpecKnobs:
    """The "Speculative decoding" group: on or off, drafts per step k, acceptance alpha
    (or the scenario's measured ``counts``), and the draft: ``target``'s first layers or a
    catalogue model sharing its vocabulary."""
    if not supported:
        where.caption("Speculative decoding: not with this policy (static and dynamic "
                      "batching decode one token per step)")
        return replace(d, on=False)
    if not _checkbox(where, "Speculative decoding", d.on, f"{prefix}speculative",
                     help="[speculative]: a draft proposes k tokens per step, the target "
                          "verifies them in one pass (docs/speculative.md)"):
        return replace(d, on=False)
    use_counts = counts is not None and _checkbox(
        where, f"Measured acceptance from the scenario (k = {len(counts) - 1})", d.use_counts,
        f"{prefix}spec_counts", help=f"acceptance_counts = {counts}")
    if use_counts and counts is not None:
        k, alpha = len(counts) - 1, d.acceptance
    else:
        k = int(number(where, "Draft tokens per step (k)", "spec_num_tokens", d.num_tokens,
                       f"{prefix}spec_num_tokens",
                       limits=(1, bounds("spec_num_tokens")[1])))
        alpha = float(number(where, "Acceptance per draft (alpha)", "spec_acceptance",
                             d.acceptance, f"{prefix}spec_acceptance", 0.05))
    models = draft_models(target)
    kinds = [kind for kind in DRAFT_KINDS if kind == "layers" or models]
    kind = choice(where, "Draft", kinds, d.draft_kind, f"{prefix}spec_draft_kind",
                  format_func=DRAFT_LABELS.get)
    model, layers = d.draft_model, d.draft_layers
    if kind == "model":
        model = choice(where, "Draft model", models, d.draft_model, f"{prefix}spec_draft")
    else:
        low, high = draft_layer_bounds(target)
        layers = int(number(where, f"Draft layers (of {high + 1})", "spec_draft_layers",
                            d.draft_layers, f"{prefix}spec_draft_layers", limits=(low, high)))
    return SpecKnobs(on=True, num_tokens=k, acceptance=alpha, use_counts=use_counts,
                     draft_kind=kind, draft_model=model, draft_layers=layers)
