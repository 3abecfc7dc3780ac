"""Black-box calibration of a deployment whose scheduler overlaps its steps (vLLM's async
scheduling, SGLang's overlap scheduler): the per-row host work ``seq_s`` runs beside each
step (simulator/costs/host.py), and ``calibrate --from-run`` fits it so
(calibrate/from_run.py, calibrate/replay_jacobian.py). No torch.

The runs are simulated with a known answer (calibrate/synthetic_run.py): the tiny CPU model
under continuous batching of at most 8 rows, 150 requests at 3 and 6 req/s, 5% step jitter,
time_scale 1.1, request_s 5 ms and seq_s 3 ms. A decode step of 8 rows is about 16.5 ms of
kernels (1.1 x 15), so 3 ms a row outlasts it from 6 rows on: the busier run has both kinds
of step.
"""

from __future__ import annotations

import argparse
from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from helpers import TokenCost

from calibrate.from_run import (
    BESIDE_TERMS,
    CANDIDATE_TERMS,
    Calibration,
    describe_terms,
    fit,
    select_terms,
)
from calibrate.from_run_setup import match_points, targets
from calibrate.replay_jacobian import step_features
from calibrate.run_records import read_runs
from calibrate.synthetic_run import write_run
from servesim.calibrate_from_run import add_from_run_arguments, from_run_command
from simulator.cluster import ClusterSpec, simulate
from simulator.costs import load_profile
from simulator.costs.host import FIT_TERMS, HostCost, Overhead, calibrated_cost
from simulator.policies import ContinuousPolicy
from simulator.scenario import apply_overrides, expand_sweep, load_scenario

SCENARIO = "scenarios/validate-cpu.toml"
DEPLOYMENT = ["policy.name='continuous'", "policy.overlap_schedule=true",
              "workload.rate=[3.0, 6.0]"]
INJECTED = ["cost.profile='cpu__tiny__fp32__tp1.json'", "cost.time_scale=1.1",
            "cost.jitter_cv=0.05"]
TERMS = "time_scale,seq_s,request_s"


def _write(folder: Path, seq_s: float) -> Path:
    raw = apply_overrides(load_scenario(SCENARIO), [
        *DEPLOYMENT, *INJECTED, f"cost.overhead={{request_s=0.005, seq_s={seq_s}}}"])
    write_run(expand_sweep(raw), folder)
    return folder


@pytest.fixture(scope="module")
def rows_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _write(tmp_path_factory.mktemp("overlap") / "run", 0.003)


def _say(label: str, cal: Calibration, **errs: float) -> None:
    """Print a fit's terms and errors (``pytest -s`` shows what docs/calibration.md quotes)."""
    terms = [t for t in FIT_TERMS if t == "time_scale" or cal.value(t) > 0]
    shown = ", ".join(f"{t} {v}" for t, v in describe_terms(cal, terms))
    print(f"\n{label}: {shown}; " + ", ".join(f"{k} {v:+.1%}" for k, v in errs.items()))


def _fit_cli(run: Path, out: Path) -> object:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out")
    add_from_run_arguments(parser)
    sets = [x for s in DEPLOYMENT for x in ("--set", s)]
    args = parser.parse_args(["--from-run", str(run), "--scenario", SCENARIO, *sets,
                              "--fit", TERMS, "--out", str(out)])
    assert from_run_command(args, argv=["calibrate", "--from-run"]) == 0
    return load_profile(out)


def test_the_linear_model_prices_each_step_on_its_side_of_the_max() -> None:
    """F @ theta is every step's duration exactly, under the overlap: by hand, a 1 s step
    (TokenCost) with 0.1 s of step_s and 0.3 s a decode row beside it is 1.1 s up to 3 rows
    and 0.3 x D from 4 rows; the replay's step log agrees with the features."""
    rng = np.random.default_rng(5)
    reqs = pd.DataFrame({"request_id": range(12), "arrival_s": np.sort(rng.uniform(0, 3, 12)),
                         "prompt_tokens": rng.integers(4, 12, 12),
                         "output_tokens": rng.integers(3, 9, 12)})
    base = TokenCost(step_s=1.0)
    cal = Calibration(1.0, Overhead(step_s=0.1, seq_s=0.3))
    cost = calibrated_cost(base, 1.0, cal.overhead, overlap=True)
    assert isinstance(cost, HostCost) and cost.overlapped
    res = simulate(reqs, ClusterSpec(ContinuousPolicy(max_num_seqs=8), cost, 100, 4))
    steps = res.steps.sort_values("start_s", kind="stable")
    theta = np.array([cal.value(t) for t in FIT_TERMS])
    feats = step_features(steps, res.requests, base, theta)
    took = (steps["end_s"] - steps["start_s"]).to_numpy()
    np.testing.assert_allclose(feats @ theta, took, rtol=1e-9)
    rows = steps["num_decode_seqs"].to_numpy()
    assert (rows >= 4).any() and (rows <= 3).any()  # both sides of the max were visited
    np.testing.assert_allclose(took, np.where(rows >= 4, 0.3 * rows, 1.1), rtol=1e-9)
    seq = FIT_TERMS.index("seq_s")
    # a step the rows outlast moves with seq_s alone; any other step not at all
    assert (feats[rows >= 4][:, seq] == rows[rows >= 4]).all()
    assert (np.delete(feats[rows >= 4], seq, axis=1) == 0).all()
    assert (feats[rows <= 3][:, seq] == 0).all()


