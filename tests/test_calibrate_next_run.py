"""Which run to measure next (calibrate/next_run.py): candidate loads and length mixes,
replayed with the fit, scored by the fitted terms' shares were each measured. No torch."""

from __future__ import annotations

import math

import numpy as np
import pytest
from helpers import TokenCost, table
from test_calibrate_server_queue import INTAKE_TERMS, TRUE, _run, measured

from calibrate.fit_spread import TermSpread
from calibrate.from_run import Calibration, Target, fit
from calibrate.next_run import Candidate, _pairs, advice, candidates, proposal, served_rate
from calibrate.run_records import MeasuredRun
from simulator.cluster import ClusterSpec
from simulator.policies import ContinuousPolicy


def test_the_served_rate_of_a_burst_by_hand() -> None:
    """Four requests of 8 prompt and 3 output tokens at once, 10 ms a step whatever it
    holds: one step prefills all four (their first tokens), two more decode, so the last
    finishes at 30 ms: 4 / 0.03 = 133.3 req/s."""
    reqs = table([(0.0, 8, 3)] * 4)
    run = MeasuredRun("four", reqs, np.ones(4), np.ones(4), np.ones(4), per_request=True)
    target = Target(run, ClusterSpec(ContinuousPolicy(), TokenCost(step_s=0.01), 100, 4))
    pairs = reqs[["prompt_tokens", "output_tokens"]]
    assert served_rate(target, Calibration(), pairs) == pytest.approx(4 / 0.03)


def test_other_mixes_take_the_runs_own_longest_and_shortest_lengths() -> None:
    reqs = table([(0.0, p, o) for p, o in zip(range(1, 101), range(100, 0, -1), strict=True)])
    run = MeasuredRun("r", reqs, np.ones(100), np.ones(100), np.ones(100), per_request=True)
    target = Target(run, ClusterSpec(ContinuousPolicy(), TokenCost(step_s=0.01), 100, 4))
    rng = np.random.default_rng(0)
    heavy = _pairs([target], 50, rng, "long prompts")
    assert heavy["prompt_tokens"].min() >= 75.25 and heavy["output_tokens"].max() <= 25.75
    light = _pairs([target], 50, rng, "long outputs")
    assert light["prompt_tokens"].max() <= 25.75 and light["output_tokens"].min() >= 75.25
    same = _pairs([target], 50, rng)
    assert set(same["prompt_tokens"]) <= set(range(1, 101))


@pytest.fixture(scope="module")
def runs() -> list[Target]:
    paced = np.cumsum(np.random.default_rng(2).exponential(1 / 4.0, 200))
    return [_run("burst", np.zeros(200), 1), _run("paced", paced, 2)]


TRUE_VALUES = {"time_scale": 1.0, **TRUE.to_dict()}


def _shares(c: Candidate) -> dict[str, float]:
    return {s.term: s.shared for s in c.spread}


def test_a_burst_alone_asks_for_a_paced_run(runs: list[Target]) -> None:
    """The burst alone leaves time_scale and token_s loose (98-99%); another burst would not
    separate them (99%), every Poisson run and length mix tried would (78-91%)."""
    cal = fit(runs[:1], INTAKE_TERMS).calibration
    found = candidates(runs[:1], cal, INTAKE_TERMS)
    print("\n" + advice(found))
    burst = next(c for c in found if math.isinf(c.rate))
    assert burst.worst >= 0.95
    others = [c for c in found if not math.isinf(c.rate)]  # three loads, two mixes
    assert len(others) == 5 and all(c.worst < 0.95 for c in others)
    assert proposal(found).worst < 0.8 and advice(found).startswith("measure next: ")


def test_the_proposed_run_once_measured_pins_the_loose_terms(runs: list[Target]) -> None:
    """The proof of a proposal is measuring it. The burst alone reads request_s 9% high
    beside loose time_scale and token_s. Served with the true costs, the proposed run's
    requests fitted beside the burst bring every term within 2%; the long-outputs mix,
    rated worst of the others (91%), leaves token_s 15% low."""
    alone = fit(runs[:1], INTAKE_TERMS).calibration
    found = candidates(runs[:1], alone, INTAKE_TERMS)
    best = proposal(found)
    worst = max((c for c in found if not math.isinf(c.rate)), key=lambda c: c.worst)
    got = fit([runs[0], measured("proposed", best.requests)], INTAKE_TERMS).calibration
    off = fit([runs[0], measured("worst", worst.requests)], INTAKE_TERMS).calibration
    print(f"\nproposed ({best.label}): " + ", ".join(
        f"{t} {got.value(t) / TRUE_VALUES[t] - 1:+.1%}" for t in INTAKE_TERMS)
        + f"; {worst.label}: " + ", ".join(
        f"{t} {off.value(t) / TRUE_VALUES[t] - 1:+.1%}" for t in INTAKE_TERMS))
    for term in INTAKE_TERMS:
        assert got.value(term) == pytest.approx(TRUE_VALUES[term], rel=0.02), term
    assert off.overhead.token_s < 0.9 * TRUE.token_s


def test_a_paced_run_alone_asks_for_a_burst_to_pin_the_intake(runs: list[Target]) -> None:
    """In the 4 req/s run requests seldom queue at the server: the burst is proposed, and
    it would leave the intake 5% shared where a light Poisson run leaves it 39%."""
    cal = fit(runs[1:], INTAKE_TERMS).calibration
    found = candidates(runs[1:], cal, INTAKE_TERMS)
    print("\n" + advice(found))
    burst = next(c for c in found if math.isinf(c.rate))
    light = next(c for c in found if "(25% of" in c.label)
    assert proposal(found) is burst
    assert _shares(burst)["intake_s"] < 0.1 < 0.3 < _shares(light)["intake_s"]


def test_advice_says_when_no_run_would_do() -> None:
    loose = [TermSpread("time_scale", True, 0.97), TermSpread("step_s", True, 0.96)]
    found = [Candidate("a burst of 9", math.inf, table([(0.0, 8, 3)] * 9), loose)]
    assert advice(found).startswith("no run tried separates the loose terms (at best 97%")
    assert advice([]) == ""
    firm = Candidate("2 req/s (25% of 8)", 2.0, found[0].requests, [TermSpread("step_s", True, 0.5),
                                                    TermSpread("admit_s", False, math.nan)])
    assert firm.worst == 0.5 and proposal([found[0], firm]) is firm
