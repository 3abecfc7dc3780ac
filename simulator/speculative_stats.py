"""Speculative decoding's figures: how many tokens each verified row emitted.

Counted as the steps run (by the simulator's replicas, or the engine), so a summary needs
no step log. Definitions (docs/speculative.md, docs/metrics.md):

    spec_mean_accepted_tokens_per_step = emitted tokens / speculative row-steps
    spec_acceptance_rate               = accepted drafts / drafts verified

A *row-step* is one decode row of one speculative step; it verified ``s`` drafts and
emitted ``a`` tokens (``a - 1`` drafts accepted plus the target's own). vLLM reports the
same pair as "mean acceptance length" (1 + accepted / drafts) and "draft acceptance
rate" (accepted / draft tokens), vllm/v1/spec_decode/metrics.py; here rows given no draft
(one token left) count as row-steps that emitted one token.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any


@dataclass(slots=True)
class SpecStats:
    """Per number of drafts verified ``s``: row-steps and the tokens they emitted."""

    row_steps: list[int] = field(default_factory=list)  # [s]: row-steps that verified s drafts
    emitted: list[int] = field(default_factory=list)  # [s]: tokens those row-steps emitted

    def add(self, drafts: list[int], accepted: list[int]) -> None:
        """Count one step's rows (``drafts[i]`` verified, ``accepted[i]`` emitted)."""
        rows, emitted = self.row_steps, self.emitted
        for s, a in zip(drafts, accepted, strict=True):
            if s >= len(rows):
                grow = s + 1 - len(rows)
                rows.extend([0] * grow)
                emitted.extend([0] * grow)
            rows[s] += 1
            emitted[s] += a

    @staticmethod
    def combine(parts: Iterable[SpecStats]) -> SpecStats:
        """One run's counts from its replicas'."""
        out = SpecStats()
        for p in parts:
            for s, (n, e) in enumerate(zip(p.row_steps, p.emitted, strict=True)):
                while len(out.row_steps) <= s:
                    out.row_steps.append(0)
                    out.emitted.append(0)
                out.row_steps[s] += n
                out.emitted[s] += e
        return out

    def with_drafts(self, s: int) -> tuple[int, int]:
        """(row-steps that verified ``s`` drafts, tokens they emitted)."""
        return (self.row_steps[s], self.emitted[s]) if s < len(self.row_steps) else (0, 0)

    @property
    def num_row_steps(self) -> int:
        """Speculative row-steps."""
        return sum(self.row_steps)

    @property
    def num_emitted(self) -> int:
        """Tokens they emitted."""
        return sum(self.emitted)

    @property
    def num_drafts(self) -> int:
        """Drafts verified."""
        return sum(s * n for s, n in enumerate(self.row_steps))

    @property
    def num_accepted(self) -> int:
        """Drafts accepted (each row-step's emitted tokens less the target's own one)."""
        return self.num_emitted - self.num_row_steps


def spec_summary(stats: SpecStats) -> dict[str, Any]:
    """The summary JSON's speculative keys (None where nothing was counted)."""
    rows, drafts = stats.num_row_steps, stats.num_drafts
    return {
        "spec_mean_accepted_tokens_per_step": stats.num_emitted / rows if rows else None,
        "spec_acceptance_rate": stats.num_accepted / drafts if drafts else None,
        "spec_row_steps": rows,
        "spec_drafts_verified": drafts,
        "spec_drafts_accepted": stats.num_accepted,
    }