def test_fit_recovers_seq_s_beside_the_step(rows_run: Path, tmp_path: Path) -> None:
    """Fitted: time_scale 1.095, seq_s 3.01 ms, request_s 4.7 ms (workload seed 11); each
    run predicted by a fit on the other: mean TTFT within 6%, mean TPOT within 2%."""
    prof = _fit_cli(rows_run, tmp_path / "fitted.json")
    host = Overhead(**prof.overhead)
    assert host.seq_s == pytest.approx(0.003, rel=0.05)
    assert prof.time_scale == pytest.approx(1.1, rel=0.03)
    assert host.request_s == pytest.approx(0.005, rel=0.2)
    record = prof.fit["from_run"]
    assert record["seq_s"].startswith("beside each step")
    for name, errs in record["heldout_error"].items():
        _say(f"beside, {name} held out", Calibration(prof.time_scale, host),
             ttft_mean=errs["ttft_mean"], tpot_mean=errs["tpot_mean"])
        assert abs(errs["ttft_mean"]) < 0.08 and abs(errs["tpot_mean"]) < 0.08


def test_a_fit_in_series_misreads_the_same_runs(rows_run: Path) -> None:
    """What the overlap changes: priced in series, the same runs fit seq_s 0.87 ms and
    time_scale 0.99, and the busier run's mean TTFT reads -19% in-sample (P90 -26%); priced
    beside the step, within 1%."""
    points = expand_sweep(apply_overrides(load_scenario(SCENARIO), DEPLOYMENT))
    fitted, start, _, _ = targets(match_points([read_runs(rows_run)], points,
                                               [str(rows_run)]), None)
    assert all(t.overlap for t in fitted)
    series = fit([replace(t, overlap=False) for t in fitted], TERMS.split(","), start)
    assert series.calibration.overhead.seq_s < 0.5 * 0.003
    busier = series.errors[fitted[1].run.name]
    _say("in series, 6 req/s in-sample", series.calibration, ttft_mean=busier["ttft_mean"],
         ttft_p90=busier["ttft_p90"])
    worst = max(abs(e["ttft_mean"]) for e in series.errors.values())
    assert worst > 0.1
    beside = fit(fitted, TERMS.split(","), start)
    assert max(abs(e["ttft_mean"]) for e in beside.errors.values()) < 0.03


def test_a_seq_s_no_step_shows_is_not_fitted(tmp_path: Path) -> None:
    """Runs made without seq_s: a seq_s that outlasts no step changes no replay, so the fit
    keeps none (a guess below the kink would slow a what-if's bigger batches)."""
    prof = _fit_cli(_write(tmp_path / "run", 0.0), tmp_path / "fitted.json")
    assert Overhead(**prof.overhead).seq_s == 0.0
    assert prof.time_scale == pytest.approx(1.1, rel=0.03)


def test_auto_terms_find_the_row_cost_of_overlapping_steps(rows_run: Path) -> None:
    """``--fit auto`` scores the row cost beside the step too where the runs' steps overlap,
    and on these runs it predicts each from the other best (no other candidate set holds
    ``seq_s``)."""
    points = expand_sweep(apply_overrides(load_scenario(SCENARIO), DEPLOYMENT))
    fitted, start, _, _ = targets(match_points([read_runs(rows_run)], points,
                                               [str(rows_run)]), None)
    chosen, scores = select_terms(fitted, start)
    print("\n" + "\n".join(f"{v:.1%} {','.join(k)}" for k, v in scores.items()))
    assert chosen == BESIDE_TERMS and set(scores) == {*CANDIDATE_TERMS, BESIDE_TERMS}
    assert scores[BESIDE_TERMS] < 0.5 * min(v for k, v in scores.items() if k != BESIDE_TERMS)
