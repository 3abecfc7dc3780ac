"""SLO construction: validation, scenario tables and the command-line string."""

from __future__ import annotations

import pytest

from simulator.errors import ConfigError
from simulator.slo import SLO, parse_slo_string


def test_defaults_and_targets() -> None:
    slo = SLO(ttft_ms=500, e2el_ms=2000)
    assert slo.percentile == 99.0
    assert slo.targets_ms == {"ttft": 500.0, "e2el": 2000.0}
    assert isinstance(slo.ttft_ms, float)
    assert SLO().targets_ms == {}


def test_itl_is_not_a_per_request_target() -> None:
    slo = SLO(ttft_ms=1, tpot_ms=2, itl_ms=3, e2el_ms=4)
    assert slo.per_request_targets_ms == {"ttft": 1.0, "tpot": 2.0, "e2el": 4.0}


def test_frozen_with_slots() -> None:
    slo = SLO(ttft_ms=500)
    with pytest.raises(AttributeError):
        slo.ttft_ms = 1.0  # type: ignore[misc]
    assert not hasattr(slo, "__dict__")


@pytest.mark.parametrize(
    "kwargs, fragment",
    [
        ({"ttft_ms": 0}, "slo.ttft_ms = 0"),
        ({"tpot_ms": -5.0}, "slo.tpot_ms = -5.0"),
        ({"e2el_ms": float("nan")}, "slo.e2el_ms = nan"),
        ({"itl_ms": True}, "slo.itl_ms = true"),
        ({"percentile": 0}, "slo.percentile = 0"),
        ({"percentile": 101}, "slo.percentile = 101"),
    ],
)
def test_constructor_rejects_bad_values(kwargs: dict, fragment: str) -> None:
    with pytest.raises(ConfigError, match=fragment.replace(".", r"\.")):
        SLO(**kwargs)


def test_from_dict_plain_keys() -> None:
    slo = SLO.from_dict({"ttft_ms": 500, "tpot_ms": 50.5, "percentile": 95})
    assert slo == SLO(ttft_ms=500.0, tpot_ms=50.5, percentile=95.0)


def test_from_dict_percentile_in_key() -> None:
    slo = SLO.from_dict({"ttft_p90_ms": 400, "e2el_p90_ms": 9000})
    assert slo == SLO(ttft_ms=400.0, e2el_ms=9000.0, percentile=90.0)
    assert SLO.from_dict({"itl_p99.9_ms": 80}).percentile == 99.9


def test_from_dict_round_trips() -> None:
    slo = SLO(ttft_ms=500, itl_ms=40, percentile=90)
    assert SLO.from_dict(slo.as_dict()) == slo


@pytest.mark.parametrize(
    "d, fragment",
    [
        ({"ttft": 500}, "scenario.slo.ttft: unknown SLO key"),
        ({"ttft_ms": "500"}, "scenario.slo.ttft_ms = '500': must be a number"),
        ({"percentile": True}, "scenario.slo.percentile = true: must be a number"),
        ({"tpot_ms": 0}, "scenario.slo.tpot_ms = 0: must be > 0"),
        ({"ttft_p99_ms": 500, "tpot_p90_ms": 50}, "scenario.slo.tpot_p90_ms: percentile 90"),
        ({"percentile": 95, "ttft_p99_ms": 500}, "disagrees with scenario.slo.percentile"),
        ({"ttft_ms": 500, "ttft_p99_ms": 400}, "a second target for ttft"),
        ({"ttft_p0_ms": 500}, "scenario.slo.ttft_p0_ms = 0.0: must be in"),
    ],
)
def test_from_dict_errors_name_the_key(d: dict, fragment: str) -> None:
    with pytest.raises(ConfigError) as err:
        SLO.from_dict(d, where="scenario.slo")
    assert fragment in str(err.value)


def test_from_dict_default_where_is_slo() -> None:
    with pytest.raises(ConfigError, match=r"slo\.nonsense"):
        SLO.from_dict({"nonsense": 1})


def test_parse_slo_string() -> None:
    assert parse_slo_string("ttft_p99_ms=500,tpot_p99_ms=50") == SLO(
        ttft_ms=500.0, tpot_ms=50.0, percentile=99.0
    )
    assert parse_slo_string(" e2el_ms = 2000 , percentile=90 ") == SLO(
        e2el_ms=2000.0, percentile=90.0
    )


@pytest.mark.parametrize(
    "text, piece",
    [
        ("ttft_p99_ms", "'ttft_p99_ms'"),
        ("ttft_p99_ms=500,", "''"),
        ("ttft_p99_ms=fast", "'ttft_p99_ms=fast'"),
        ("=500", "'=500'"),
        ("ttft_ms=1,ttft_ms=2", "'ttft_ms=2'"),
        ("bogus_ms=3", "--slo.bogus_ms"),
        ("ttft_ms=-1", "--slo.ttft_ms = -1.0"),
    ],
)
def test_parse_slo_string_names_the_bad_piece(text: str, piece: str) -> None:
    with pytest.raises(ConfigError) as err:
        parse_slo_string(text)
    assert piece in str(err.value)


def test_parse_empty_string() -> None:
    with pytest.raises(ConfigError, match="empty"):
        parse_slo_string("  ")
