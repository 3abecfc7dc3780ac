"""Black-box calibration of the API server's queue (simulator/token_stream.py): its intake
(``intake_s``: it takes requests in one at a time, and tokens wait behind it) and its token
stream (``stream_s``: it hands tokens out one at a time), each fitted by a replay's finite
difference beside the linear model of the other terms (calibrate/from_run.py). No torch.

The runs are simulated with a known answer: the tiny CPU profile under continuous batching
of up to 64 rows, request_s 5 ms, token_s 0.4 ms, and intake_s 5 ms (a burst of 200 and
200 Poisson arrivals at 4 req/s) or stream_s 1.2 ms (the server hands out at most 833
tokens a second; 200 arrivals at 4 and at 40 req/s ask for about 70 and 700). No step
jitter, so a right answer reads every request exactly.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from helpers import TokenCost, table

from calibrate.fit_spread import describe_spread, term_spread
from calibrate.from_run import (
    INTAKE_TERMS,
    Calibration,
    Target,
    describe_terms,
    errors,
    fit,
    replay,
    select_terms,
)
from calibrate.run_records import MeasuredRun
from simulator.cluster import ClusterSpec, simulate
from simulator.costs import load_profile
from simulator.costs.host import FIT_TERMS, HostCost, Overhead
from simulator.policies import ContinuousPolicy

TRUE = Overhead(token_s=4e-4, request_s=5e-3, intake_s=5e-3)
STREAM = Overhead(token_s=4e-4, request_s=5e-3, stream_s=1.2e-3)
BASE = load_profile(Path("simulator/profiles/cpu__tiny__fp32__tp1.json")).build_fitted()


def _run(name: str, arrivals: np.ndarray, seed: int, true: Overhead = TRUE) -> Target:
    """``arrivals`` served with ``true`` over BASE, as a per-request measured run to fit."""
    rng = np.random.default_rng(seed)
    n = len(arrivals)
    reqs = table([(float(a), int(p), int(o)) for a, p, o in
                  zip(arrivals, rng.integers(16, 200, n), rng.integers(4, 30, n), strict=True)])
    return measured(name, reqs, true)


def measured(name: str, reqs: pd.DataFrame, true: Overhead = TRUE) -> Target:
    """The requests ``reqs`` served with ``true`` over BASE, as a measured run to fit."""
    spec = ClusterSpec(ContinuousPolicy(max_num_seqs=64), HostCost(BASE, true), 4000, 16,
                       request_s=true.request_s)
    r = simulate(reqs, spec).requests.set_index("request_id").reindex(reqs["request_id"])
    out = r["output_tokens"].to_numpy()
    run = MeasuredRun(name, reqs, (r["first_token_s"] - r["arrival_s"]).to_numpy(),
                      ((r["finish_s"] - r["first_token_s"]) / (out - 1)).to_numpy(),
                      (r["finish_s"] - r["arrival_s"]).to_numpy(), per_request=True)
    return Target(run, ClusterSpec(ContinuousPolicy(max_num_seqs=64), BASE, 4000, 16))


def _say(label: str, cal: Calibration, **errs: float) -> None:
    """Print a fit's terms and errors (``pytest -s`` shows what docs/calibration.md quotes)."""
    terms = [t for t in FIT_TERMS if t == "time_scale" or cal.value(t) > 0]
    shown = ", ".join(f"{t} {v}" for t, v in describe_terms(cal, terms))
    print(f"\n{label}: {shown}; " + ", ".join(f"{k} {v:+.1%}" for k, v in errs.items()))


@pytest.fixture(scope="module")
def runs() -> list[Target]:
    paced = np.cumsum(np.random.default_rng(2).exponential(1 / 4.0, 200))
    return [_run("burst", np.zeros(200), 1), _run("paced", paced, 2)]


