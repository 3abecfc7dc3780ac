"""benchmarks/published_misses.py: the headline's misses by kind of run, counted by hand."""

from __future__ import annotations

import dataclasses
import importlib
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
pc = importlib.import_module("benchmarks.published_cases")
pm = importlib.import_module("benchmarks.published_misses")

BASE = pc.load_cases()[0]


def case(cid: str, *, arrival: str = "poisson", clients: int = 0, gpu: str = "h100-sxm",
         tp: int = 1, harness: str = "", metrics: dict[str, float] | None = None) -> object:
    """A case of each kind, from any shipped one (only what the classes read is set)."""
    wl = {"arrival": arrival, **({"concurrency": clients} if clients else {})}
    return dataclasses.replace(BASE, id=cid, workload=wl, gpu=gpu, tp=tp, harness=harness,
                               metrics=metrics or {"mean_ttft_ms": 100.0})


CASES = {c.id: c for c in (
    case("runner", harness="accelmark", clients=1, arrival="closed"),
    case("pcie", gpu="rtx4090", tp=2),
    case("many", arrival="closed", clients=100),
    case("few", arrival="closed", clients=5),
    case("burst", arrival="burst", metrics={"mean_ttft_ms": 300.0, "median_ttft_ms": 100.0}),
    case("rate"),
    case("in-sample"),
)}


def ttft(error: float | None) -> dict[str, dict[str, float | None]]:
    return {"mean_ttft_ms": {"error": error}}


ROWS = [
    {"id": "runner", "metrics": ttft(0.30)},
    {"id": "pcie", "metrics": ttft(-0.90)},
    {"id": "many", "metrics": ttft(0.10)},
    {"id": "few", "metrics": ttft(None)},  # no result: a miss
    {"id": "burst", "metrics": {**ttft(-0.20), "mean_tpot_ms": {"error": 0.01},
                                "median_ttft_ms": {"error": 0.05}}},
    {"id": "rate", "metrics": ttft(0.05)},
    {"id": "in-sample", "fitted": "a preset", "metrics": ttft(5.0)},
    {"id": "not-a-case", "metrics": ttft(0.0)},
]


def test_each_kind_of_run_falls_in_its_class() -> None:
    assert [pm.run_class(CASES[i]) for i in ("runner", "pcie", "many", "few", "burst", "rate")] \
        == [name for name, _ in pm.CLASSES]
    # the first rule met wins: a runner in the engine's process on a closed loop of 100
    assert pm.run_class(case("x", harness="accelmark", arrival="closed", clients=100)) \
        == pm.CLASSES[0][0]


def test_counts_by_hand() -> None:
    items = pm.scored(ROWS, CASES)
    ttfts = [s for s in items if s.figure.startswith("TTFT")]
    assert len(ttfts) == 6  # the in-sample row and the row of no known case are left out
    # within: many (+10%) and rate (+5%); misses: runner, pcie, few (no result), burst
    assert pm.summary(ttfts) == (6, 4, pytest.approx(2 / 6), pytest.approx(0.05))
    # signed median of the five results: -0.90, -0.20, 0.05, 0.10, 0.30 -> 0.05
    tpot = [s for s in items if s.figure.startswith("TPOT")]
    assert [(s.case_id, s.error) for s in tpot] == [("burst", 0.01)]  # the mean, else form
    assert [s.case_id for s in items if s.tail] == ["burst"]  # published mean 3x median


def test_the_table_says_the_figure_without_each_class() -> None:
    lines = pm.report(pm.scored(ROWS, CASES))
    assert lines[0] == "TTFT (mean, else median): 6 cases, 4 misses, 33.3% within 15%"
    many = next(line for line in lines if "closed loop, 25+" in line)
    # one case, within; without it 1 of the other 5 is within: 20.0%
    assert many.split()[-5:] == ["1", "0", "100%", "+10.0%", "20.0%"]
    few = next(line for line in lines if "fewer clients" in line)
    assert few.split()[-5:] == ["1", "1", "0%", "n/a", "40.0%"]
    assert "  of which a mean TTFT 2x its median or more: 1 cases, 1 misses" in lines
    # the burst's mean misses (-20%), its published median reads +5%: one of one
    assert "  of its misses, 1 published a median too; the replay read it within 15% in 1" \
        in lines
    assert lines[lines.index("TPOT (median, else mean): 1 cases, 0 misses, 100.0% within 15%")
                 - 1].startswith("  of its misses")  # printed under the TTFT table


def test_the_misses_by_group_count_near_and_sides_by_hand() -> None:
    # two rate cases on the A100 and one on the H100: -20% (near, below), +40% (above, far),
    # no result (a miss on neither side); the H100's +10% is within, so its group is not
    # listed
    cases = {c.id: c for c in (case("a", gpu="a100-80gb"), case("b", gpu="a100-80gb"),
                               case("c", gpu="a100-80gb"), case("d"))}
    rows = [{"id": "a", "metrics": ttft(-0.20)}, {"id": "b", "metrics": ttft(0.40)},
            {"id": "c", "metrics": ttft(None)}, {"id": "d", "metrics": ttft(0.10)}]
    lines = pm.by_group(pm.scored(rows, cases))
    assert lines[1] == "  arrivals at a rate"
    group = cases["a"].group
    assert group.endswith("/a100-80gb") and cases["d"].group not in "\n".join(lines)
    assert lines[2].split() == [group, "3", "of", "3", "near", "1", "below", "1", "above", "1"]
    assert len(lines) == 3
