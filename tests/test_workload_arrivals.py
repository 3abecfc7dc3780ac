"""Arrival processes: rates, burstiness, no cap on gaps, determinism."""

from __future__ import annotations

import re

import numpy as np
import pytest

from simulator.errors import ConfigError
from simulator.workload import constant_arrivals, gamma_arrivals, poisson_arrivals

N = 200_000


def gaps(times: np.ndarray) -> np.ndarray:
    return np.diff(np.concatenate([[0.0], times]))


def test_poisson_mean_gap_and_no_cap() -> None:
    g = gaps(poisson_arrivals(4.0, N, np.random.default_rng(1)))
    assert g.mean() == pytest.approx(0.25, rel=0.02)
    assert g.std() / g.mean() == pytest.approx(1.0, rel=0.03)
    # E[max of N exponentials] = H_N * mean ~ 12.8x; a 3x cap would fail this
    assert g.max() > 8 * 0.25
    assert g[0] > 0  # the first request arrives after the first gap, not at 0


@pytest.mark.parametrize("cv", [0.5, 2.0, 4.0])
def test_gamma_mean_and_cv(cv: float) -> None:
    g = gaps(gamma_arrivals(10.0, cv, N, np.random.default_rng(2)))
    assert g.mean() == pytest.approx(0.1, rel=0.02)
    assert g.std() / g.mean() == pytest.approx(cv, rel=0.03)


def test_gamma_cv_1_is_poisson_draw_for_draw() -> None:
    a = gamma_arrivals(3.0, 1.0, 1000, np.random.default_rng(5))
    b = poisson_arrivals(3.0, 1000, np.random.default_rng(5))
    np.testing.assert_array_equal(a, b)


def test_constant_starts_at_zero() -> None:
    t = constant_arrivals(4.0, 5)
    assert t.tolist() == [0.0, 0.25, 0.5, 0.75, 1.0]
    assert constant_arrivals(4.0, 0).size == 0


def test_same_seed_same_times_and_nondecreasing() -> None:
    a = poisson_arrivals(2.0, 100, np.random.default_rng(9))
    b = poisson_arrivals(2.0, 100, np.random.default_rng(9))
    np.testing.assert_array_equal(a, b)
    assert (np.diff(gamma_arrivals(2.0, 8.0, 1000, np.random.default_rng(3))) >= 0).all()


@pytest.mark.parametrize(
    "call, fragment",
    [
        (lambda r: poisson_arrivals(0.0, 5, r), "rate_per_s=0.0"),
        (lambda r: poisson_arrivals(float("nan"), 5, r), "rate_per_s=nan"),
        (lambda r: gamma_arrivals(1.0, -2.0, 5, r), "cv=-2.0"),
        (lambda r: poisson_arrivals(1.0, -1, r), "n=-1"),
    ],
)
def test_bad_arguments(call, fragment: str) -> None:
    with pytest.raises(ConfigError, match=re.escape(fragment)):
        call(np.random.default_rng(0))
