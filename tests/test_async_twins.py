"""benchmarks/async_twins.py: the pairs it finds and the gains it prints, by hand."""

from __future__ import annotations

import pytest

from benchmarks.async_twins import gain, report, twins


def _row(cid: str, tpot: tuple[float, float], tput: tuple[float, float]) -> dict:
    return {"id": cid, "status": "ok", "metrics": {
        "median_tpot_ms": {"published": tpot[0], "simulated": tpot[1]},
        "output_throughput": {"published": tput[0], "simulated": tput[1]}}}


def test_a_lower_tpot_and_a_higher_throughput_are_both_gains() -> None:
    assert gain(50.0, 40.0, -1.0) == pytest.approx(0.2)  # TPOT 50 -> 40 ms: 20% better
    assert gain(1000.0, 1100.0, 1.0) == pytest.approx(0.1)


def test_only_cases_with_an_async_twin_are_paired_and_reported() -> None:
    rows = [_row("a", (50.0, 45.0), (1000.0, 1000.0)),
            _row("a-async", (40.0, 45.0), (1100.0, 1000.0)),
            _row("b", (10.0, 10.0), (10.0, 10.0))]
    assert twins(rows) == [("a", "a-async")]
    text = report([rows], ["F"])
    assert "published      50.0 ->      40.0 (+20.0%)" in text  # the twin ran 20% faster
    assert "F      45.0 ->      45.0 (+0.0%)" in text  # a replay that reads no gain
    assert "(+10.0%)" in text and "b\n" not in text
