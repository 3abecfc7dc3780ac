"""The SLO's mean queue-time target (added for capacity planning against queueing theory)."""

from __future__ import annotations

import numpy as np
import pytest

from simulator.errors import ConfigError
from simulator.metrics_slo import percentile_checks
from simulator.slo import SLO, parse_slo_string


def test_mean_queue_key_parses_and_round_trips() -> None:
    slo = parse_slo_string("mean_queue_ms=75,ttft_p99_ms=500")
    assert slo.mean_queue_ms == 75.0 and slo.ttft_ms == 500.0
    assert SLO.from_dict(slo.as_dict()) == slo
    assert "queue" not in slo.targets_ms  # a mean, not a percentile target


@pytest.mark.parametrize("text", ["mean_queue_ms=0", "mean_queue_ms=-1"])
def test_mean_queue_must_be_positive(text: str) -> None:
    with pytest.raises(ConfigError, match="mean_queue_ms"):
        parse_slo_string(text)


def test_mean_queue_is_judged_on_the_mean() -> None:
    samples = {"queue": (np.array([0.0, 0.0, 0.0, 100.0]), None)}
    checks = percentile_checks(samples, SLO(mean_queue_ms=30))  # type: ignore[arg-type]
    assert checks == {"mean_queue_ms": {"target": 30.0, "value": 25.0, "met": True}}
    assert not percentile_checks(samples, SLO(mean_queue_ms=20))["mean_queue_ms"]["met"]  # type: ignore[arg-type]
