"""Length distributions and their parsing from scenario tables."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from simulator.errors import ConfigError
from simulator.workload import Empirical, Fixed, LogNormal, Uniform, length_dist_from_dict

FIX = Path(__file__).parent / "fixtures" / "workload"


def rng() -> np.random.Generator:
    return np.random.default_rng(11)


def test_fixed_and_uniform() -> None:
    assert Fixed(128).sample(3, rng()).tolist() == [128, 128, 128]
    u = Uniform(3, 5).sample(10_000, rng())
    assert u.dtype == np.int64 and set(u.tolist()) == {3, 4, 5}  # both ends included


def test_lognormal_mean_and_mu() -> None:
    d = LogNormal(800.0, 1.0)
    assert d.mu == pytest.approx(np.log(800) - 0.5)
    x = d.sample(200_000, rng())
    assert x.dtype == np.int64 and x.min() >= 1
    assert x.mean() == pytest.approx(800, rel=0.02)
    assert np.log(x).std() == pytest.approx(1.0, rel=0.02)


def test_lognormal_clips_only_at_one() -> None:
    x = LogNormal(2.0, 2.0).sample(100_000, rng())
    assert x.min() == 1 and (x == 1).sum() > 0
    assert x.max() > 100  # no upper cap
    assert LogNormal(50.0, 0.0).sample(4, rng()).tolist() == [50] * 4


def test_empirical_resamples_values() -> None:
    d = Empirical(np.array([5, 7, 7]), source="mem")
    x = d.sample(30_000, rng())
    assert set(x.tolist()) == {5, 7}
    assert (x == 7).mean() == pytest.approx(2 / 3, abs=0.02)
    with pytest.raises(ConfigError, match=r"value \[1\] = 0.0"):
        Empirical(np.array([5, 0]))


def test_from_dict_each_kind() -> None:
    assert length_dist_from_dict({"dist": "fixed", "tokens": 128}, "w.p") == Fixed(128)
    assert length_dist_from_dict({"dist": "uniform", "low": 2, "high": 9}, "w.p") == Uniform(2, 9)
    got = length_dist_from_dict({"dist": "lognormal", "mean": 800, "sigma": 1.0}, "w.p")
    assert got == LogNormal(800.0, 1.0)
    emp = length_dist_from_dict(
        {"dist": "trace", "path": "lengths.csv", "column": "output"}, "w.p", base_dir=FIX
    )
    assert isinstance(emp, Empirical) and sorted(emp.values.tolist()) == [711, 905, 918]


@pytest.mark.parametrize(
    "d, message",
    [
        (
            {"dist": "lognormal", "mean": 800, "sigma": -1},
            "workload.prompt.sigma = -1: must be >= 0",
        ),
        ({"dist": "lognormal", "mean": 0, "sigma": 1}, "workload.prompt.mean = 0: must be > 0"),
        ({"dist": "lognormal", "mean": 800}, "workload.prompt.sigma is required"),
        ({"dist": "lognormal", "mean": "big", "sigma": 1}, "workload.prompt.mean = 'big': must be"),
        ({"dist": "fixed", "tokens": 12.5}, "workload.prompt.tokens = 12.5: must be a whole"),
        ({"dist": "fixed", "tokens": 8, "sigma": 1}, "workload.prompt.sigma: unknown key"),
        ({"dist": "uniform", "low": 10, "high": 5}, "workload.prompt.high = 5: must be >= 10"),
        ({"dist": "zipf"}, "workload.prompt.dist = 'zipf': must be one of"),
        (
            {"dist": "trace", "path": "lengths.csv", "column": "both"},
            "workload.prompt.column = 'both'",
        ),
        (
            {"dist": "trace", "path": "absent.csv", "column": "prompt"},
            "workload.prompt.path = 'absent.csv'",
        ),
        ("lognormal", "workload.prompt = 'lognormal': must be a table"),
    ],
)
def test_from_dict_errors_name_field_and_value(d: object, message: str) -> None:
    with pytest.raises(ConfigError) as info:
        length_dist_from_dict(d, "workload.prompt", base_dir=FIX)  # type: ignore[arg-type]
    assert message in str(info.value)


def test_direct_construction_is_validated() -> None:
    with pytest.raises(ConfigError, match="Fixed.tokens = 0"):
        Fixed(0)
    with pytest.raises(ConfigError, match="LogNormal.sigma = -0.5"):
        LogNormal(10.0, -0.5)
