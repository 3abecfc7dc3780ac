"""Tokens per speculative step emerge from per-draft draws (issue 14).

The simulator draws each row's leading accepted drafts; it never uses the closed form.
Over n row-steps given k drafts, the mean emitted must be within 4 standard errors of
``(1 - alpha^(k+1)) / (1 - alpha)``, the standard error from the exact variance of
``a = min(N, k) + 1`` with ``P(N = j) = alpha^j (1 - alpha)``.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from helpers import TokenCost, table

from simulator.cluster import ClusterSpec, simulate
from simulator.policies import ContinuousPolicy
from simulator.speculative_acceptance import Acceptance, ReplayAcceptance
from simulator.speculative_stats import SpecStats, spec_summary


def _law(alpha: float | None, counts: tuple[float, ...] | None, k: int) -> np.ndarray:
    """P(a = 1 + j), j = 0..k, for a row given k drafts."""
    if counts is not None:
        return np.asarray(counts)
    assert alpha is not None
    p = np.array([alpha ** j * (1 - alpha) for j in range(k)] + [alpha ** k])
    return p


def _run(acceptance: Acceptance, k: int, seed_rows: int = 24, out: int = 300):  # type: ignore[no-untyped-def]
    rows = [(0.05 * i, 16, out) for i in range(seed_rows)]
    policy = ContinuousPolicy(num_speculative_tokens=k, chunked_prefill=True,
                              max_num_batched_tokens=256)
    spec = ClusterSpec(policy, TokenCost(step_s=0.01, decode_seq_s=1e-4), kv_blocks=4096,
                       block_size=16, speculative=acceptance)
    return simulate(table(rows), spec)


@pytest.mark.parametrize(("alpha", "k"), [(0.3, 4), (0.6, 4), (0.8, 2), (0.9, 7), (0.5, 1)])
def test_mean_tokens_per_step_emerges(alpha: float, k: int) -> None:
    res = _run(Acceptance(alpha=alpha, seed=7), k)
    stats = res.spec_stats
    assert stats is not None
    n, emitted = stats.with_drafts(k)
    law = _law(alpha, None, k)
    a = np.arange(1, k + 2)
    mean, var = float(law @ a), float(law @ a**2 - (law @ a) ** 2)
    assert mean == pytest.approx((1 - alpha ** (k + 1)) / (1 - alpha), rel=1e-12)
    assert n > 1000
    assert abs(emitted / n - mean) < 4 * math.sqrt(var / n), (emitted / n, mean, n)
    # the whole run's figure (rows near their end verify fewer drafts) against its own law
    expect = sum(stats.with_drafts(s)[0] * float(_law(alpha, None, s) @ np.arange(1, s + 2))
                 for s in range(k + 1))
    spread = math.sqrt(sum(stats.with_drafts(s)[0] * float(
        _law(alpha, None, s) @ np.arange(1, s + 2) ** 2
        - (_law(alpha, None, s) @ np.arange(1, s + 2)) ** 2) for s in range(k + 1)))
    assert abs(stats.num_emitted - expect) < 4 * spread
    summary = spec_summary(stats)
    assert summary["spec_mean_accepted_tokens_per_step"] == stats.num_emitted / stats.num_row_steps
    assert summary["spec_acceptance_rate"] == stats.num_accepted / stats.num_drafts


def test_a_measured_distribution_is_sampled() -> None:
    counts = (0.1, 0.2, 0.3, 0.4)  # P(0..3 drafts accepted)
    res = _run(Acceptance(counts=counts, seed=3), 3)
    stats = res.spec_stats
    assert stats is not None
    n, emitted = stats.with_drafts(3)
    a = np.arange(1, 5)
    law = np.asarray(counts)
    mean, var = float(law @ a), float(law @ a**2 - (law @ a) ** 2)
    assert mean == Acceptance(counts=counts).mean_emitted(3) == pytest.approx(3.0)
    assert abs(emitted / n - mean) < 4 * math.sqrt(var / n)


def test_same_seed_same_answer_other_seed_other_draws() -> None:
    one = _run(Acceptance(alpha=0.6, seed=1), 4, seed_rows=6, out=80)
    two = _run(Acceptance(alpha=0.6, seed=1), 4, seed_rows=6, out=80)
    other = _run(Acceptance(alpha=0.6, seed=2), 4, seed_rows=6, out=80)
    assert one.requests.equals(two.requests) and one.steps.equals(two.steps)
    assert not one.requests["finish_s"].equals(other.requests["finish_s"])


def test_replicas_draw_from_their_own_streams() -> None:
    model = Acceptance(alpha=0.5, seed=4)
    a, b = model.sampler(0), model.sampler(1)
    assert a.draw([4] * 50) != b.draw([4] * 50)
    assert Acceptance(alpha=0.5, seed=4).sampler(0).draw([4] * 50) == model.sampler(0).draw(
        [4] * 50)


def test_replay_gives_the_recorded_counts() -> None:
    free = _run(Acceptance(alpha=0.7, seed=5), 3, seed_rows=4, out=30)
    # record the draws of the free run by replaying its own sampler's stream
    sampler = Acceptance(alpha=0.7, seed=5).sampler(0)
    recorded: list[tuple[int, ...]] = []

    class Recorder:
        def sampler(self, replica: int):  # type: ignore[no-untyped-def]
            return self

        def draw(self, drafts: list[int]) -> list[int]:
            got = sampler.draw(drafts)
            recorded.append(tuple(got))
            return got

    again = _run(Recorder(), 3, seed_rows=4, out=30)  # type: ignore[arg-type]
    assert again.requests.equals(free.requests)
    replayed = _run(ReplayAcceptance(tuple(recorded)), 3, seed_rows=4, out=30)
    assert replayed.requests.equals(free.requests)


def test_stats_combine_and_count() -> None:
    a, b = SpecStats(), SpecStats()
    a.add([4, 4, 0], [5, 1, 1])
    b.add([2], [3])
    both = SpecStats.combine([a, b])
    assert both.num_row_steps == 4 and both.num_emitted == 10
    assert both.num_drafts == 10 and both.num_accepted == 6
    assert spec_summary(both)["spec_acceptance_rate"] == pytest.approx(0.6)
    assert spec_summary(SpecStats())["spec_mean_accepted_tokens_per_step"] is None


def test_a_recorded_run_replays_exactly_with_its_step_times_and_counts() -> None:
    """What the engine-replay test does with speculative steps: a run's step durations
    (ReplayCost, shapes checked) and emitted counts (ReplayAcceptance) fed back reproduce
    every request's times within 1e-9 s."""
    from simulator.costs.base import JitterCost
    from simulator.costs.replay import ReplayCost

    sampler = Acceptance(alpha=0.6, seed=9).sampler(0)
    recorded: list[tuple[int, ...]] = []

    class Recorder:
        def sampler(self, replica: int):  # type: ignore[no-untyped-def]
            return self

        def draw(self, drafts: list[int]) -> list[int]:
            got = sampler.draw(drafts)
            recorded.append(tuple(got))
            return got

    rows = [(0.03 * i, 10 + 7 * i, 20 + 3 * i) for i in range(10)]
    policy = ContinuousPolicy(num_speculative_tokens=3, chunked_prefill=True,
                              max_num_batched_tokens=32)
    noisy = JitterCost(TokenCost(step_s=0.01, prefill_token_s=1e-4, decode_seq_s=1e-3), 0.2, 1)
    first = simulate(table(rows), ClusterSpec(policy, noisy, kv_blocks=40, block_size=4,
                                              speculative=Recorder()))  # type: ignore[arg-type]
    again = simulate(table(rows), ClusterSpec(policy, ReplayCost(first.steps), kv_blocks=40,
                                              block_size=4,
                                              speculative=ReplayAcceptance(tuple(recorded))))
    cols = ["scheduled_s", "first_token_s", "finish_s"]
    np.testing.assert_allclose(again.requests[cols], first.requests[cols], rtol=0, atol=1e-9)
    assert first.requests["preemptions"].sum() > 0  # the small cache preempted on the way
