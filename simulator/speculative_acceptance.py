"""How many drafts the target accepts: drawn per row per step, or replayed from a real run.

A speculative step gives each decode row ``s`` drafts to verify (policies/speculative.py).
The row emits ``a = N + 1`` tokens, where ``N`` is the number of *leading* drafts accepted
(verification stops at the first rejection, whose position the target's own token takes):

- ``Acceptance(alpha=...)``: each draft is accepted with probability ``alpha``,
  independently, so ``P(N >= j) = alpha^j`` (the model of Leviathan et al. 2023, "Fast
  Inference from Transformers via Speculative Decoding", arXiv:2211.17192, section 3).
  ``N`` is geometric: ``numpy``'s ``geometric(1 - alpha) - 1``, then capped at ``s``.
  With ``s = k`` the mean emitted is ``(1 - alpha^(k+1)) / (1 - alpha)``; the simulator
  never uses that formula, it draws (tests/test_speculative_acceptance.py checks the mean).
- ``Acceptance(counts=(p_0, ..., p_k))``: a measured distribution of ``N`` for rows given
  ``k`` drafts; a row given ``s < k`` drafts takes ``min(N, s)`` (the leading count of its
  first ``s`` drafts has exactly that law).
- :class:`ReplayAcceptance`: a recorded run's emitted counts, step by step (the engine's,
  to replay it through the simulator).

Randomness is explicit: each replica draws from its own ``numpy.random.Generator`` seeded
with ``(seed, replica)``, so one seed gives one answer and replicas never share a stream.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np

from simulator.errors import ConfigError


class AcceptanceSampler(Protocol):
    """One replica's source of emitted-token counts."""

    def draw(self, drafts: list[int]) -> list[int]:
        """Tokens emitted by rows that verified ``drafts[i]`` drafts (each in 1..1+drafts[i])."""
        ...


class AcceptanceModel(Protocol):
    """What ``ClusterSpec.speculative`` holds: a sampler per replica."""

    def sampler(self, replica: int) -> AcceptanceSampler: ...


@dataclass(frozen=True, slots=True)
class Acceptance:
    """Random acceptance: per-draft probability ``alpha``, or a distribution ``counts``."""

    alpha: float | None = None  # P(a draft is accepted), in [0, 1]
    counts: tuple[float, ...] | None = None  # P(N = j drafts accepted), j = 0..k; sums to 1
    seed: int = 0  # the scenario's seed

    def __post_init__(self) -> None:
        if (self.alpha is None) == (self.counts is None):
            raise ConfigError("speculative: give acceptance (alpha) or acceptance_counts, "
                              "exactly one")
        if self.alpha is not None and not 0.0 <= self.alpha <= 1.0:
            raise ConfigError(f"speculative.acceptance = {self.alpha!r}: must be in [0, 1]")
        if self.counts is not None:
            check_counts(self.counts, len(self.counts) - 1)

    def sampler(self, replica: int) -> AcceptanceSampler:
        """Replica ``replica``'s sampler, on its own generator."""
        return _Sampler(self, np.random.default_rng([self.seed, replica]))

    def mean_emitted(self, k: int) -> float:
        """Expected tokens a row given ``k`` drafts emits (for docs and tests, never the
        simulation): ``(1 - alpha^(k+1)) / (1 - alpha)``, or ``1 + sum j p_j``."""
        if self.alpha is not None:
            a = self.alpha
            return float(k + 1) if a == 1.0 else (1.0 - a ** (k + 1)) / (1.0 - a)
        assert self.counts is not None
        return 1.0 + sum(min(j, k) * p for j, p in enumerate(self.counts))


def check_counts(counts: Sequence[object], k: int, where: str = "speculative.acceptance_counts"
                 ) -> tuple[float, ...]:
    """``counts`` as floats if it is k + 1 probabilities summing to 1 (within 1e-6)."""
    if isinstance(counts, str | bytes) or not isinstance(counts, Sequence):
        raise ConfigError(f"{where} = {counts!r}: must be a list of {k + 1} probabilities "
                          "(of 0..k drafts accepted)")
    out = []
    for j, p in enumerate(counts):
        ok = isinstance(p, int | float) and not isinstance(p, bool)
        if not ok or not (0.0 <= float(p) <= 1.0) or math.isnan(float(p)):  # type: ignore[arg-type]
            raise ConfigError(f"{where}[{j}] = {p!r}: must be a probability in [0, 1]")
        out.append(float(p))  # type: ignore[arg-type]
    if len(out) != k + 1:
        raise ConfigError(f"{where} has {len(out)} values: needs {k + 1}, the probabilities "
                          f"of 0..{k} drafts accepted (k = speculative.num_tokens = {k})")
    if abs(sum(out) - 1.0) > 1e-6:
        raise ConfigError(f"{where} = {list(out)}: must sum to 1 (sums to {sum(out):.6g})")
    return tuple(out)


@dataclass(slots=True)
class _Sampler:
    model: Acceptance
    rng: np.random.Generator
    _p: np.ndarray | None = field(default=None)

    def draw(self, drafts: list[int]) -> list[int]:
        s = np.asarray(drafts, dtype=np.int64)
        n = len(s)
        alpha = self.model.alpha
        if alpha is not None:
            if alpha >= 1.0:
                leading = s
            elif alpha <= 0.0:
                leading = np.zeros(n, dtype=np.int64)
            else:
                leading = self.rng.geometric(1.0 - alpha, n) - 1
        else:
            if self._p is None:
                self._p = np.asarray(self.model.counts, dtype=np.float64)
                self._p /= self._p.sum()
            leading = self.rng.choice(len(self._p), n, p=self._p)
        return (np.minimum(leading, s) + 1).tolist()


@dataclass(frozen=True, slots=True)
class ReplayAcceptance:
    """A recorded run's emitted counts: ``steps[i]`` is the ``accepted`` list of its i-th
    speculative step (one replica: every replica would replay the same list)."""

    steps: tuple[tuple[int, ...], ...]

    def sampler(self, replica: int) -> AcceptanceSampler:
        return _Replay(self.steps)


@dataclass(slots=True)
class _Replay:
    steps: tuple[tuple[int, ...], ...]
    next: int = 0

    def draw(self, drafts: list[int]) -> list[int]:
        if self.next >= len(self.steps):
            raise AssertionError(f"speculative step {self.next}: the recorded run has only "
                                 f"{len(self.steps)}")
        got = list(self.steps[self.next])
        if len(got) != len(drafts):
            raise AssertionError(f"speculative step {self.next}: {len(drafts)} decode rows, "
                                 f"the recorded run had {len(got)}")
        self.next += 1
        return got
