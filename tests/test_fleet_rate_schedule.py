"""workload.rate_schedule: piecewise-constant rates, by hand (constant) and by count (poisson)."""

from __future__ import annotations

import numpy as np
import pytest

from simulator.errors import ConfigError
from simulator.workload.build import build_requests
from simulator.workload.config import WorkloadConfig
from simulator.workload.rate_schedule import RateSchedule


def _schedule(starts: list[float], rates: list[float]) -> RateSchedule:
    return RateSchedule.from_table({"start_s": starts, "rate": rates}, "workload.rate_schedule")


def test_constant_arrivals_follow_the_pieces_by_hand() -> None:
    # 1 req/s over [0, 10): arrivals 0..9; nothing over [10, 20); 2 req/s from 20: the
    # 11th request (u = 10) at 20, then every 0.5 s.
    got = _schedule([0, 10, 20], [1, 0, 2]).arrivals("constant", 15, np.random.default_rng(0))
    assert got.tolist() == [*range(10), 20.0, 20.5, 21.0, 21.5, 22.0]


def test_poisson_counts_per_piece_match_the_rates() -> None:
    # 5 req/s for 100 s, then 20 req/s: about 500 requests in the first piece (sd 22) and
    # 20 per second after it.
    got = _schedule([0, 100], [5, 20]).arrivals("poisson", 5000, np.random.default_rng(1))
    first = int(np.sum(got < 100))
    assert abs(first - 500) < 4 * np.sqrt(500)
    later = got[got >= 100]
    rate = (len(later) - 1) / (later[-1] - later[0])
    assert rate == pytest.approx(20, rel=0.05)
    assert np.all(np.diff(got) >= 0)


def test_the_workload_draws_the_schedule_from_its_seed() -> None:
    cfg = WorkloadConfig.from_dict({"arrival": "poisson", "num_requests": 50,
                                    "rate_schedule": {"start_s": [0, 5], "rate": [2, 8]}})
    assert cfg.rate is None
    a = build_requests(cfg, np.random.default_rng(4), None).table["arrival_s"]
    b = build_requests(cfg, np.random.default_rng(4), None).table["arrival_s"]
    assert a.equals(b)


@pytest.mark.parametrize(("table", "message"), [
    ({"start_s": [1, 5], "rate": [2, 8]}, "must start at 0 and increase"),
    ({"start_s": [0, 5], "rate": [2]}, "give one rate per start"),
    ({"start_s": [0, 5], "rate": [2, 0]}, "the last rate must be > 0"),
    ({"start_s": [0], "rate": [-1]}, r"rate = \[-1\]: must be a non-empty list"),
    ({"start": [0], "rate": [1]}, "must be a table"),
])
def test_a_bad_schedule_names_the_field(table: dict, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        WorkloadConfig.from_dict({"arrival": "poisson", "rate_schedule": table})


def test_a_schedule_replaces_rate_and_needs_poisson_or_constant() -> None:
    table = {"start_s": [0], "rate": [1]}
    with pytest.raises(ConfigError, match="rate_schedule: only with arrival"):
        WorkloadConfig.from_dict({"arrival": "poisson", "rate": 3.0, "rate_schedule": table})
    with pytest.raises(ConfigError, match="rate_schedule: only with arrival"):
        WorkloadConfig.from_dict({"arrival": "gamma", "cv": 2.0, "rate_schedule": table})