def test_the_intake_derivative_is_the_burst_it_waits_for() -> None:
    """Five requests at once, an engine of a microsecond a step: every first token waits
    until the server has taken the five in, so each TTFT is 5 x intake_s (+ request_s) and
    moves 5 s a second of intake_s; TPOT not at all."""
    reqs = table([(0.0, 8, 3)] * 5)
    run = MeasuredRun("five", reqs, np.full(5, 0.1), np.full(5, 1e-6), np.full(5, 0.1), True)
    target = Target(run, ClusterSpec(ContinuousPolicy(), TokenCost(step_s=1e-6), 100, 4))
    cal = Calibration(1.0, Overhead(request_s=0.01, intake_s=0.02))
    pred = replay(target, cal, ("intake_s",))
    np.testing.assert_allclose(pred.ttft_s, 0.01 + 5 * 0.02, atol=1e-4)
    col = FIT_TERMS.index("intake_s")
    np.testing.assert_allclose(pred.ttft_jac[:, col], 5.0, rtol=1e-3)
    np.testing.assert_allclose(pred.tpot_jac[:, col], 0.0, atol=1e-3)
    assert (replay(target, cal).ttft_jac[:, col] == 0).all()  # not fitted: no second replay


def test_a_burst_and_a_paced_run_recover_the_intake(runs: list[Target]) -> None:
    """Fitted: time_scale 1.000, token 0.400, request 5.000, intake 5.000 ms; a burst of 600
    and 12 req/s, not fitted on, read exactly. Without intake_s the same runs fit request_s
    9.6 ms and token_s 0.34 ms, and the burst of 600 reads mean TPOT +14%. The burst alone
    finds the intake too (4.998 ms; time_scale 1.000, token 0.400, request 5.47 ms) since
    the fit also starts from the queue term and another sharing their time (stop 74; from
    its one start it stopped at time_scale 1.079 and no intake, within 3% in-sample), and
    its spread (calibrate/fit_spread.py) marks time_scale and token_s loose (98-99% of each
    one's effect on the errors is the other's; with the paced run: 67-72%)."""
    got = fit(runs, INTAKE_TERMS).calibration
    both = term_spread(runs, got, INTAKE_TERMS)
    print("\nspread, both runs: " + "; ".join(f"{s.term} {describe_spread(s)}" for s in both))
    assert not any(s.loose() for s in both)
    assert got.time_scale == pytest.approx(1.0, abs=0.01)
    for term in ("token_s", "request_s", "intake_s"):
        assert got.value(term) == pytest.approx(TRUE.to_dict()[term], rel=0.03), term
    big = _run("burst600", np.zeros(600), 3)
    fast = _run("paced12", np.cumsum(np.random.default_rng(4).exponential(1 / 12.0, 300)), 4)
    for t in (big, fast):
        errs = errors(t.run, replay(t, got))
        _say(f"intake, {t.run.name} not fitted on", got, ttft_mean=errs["ttft_mean"],
             tpot_mean=errs["tpot_mean"])
        assert max(abs(errs[k]) for k in ("ttft_mean", "tpot_mean", "e2e_mean")) < 0.02
    alone = fit(runs[:1], INTAKE_TERMS)
    _say("the burst alone", alone.calibration,
         worst=max(alone.errors["burst"].values(), key=abs))
    assert alone.calibration.time_scale == pytest.approx(1.0, abs=0.01)
    assert alone.calibration.overhead.intake_s == pytest.approx(TRUE.intake_s, rel=0.02)
    assert max(abs(e) for e in alone.errors["burst"].values()) < 0.01
    one = term_spread(runs[:1], alone.calibration, INTAKE_TERMS)
    print("spread, the burst alone: " + "; ".join(f"{s.term} {describe_spread(s)}" for s in one))
    assert {s.term for s in one if s.loose()} == {"time_scale", "token_s"}
    without = fit(runs, [t for t in INTAKE_TERMS if t != "intake_s"]).calibration
    _say("without intake_s, burst600", without,
         tpot_mean=errors(big.run, replay(big, without))["tpot_mean"])
    assert without.overhead.request_s > 1.5 * TRUE.request_s  # the queue read as latency
    assert errors(big.run, replay(big, without))["tpot_mean"] > 0.08


