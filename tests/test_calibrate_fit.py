"""calibrate/fit.py: NNLS on relative error recovers known coefficients; held-out report.

The piecewise form's own fit tests are in tests/test_cost_form_piecewise.py."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from calibrate_support import TRUE, synthetic_steps
from hypothesis import given, settings
from hypothesis import strategies as st

from calibrate.fit import fit_profile, fit_steps, nnls_relative, shape_folds
from simulator.costs import LinearCost
from simulator.errors import ConfigError
from simulator.profile_table import ProfileTable, validate_profile_table


def test_recovers_known_coefficients_with_2pct_noise() -> None:
    report = fit_steps(synthetic_steps(noise=0.02), "linear")
    for name, want in TRUE.items():
        tol = 0.25 if name == "request_s" else 0.05  # request_s is a small share of any step
        assert report.coefficients[name] == pytest.approx(want, rel=tol), name
    # E|N(0, 0.02)| = 0.02 * sqrt(2/pi) = 1.6%: held-out error is the noise, not the model.
    assert 0.012 < report.mape < 0.022
    assert report.r2 > 0.99 and report.warnings == []
    assert set(report.by_phase) == {"prefill", "decode", "mixed"}


def test_noise_free_fit_is_exact_and_predicts_like_linear_cost() -> None:
    steps = synthetic_steps(noise=0.0)
    report = fit_steps(steps, "linear")
    assert report.mape < 1e-6
    cost = LinearCost(**report.coefficients)
    predicted = cost.step_times(ProfileTable(steps=validate_profile_table(steps)).shapes())
    np.testing.assert_allclose(predicted, steps["time_s"], rtol=1e-6)


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 10_000), sign=st.sampled_from([-1.0, 1.0]))
def test_nnls_never_returns_negative_coefficients(seed: int, sign: float) -> None:
    rng = np.random.default_rng(seed)
    x = np.column_stack([np.ones(30), rng.uniform(0, 1e4, (30, 3)), rng.uniform(0, 1e7, 30)])
    t = np.abs(1e-3 + sign * 1e-6 * x[:, 1] + rng.uniform(1e-4, 1e-2, 30))  # slope may be < 0
    b = nnls_relative(x, t)
    assert (b >= 0).all()


def test_folds_keep_repeats_of_one_shape_together() -> None:
    steps = synthetic_steps(n=40)
    doubled = pd.concat([steps, steps], ignore_index=True)
    folds = shape_folds(doubled, 5)
    assert (folds[:40] == folds[40:]).all() and set(folds) == set(range(5))


def test_too_few_shapes_is_refused() -> None:
    with pytest.raises(ConfigError, match=r"4 distinct step shapes; need at least 10"):
        fit_steps(synthetic_steps(n=4), "linear")


def test_fit_profile_wraps_a_linear_cost_profile() -> None:
    profile, report = fit_profile(
        synthetic_steps(), hardware="cpu", model="tiny", weight_dtype="fp32",
        kv_dtype="bf16", tp=1, provenance={"source": "synthetic"})
    assert profile.form == "linear" and profile.coefficients == report.coefficients
    assert profile.fit["mape"] == round(report.mape, 5) and profile.fit["n_points"] == 300
    assert profile.fit["ranges"]["num_decode_seqs"][1] <= 255
    assert "knees" not in profile.fit  # linear profiles keep their old fit object


def test_fit_profile_piecewise_and_unknown_form() -> None:
    profile, report = fit_profile(
        synthetic_steps(), hardware="cpu", model="tiny", weight_dtype="fp32",
        kv_dtype="bf16", tp=1, provenance={"source": "synthetic"}, form="piecewise")
    assert profile.form == "piecewise" and profile.coefficients == report.coefficients
    assert set(profile.fit) >= {"mape", "knees", "unmeasured", "by_phase"}
    with pytest.raises(ConfigError, match=r"form='cubic': the fit knows \('linear', 'piecewise'\)"):
        fit_steps(synthetic_steps(), "cubic")


def test_a_missed_region_is_reported() -> None:
    steps = synthetic_steps(noise=0.0)
    small = (steps["phase"] == "decode") & (steps["num_decode_seqs"] < 64)
    steps.loc[small, "time_s"] += 0.01  # a decode floor the linear form cannot follow
    report = fit_steps(steps, "linear")
    assert any("linear form misses decode steps" in w and "--form piecewise" in w
               for w in report.warnings)
