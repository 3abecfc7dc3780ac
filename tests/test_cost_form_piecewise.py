"""The piecewise cost form: arithmetic per step kind, scalar == vector exactly, the fit
recovers known coefficients, the rules for unmeasured kinds, and contract 3 (JSON, [cost])."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from calibrate.fit import KNEE_GRID, fit_profile, fit_steps
from simulator.costs import (
    CostProfile,
    LinearCost,
    PiecewiseCost,
    cost_model_from_config,
    load_profile,
    save_profile,
)
from simulator.errors import ConfigError
from simulator.shapes import StepShape, StepShapes
from simulator.specs import get_hardware, get_model

TRUE = {  # seconds per unit; knees on the fit's power-of-two grid
    "prefill_step_s": 0.020,
    "decode_step_s": 0.012,
    "mixed_step_s": 0.024,
    "single_token_step_s": 0.009,
    "prefill_token_s": 1e-5,
    "knee1_tokens": 256.0,
    "knee1_token_s": 8e-5,
    "knee2_tokens": 2048.0,
    "knee2_token_s": 4e-5,
    "prefill_attn_s": 3e-9,
    "decode_seq_s": 1e-4,
    "decode_context_s": 5e-8,
    "admit_s": 5e-4,
    "finish_s": 2e-4,
}
COST = PiecewiseCost(**TRUE)


def test_each_step_kind_by_hand() -> None:
    # batch-1 decode: single-token fixed cost, D = 1, C = 1000
    assert COST.step_time(StepShape(num_decode_seqs=1, decode_context_tokens=1000)) == \
        pytest.approx(0.009 + 1e-4 + 5e-8 * 1000, rel=1e-12)
    # decode, 8 rows: decode fixed cost; T = 8 is below both knees
    assert COST.step_time(StepShape(num_decode_seqs=8, decode_context_tokens=8000)) == \
        pytest.approx(0.012 + 8e-4 + 4e-4, rel=1e-12)
    # prefill of 4096 tokens, one request: 0.020 + 1e-5*4096 + 8e-5*(4096-256)
    #   + 4e-5*(4096-2048) + 3e-9*4096*2048 + 5e-4
    p = 4096
    want = 0.020 + 1e-5 * p + 8e-5 * (p - 256) + 4e-5 * (p - 2048) + 3e-9 * p * p / 2 + 5e-4
    shape = StepShape(num_prefill_tokens=p, prefill_attn_work=p * p / 2, num_admitted=1)
    assert COST.step_time(shape) == pytest.approx(want, rel=1e-12)
    # finishing two requests in a decode step costs finish_s each, not the admission cost
    two_done = StepShape(num_decode_seqs=8, decode_context_tokens=8000, num_finished=2)
    assert COST.step_time(two_done) == pytest.approx(0.012 + 8e-4 + 4e-4 + 4e-4, rel=1e-12)
    # below the first knee a prefill pays its floor and the small per-token term only
    assert COST.step_time(StepShape(num_prefill_tokens=128)) == pytest.approx(0.020 + 1.28e-3)
    # mixed: 200 prefill tokens + 100 decode rows -> T = 300, 44 tokens past the first knee
    mixed = StepShape(num_prefill_tokens=200, num_decode_seqs=100, decode_context_tokens=10**5)
    assert COST.step_time(mixed) == pytest.approx(
        0.024 + 1e-5 * 200 + 8e-5 * 44 + 1e-4 * 100 + 5e-8 * 1e5, rel=1e-12)
    # a one-token prefill runs matrix-vector kernels too
    assert COST.step_time(StepShape(num_prefill_tokens=1, prefill_attn_work=0.5)) == \
        pytest.approx(0.009 + 1e-5 + 1.5e-9, rel=1e-12)


def test_validation_names_the_field() -> None:
    with pytest.raises(ConfigError, match=r"knee1_tokens=-1(\.0)? must be a number in \[0.0"):
        PiecewiseCost(decode_step_s=0.01, knee1_tokens=-1)
    with pytest.raises(ConfigError, match=r"prefill_step_s=nan"):
        PiecewiseCost(prefill_step_s=math.nan)
    with pytest.raises(ConfigError, match="all coefficients are 0"):
        PiecewiseCost(knee1_tokens=256, knee2_tokens=2048)


@st.composite
def shapes(draw: st.DrawFn) -> StepShape:
    p = draw(st.sampled_from([0, 1, 2]) | st.integers(0, 20_000))
    d = draw(st.sampled_from([0, 1, 2]) | st.integers(0, 512))
    ctx = draw(st.integers(0, 32_768))
    return StepShape(
        num_prefill_tokens=p, prefill_attn_work=p * (ctx + p / 2), num_decode_seqs=d,
        decode_context_tokens=draw(st.integers(d, max(d, 1) * 32_768)),
        num_admitted=draw(st.integers(0, 8)), num_finished=draw(st.integers(0, max(d, 0))),
    )


coefficient = st.floats(0, 0.05, allow_nan=False) | st.sampled_from([0.0, 1e-9, 3e-5])
knee = st.sampled_from([0.0, 1.0, 2.0]) | st.floats(0, 20_000, allow_nan=False)


@settings(max_examples=200, deadline=None)
@given(steps=st.lists(shapes(), min_size=1, max_size=30),
       values=st.fixed_dictionaries({k: knee if k.endswith("_tokens") else coefficient
                                     for k in TRUE}))
def test_step_times_equal_step_time_exactly(steps: list[StepShape],
                                            values: dict[str, float]) -> None:
    for name in ("prefill_step_s", "decode_step_s", "mixed_step_s", "single_token_step_s"):
        values[name] += 1e-4  # every step has some fixed cost
    cost = PiecewiseCost(**values)
    vector = cost.step_times(StepShapes.from_shapes(steps))
    scalar = np.array([cost.step_time(s) for s in steps])
    assert vector.dtype == np.float64 and vector.shape == (len(steps),)
    np.testing.assert_array_equal(vector, scalar)
    assert np.all(scalar > 0)


def test_more_work_never_costs_less() -> None:
    """Monotone in every term, and a mixed step costs at least each of its halves alone."""
    base = StepShape(num_prefill_tokens=300, prefill_attn_work=300 * 150, num_decode_seqs=16,
                     decode_context_tokens=16_000)
    t = COST.step_time(base)
    for more in (StepShape(330, 330 * 165, 16, 16_000), StepShape(300, 300 * 150, 17, 17_000),
                 StepShape(300, 300 * 150, 16, 20_000), StepShape(300, 300 * 150, 16, 16_000, 1)):
        assert COST.step_time(more) > t
    prefill_only = COST.step_time(StepShape(300, 300 * 150))
    decode_only = COST.step_time(StepShape(num_decode_seqs=16, decode_context_tokens=16_000))
    assert t > max(prefill_only, decode_only)


def synthetic_steps(noise: float = 0.02, seed: int = 1, n: int = 400) -> pd.DataFrame:
    """Single-token, decode, prefill and mixed steps priced by TRUE, times x (1 + noise*N)."""
    rng = np.random.default_rng(seed)
    phase = rng.choice(["prefill", "decode", "mixed"], size=n, p=[0.35, 0.4, 0.25])
    pre, dec = phase != "decode", phase != "prefill"
    chunk = np.exp(rng.uniform(np.log(16), np.log(8192), size=n)).astype(np.int64) * pre
    ctx = rng.integers(0, 4096, size=n) * pre
    d = np.where(rng.random(n) < 0.3, 1, rng.integers(2, 256, size=n)) * dec
    c = d * rng.integers(64, 4096, size=n)
    admitted, finished = rng.integers(0, 4, size=n) * pre, rng.integers(0, 4, size=n) * dec
    a = chunk * (ctx + chunk / 2)
    steps = pd.DataFrame({
        "phase": phase, "num_prefill_tokens": chunk, "num_decode_seqs": d,
        "prefill_attn_work": a, "decode_context_tokens": c, "batch_size": d + (chunk > 0),
        "time_s": 0.0, "num_admitted": admitted, "num_finished": finished,
    })
    shapes_ = StepShapes(*(steps[k].to_numpy() for k in (
        "num_prefill_tokens", "prefill_attn_work", "num_decode_seqs", "decode_context_tokens",
        "num_admitted", "num_finished")))
    steps["time_s"] = COST.step_times(shapes_) * (1 + noise * rng.standard_normal(n))
    return steps


def test_fit_recovers_known_coefficients_with_2pct_noise() -> None:
    steps = synthetic_steps(noise=0.02)
    assert (steps["num_decode_seqs"] == 1).sum() > 20  # single-token steps are in the table
    report = fit_steps(steps, "piecewise")
    got = report.coefficients
    assert (got["knee1_tokens"], got["knee2_tokens"]) == (256.0, 2048.0)
    for name, want in TRUE.items():
        # small shares of any step are recovered less tightly
        tol = {"admit_s": 0.3, "finish_s": 0.5, "prefill_token_s": 0.15,
               "decode_seq_s": 0.1}.get(name, 0.05)
        assert got[name] == pytest.approx(want, rel=tol), name
    # E|N(0, 0.02)| = 1.6%: the held-out error is the noise, not the form.
    assert 0.012 < report.mape < 0.022 and report.warnings == [] and report.unmeasured == {}
    assert report.form == "piecewise" and "knees: 256 tokens" in report.summary()


def test_noise_free_fit_is_exact() -> None:
    report = fit_steps(synthetic_steps(noise=0.0), "piecewise")
    assert report.mape < 1e-6
    for name, want in TRUE.items():
        assert report.coefficients[name] == pytest.approx(want, rel=1e-6, abs=1e-15), name


def test_unmeasured_step_kinds_follow_the_stated_rules() -> None:
    steps = synthetic_steps(noise=0.0)
    no_mixed = steps[steps["phase"] != "mixed"]
    report = fit_steps(no_mixed, "piecewise")
    c = report.coefficients
    assert c["mixed_step_s"] == max(c["prefill_step_s"], c["decode_step_s"])
    assert c["prefill_step_s"] == pytest.approx(0.020, rel=1e-6)
    assert list(report.unmeasured) == ["mixed_step_s"] and "max(" in report.summary()
    no_single = steps[(steps["phase"] == "decode") & (steps["num_decode_seqs"] >= 2)
                      | (steps["phase"] == "prefill")]
    report = fit_steps(no_single, "piecewise")
    c = report.coefficients  # a one-token step gets the least measured fixed cost
    assert c["single_token_step_s"] == c["decode_step_s"] == pytest.approx(0.012, rel=1e-6)
    assert set(report.unmeasured) == {"single_token_step_s", "mixed_step_s"}
    forward_only = no_single.assign(num_admitted=0, num_finished=0)  # an engine profile
    report = fit_steps(forward_only, "piecewise")
    assert report.coefficients["admit_s"] == report.coefficients["finish_s"] == 0
    assert report.unmeasured["finish_s"] == "no step in the table finishes a request; set to 0"


def test_no_kind_is_fitted_cheaper_than_a_one_token_step() -> None:
    """Data that would like a prefill floor below batch-1 decode (a big per-admission cost
    instead) still get prefill_step_s >= single_token_step_s."""
    steps = synthetic_steps(noise=0.0)
    pre = steps["phase"] == "prefill"
    steps.loc[pre, "time_s"] -= 0.015 - 0.004 * steps.loc[pre, "num_admitted"]
    c = fit_steps(steps, "piecewise").coefficients
    assert min(c[k] for k in ("prefill_step_s", "decode_step_s", "mixed_step_s")) >= \
        c["single_token_step_s"]


def test_knees_come_from_the_grid_and_each_fold_chooses_its_own() -> None:
    steps = synthetic_steps(noise=0.01, seed=4)
    report = fit_steps(steps, "piecewise")
    assert report.coefficients["knee1_tokens"] in KNEE_GRID
    assert "each held-out fold chooses its own" in report.fit_dict()["knees"]


def test_linear_data_gives_a_piecewise_fit_as_good() -> None:
    from calibrate_support import synthetic_steps as linear_steps

    lin, pw = (fit_steps(linear_steps(), form) for form in ("linear", "piecewise"))
    assert pw.mape < lin.mape * 1.1 and pw.mape < 0.022


def test_profile_json_round_trip_and_build(tmp_path: Path) -> None:
    profile, report = fit_profile(
        synthetic_steps(), hardware="h100-sxm", model="llama-3.1-8b", weight_dtype="bf16",
        kv_dtype="bf16", tp=1, provenance={"source": "measured: synthetic"}, form="piecewise")
    path = tmp_path / "p.json"
    save_profile(profile, path)
    back = load_profile(path)
    assert back == profile and json.loads(path.read_text())["form"] == "piecewise"
    assert back.fit["unmeasured"] == {} and back.fit["mape"] == round(report.mape, 5)
    cost = back.build(get_model("llama-3.1-8b"), get_hardware("h100-sxm"))
    assert cost == PiecewiseCost(**report.coefficients)


def test_profile_coefficients_are_checked(tmp_path: Path) -> None:
    data = CostProfile(hardware="cpu", model="tiny", weight_dtype="fp32", kv_dtype="bf16", tp=1,
                       form="piecewise", coefficients=dict(TRUE)).to_dict()
    del data["coefficients"]["knee2_token_s"]
    data["coefficients"]["step_s"] = 0.01
    path = tmp_path / "p.json"
    path.write_text(json.dumps(data))
    with pytest.raises(ConfigError, match=r"p\.json: coefficients: piecewise form needs exactly "
                                          r".*missing: \['knee2_token_s'\], unknown: \['step_s'\]"):
        load_profile(path)


def test_old_linear_profiles_still_load() -> None:
    """A contract-3 linear profile written before the piecewise form (commit 422421f)."""
    old = {
        "version": 1, "hardware": "h100-sxm", "model": "llama-2-70b", "weight_dtype": "fp16",
        "kv_dtype": "fp16", "tp": 4, "form": "linear",
        "coefficients": {"step_s": 0.028177187498827007, "prefill_token_s": 5.95e-05,
                         "prefill_attn_s": 1.49e-08, "decode_seq_s": 0.00017,
                         "decode_context_s": 2.25e-07, "request_s": 0.00736},
        "fit": {"mape": 0.10682, "n_points": 36},
        "provenance": {"source": "measured: splitwise-sim"},
    }
    profile = CostProfile(**old)
    cost = profile.build(get_model("llama-2-70b"), get_hardware("h100-sxm"))
    assert isinstance(cost, LinearCost) and cost.step_s == 0.028177187498827007


def test_inline_piecewise_section() -> None:
    model, hw = get_model("llama-3.1-8b"), get_hardware("h100-sxm")
    cost, used = cost_model_from_config({"form": "piecewise", **TRUE}, model, hw, 1, "bf16",
                                        "bf16")
    assert cost == COST and used == "inline piecewise coefficients (cost section)"
    with pytest.raises(ConfigError, match=r"cost\.step_s does not apply to form = 'piecewise'"):
        cost_model_from_config({"form": "piecewise", "step_s": 0.01}, model, hw, 1, "bf16",
                               "bf16")
    with pytest.raises(ConfigError, match=r"cost\.knee1_tokens does not apply to form = "
                                          r"'linear'"):
        cost_model_from_config({"form": "linear", "knee1_tokens": 64}, model, hw, 1, "bf16",
                               "bf16")
