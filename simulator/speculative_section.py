"""The ``[speculative]`` scenario section: draft tokens per step, acceptance, the draft's cost.

::

    [speculative]
    num_tokens = 4                 # k drafts per decode row and step (0: off); sets the
                                   # policy's num_speculative_tokens (continuous/chunked)
    acceptance = 0.7               # alpha: P(a draft is accepted), per draft
    # acceptance_counts = [0.2, 0.1, 0.1, 0.1, 0.5]   # or: P(0..k drafts accepted), measured
    draft = "llama-3.1-8b"         # the draft: a catalogue model on the same GPU and tp,
    # draft_layers = 8             # or the target's first L layers (+ embedding, LM head)

Exactly one of ``acceptance`` / ``acceptance_counts`` and one of ``draft`` /
``draft_layers`` when ``num_tokens > 0``; with ``num_tokens = 0`` the section changes
nothing (a sweep ``num_tokens = [0, 2, 4]`` compares against plain decoding). Models:
docs/speculative.md.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from simulator.errors import ConfigError
from simulator.policies.speculative import MAX_SPECULATIVE_TOKENS
from simulator.scenario_fields import check_fields, spec
from simulator.scenario_policy import PolicySection
from simulator.speculative_acceptance import Acceptance, check_counts


@dataclass(frozen=True, slots=True)
class SpeculativeSection:
    """``[speculative]``: a draft proposes ``num_tokens`` per row, the target verifies them."""

    num_tokens: int = spec(0, unit="tokens", low=0, high=MAX_SPECULATIVE_TOKENS)  # k; 0: off
    acceptance: float | None = spec(None, low=0, high=1)  # alpha, per draft
    # P(j drafts accepted), j = 0..num_tokens (a TOML list; checked below)
    acceptance_counts: tuple[float, ...] | None = None
    draft: str | None = spec(None)  # a catalogue model (or config path) priced on this GPU/tp
    draft_layers: int | None = spec(None, unit="layers", low=1)  # the target's first L layers

    def __post_init__(self) -> None:
        check_fields(self, "speculative")
        k = self.num_tokens
        if self.acceptance_counts is not None:
            counts = self.acceptance_counts  # off (k = 0): checked as probabilities only
            object.__setattr__(self, "acceptance_counts",
                               check_counts(counts, k if k else len(counts) - 1))
        if self.draft is not None and not self.draft.strip():
            raise ConfigError(f"speculative.draft = {self.draft!r}: must name a model")
        if not k:
            return
        if (self.acceptance is None) == (self.acceptance_counts is None):
            raise ConfigError(f"speculative.num_tokens = {k}: give speculative.acceptance "
                              "(alpha) or speculative.acceptance_counts, exactly one")
        if (self.draft is None) == (self.draft_layers is None):
            raise ConfigError(f"speculative.num_tokens = {k}: give speculative.draft (a "
                              "model) or speculative.draft_layers, exactly one")

    @property
    def on(self) -> bool:
        """Whether the section speculates (``num_tokens > 0``)."""
        return self.num_tokens > 0

    def acceptance_model(self, seed: int) -> Acceptance:
        """The acceptance draws of a run with ``seed``."""
        return Acceptance(alpha=self.acceptance, counts=self.acceptance_counts, seed=seed)

    @classmethod
    def from_table(cls, table: Any) -> SpeculativeSection:
        """From the TOML table (unknown keys refused; ``acceptance_counts`` as a tuple)."""
        if table is None:
            return cls()
        if not isinstance(table, Mapping):
            raise ConfigError(f"[speculative] must be a table, got {table!r}")
        known = ("num_tokens", "acceptance", "acceptance_counts", "draft", "draft_layers")
        for key in table:
            if key not in known:
                raise ConfigError(f"speculative.{key}: unknown field; known: {list(known)}")
        values = dict(table)
        counts = values.get("acceptance_counts")
        if counts is not None:
            if not isinstance(counts, list | tuple):
                raise ConfigError(f"speculative.acceptance_counts = {counts!r}: must be a list "
                                  "of probabilities (of 0..num_tokens drafts accepted)")
            values["acceptance_counts"] = tuple(counts)
        return cls(**values)


KNOB = "num_speculative_tokens"  # the continuous policy's knob [speculative] num_tokens sets


def speculating(table: Mapping[str, Any], section: SpeculativeSection) -> PolicySection:
    """The ``[policy]`` section with ``num_speculative_tokens`` from ``[speculative]``.

    The knob is set only through ``[speculative]`` (which also gives the acceptance and the
    draft): a ``[policy]`` value that disagrees, or a policy without the knob (static,
    dynamic), is a ConfigError naming both fields.
    """
    k = section.num_tokens
    given = {f"policy.{KNOB}": table.get(KNOB)} | {
        f"policy.{name}.{KNOB}": sub.get(KNOB) for name, sub in table.items()
        if isinstance(sub, Mapping)}
    for where, value in given.items():
        if value is not None and value != k:
            raise ConfigError(f"{where} = {value!r}: set it as speculative.num_tokens (now "
                              f"{k}), which also gives the acceptance and the draft")
    policy = PolicySection.from_table({**table, KNOB: k} if k else table)
    if getattr(policy.policy, KNOB, 0) != k:
        raise ConfigError(f"speculative.num_tokens = {k}: needs policy.name 'continuous' or "
                          f"'chunked' (policy.name = {policy.name!r} has no speculative "
                          "decoding)")
    return policy