def test_a_paced_run_alone_pins_the_intake_and_request_s_together(runs: list[Target]) -> None:
    """At 4 req/s and 5 ms an intake, requests seldom queue at the server: intake 2.5 ms and
    request 7.5 ms read every request exactly, as the truth (5, 5) does; the loss is flat
    along their sum. The fit lands on that sum (intake 5.4, request 4.6 ms), the split
    arbitrary; the spread names request_s as the intake's partner but shares only 31-66%
    there, as the intake's finite difference sees a few requests queue: a share is local
    (docs/calibration.md, "How firmly the runs pin each term")."""
    paced = runs[1]
    other = Calibration(1.0, Overhead(token_s=4e-4, request_s=7.5e-3, intake_s=2.5e-3))
    assert max(abs(e) for e in errors(paced.run, replay(paced, other)).values()) < 1e-9
    got = fit([paced], INTAKE_TERMS).calibration
    total = got.overhead.request_s + got.overhead.intake_s
    assert total == pytest.approx(TRUE.request_s + TRUE.intake_s, rel=0.01)
    spread = {s.term: s for s in term_spread([paced], got, INTAKE_TERMS)}
    _say("the paced run alone", got)
    print("spread, the paced run alone: " + "; ".join(
        f"{s.term} {describe_spread(s)}" for s in spread.values()))
    assert spread["intake_s"].partner == "request_s"
    assert not spread["intake_s"].loose() and not spread["request_s"].loose()  # local


def test_auto_terms_offer_the_intake_where_a_run_is_a_burst(runs: list[Target]) -> None:
    """A burst puts INTAKE_TERMS among the candidates; two paced runs do not."""
    _, scores = select_terms(runs)
    assert INTAKE_TERMS in scores
    paced = [runs[1], _run("paced2", np.cumsum(np.random.default_rng(5).exponential(0.5, 60)),
                           5)]
    _, scores = select_terms(paced)
    assert INTAKE_TERMS not in scores


def _poisson(rate: float, n: int, seed: int) -> np.ndarray:
    return np.cumsum(np.random.default_rng(seed).exponential(1 / rate, n))


def test_a_light_and_a_busy_run_recover_the_token_stream() -> None:
    """At 4 req/s the stream keeps up; at 40 its tokens queue. Fitted from the two: time_scale
    1.000, token 0.400, request 4.997, stream 1.200 ms; a third run at 20 req/s read within
    0.3%. Without stream_s: token 0.445 and request 6.57 ms, and the busy run's P90 TTFT
    reads +12%."""
    light, busy = (_run(f"{r} req/s", _poisson(r, 200, s), s, STREAM)
                   for r, s in ((4, 6), (40, 7)))
    terms = ("time_scale", "token_s", "request_s", "stream_s")
    got = fit([light, busy], terms).calibration
    assert got.time_scale == pytest.approx(1.0, abs=0.01)
    for term in terms[1:]:
        assert got.value(term) == pytest.approx(STREAM.to_dict()[term], rel=0.03), term
    mid = _run("20 req/s", _poisson(20, 200, 8), 8, STREAM)
    errs = errors(mid.run, replay(mid, got))
    _say("stream, 20 req/s not fitted on", got, ttft_mean=errs["ttft_mean"],
         tpot_mean=errs["tpot_mean"], e2e_mean=errs["e2e_mean"])
    assert max(abs(errs[k]) for k in ("ttft_mean", "tpot_mean", "e2e_mean")) < 0.02
    without = fit([light, busy], terms[:3])
    _say("without stream_s, 40 req/s in-sample", without.calibration,
         ttft_p90=without.errors["40 req/s"]["ttft_p90"])
    assert without.errors["40 req/s"]["ttft_p90"] > 0.08
