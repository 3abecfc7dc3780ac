"""benchmarks/published_compare.py: before/after figures of two published.py runs."""

from __future__ import annotations

import importlib
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
cmp = importlib.import_module("benchmarks.published_compare")


def _run(path: Path, rows: list[tuple[str, str, float, float, str]]) -> Path:
    path.write_text(json.dumps({"rows": [
        {"id": i, "group": g, "fitted": f,
         "metrics": {"output_throughput": {"simulated": s, "error": e}}}
        for i, g, s, e, f in rows]}))
    return path


def test_changed_rows_and_shares_by_hand(tmp_path: Path) -> None:
    before = _run(tmp_path / "b.json", [("a", "g1", 100.0, 0.10, ""), ("b", "g1", 50.0, 0.40, ""),
                                        ("c", "g2", 10.0, -0.20, ""), ("d", "g2", 1.0, 0.0, "x")])
    after = _run(tmp_path / "a.json", [("a", "g1", 100.0, 0.10, ""), ("b", "g1", 40.0, 0.12, ""),
                                       ("c", "g2", 11.0, -0.12, ""), ("d", "g2", 2.0, 0.5, "x")])
    lines = cmp.compare(cmp.errors(before, "output_throughput"),
                        cmp.errors(after, "output_throughput"))
    rows = {line.split()[0]: line for line in lines[1:]}
    # d is in sample: left out. g1: a within both times, b 40% -> 12%: 50% -> 100%;
    # medians |0.10, 0.40| = 25% -> |0.10, 0.12| = 11%; one changed row, 0% -> 100%
    assert rows["g1"].split() == ["g1", "2", "50.0%", "25.0%", "->", "100.0%", "11.0%",
                                  "changed:", "1", "0.0%", "->", "100.0%"]
    # all: a, b, c; within 1/3 -> 3/3; changed b and c: 0/2 -> 2/2
    assert rows["all"].split()[1:4] == ["3", "33.3%", "20.0%"]
    assert rows["all"].endswith("changed:     2    0.0%  ->   100.0%")


def test_in_sample_counts_the_fitted_cases_too(tmp_path: Path) -> None:
    # d was fitted (in the second run only, as when a change fits on it): left out unless
    # --in-sample, then its 0.0 -> 0.5 crossing is counted
    before = _run(tmp_path / "b.json", [("a", "g1", 100.0, 0.10, ""), ("d", "g1", 1.0, 0.0, "")])
    after = _run(tmp_path / "a.json", [("a", "g1", 100.0, 0.10, ""), ("d", "g1", 2.0, 0.5, "x")])
    held = cmp.compare(cmp.errors(before, "output_throughput"),
                       cmp.errors(after, "output_throughput"))
    assert {line.split()[0]: line for line in held[1:]}["all"].split()[1] == "1"
    both_b = cmp.errors(before, "output_throughput", in_sample=True)
    both_a = cmp.errors(after, "output_throughput", in_sample=True)
    rows = {line.split()[0]: line for line in cmp.compare(both_b, both_a)[1:]}
    assert rows["all"].split()[1:3] == ["2", "100.0%"]  # a and d within before
    assert rows["all"].split()[5] == "50.0%"  # d at +50% after: out
    assert any("d" in line and "+0.0% -> +50.0%" in line
               for line in cmp.crossings(both_b, both_a))


def test_cases_only_the_second_run_simulated(tmp_path: Path) -> None:
    before = _run(tmp_path / "b.json", [("a", "g1", 100.0, 0.10, "")])
    after = _run(tmp_path / "a.json", [("a", "g1", 100.0, 0.10, ""), ("n1", "g2", 5.0, -0.30, ""),
                                       ("n2", "g2", 5.0, 0.05, ""), ("n3", "g3", 5.0, 0.10, ""),
                                       ("n4", "g3", 5.0, 0.9, "in sample")])
    b, a = cmp.errors(before, "output_throughput"), cmp.errors(after, "output_throughput")
    assert cmp.newly_simulated(b, b) == []
    rows = {line.split()[0]: line.split() for line in cmp.newly_simulated(b, a)[1:]}
    # g2: -30% and +5%: one within, median |e| 17.5%, signed median -12.5%; n4 is in sample
    assert rows["g2"] == ["g2", "2", "50.0%", "17.5%", "-12.5%"]
    # all: -30%, +5%, +10%: two within, median |e| 10%, signed median +5%
    assert rows["all"] == ["all", "3", "66.7%", "10.0%", "+5.0%"]
    # by model: these rows record none, so all three are "?"
    by_model = {line.split()[0]: line.split() for line in cmp.newly_simulated(b, a, "model")[1:]}
    assert by_model["?"] == ["?", "3", "66.7%", "10.0%", "+5.0%"]


def test_newly_simulated_by_model(tmp_path: Path) -> None:
    rows = [{"id": i, "group": "g", "model": m, "fitted": "",
             "metrics": {"output_throughput": {"simulated": 1.0, "error": e}}}
            for i, m, e in (("a", "m1", 0.1), ("b", "m2", -0.3), ("c", "m2", 0.1))]
    after = tmp_path / "a.json"
    after.write_text(json.dumps({"rows": rows}))
    lines = cmp.newly_simulated({}, cmp.errors(after, "output_throughput"), "model")
    got = {line.split()[0]: line.split() for line in lines[1:]}
    # m2: -30% and +10%: one within 15%, median |e| 20%, signed median -10%
    assert got["m2"] == ["m2", "2", "50.0%", "20.0%", "-10.0%"]
    assert got["m1"][1:3] == ["1", "100.0%"]


def test_newly_simulated_by_model_and_group(tmp_path: Path) -> None:
    rows = [{"id": i, "group": g, "model": "m", "fitted": "",
             "metrics": {"output_throughput": {"simulated": 1.0, "error": e}}}
            for i, g, e in (("a", "g1", 0.1), ("b", "g2", -0.3))]
    after = tmp_path / "a.json"
    after.write_text(json.dumps({"rows": rows}))
    lines = cmp.newly_simulated({}, cmp.errors(after, "output_throughput"), "both")
    got = [line.split() for line in lines[1:]]
    assert got[0] == ["m", "g1", "1", "100.0%", "10.0%", "+10.0%"]
    assert got[1] == ["m", "g2", "1", "0.0%", "30.0%", "-30.0%"]


def test_a_metric_no_case_gives_is_said_not_divided_by_zero(tmp_path: Path) -> None:
    run = _run(tmp_path / "r.json", [("a", "g1", 100.0, 0.10, "")])
    lines = cmp.compare(cmp.errors(run, "mean_ttft_ms"), cmp.errors(run, "mean_ttft_ms"))
    assert lines[1:] == ["(no case in both runs gives this metric)"]


def test_the_cases_that_crossed_the_line_by_hand(tmp_path: Path) -> None:
    # b: 40% -> 12% and c: -20% -> -12% came within 15%; e: 5% -> 30% left it; a stays
    # within, f stays out, d is in sample
    before = _run(tmp_path / "b.json", [("a", "g1", 1.0, 0.10, ""), ("b", "g1", 1.0, 0.40, ""),
                                        ("c", "g2", 1.0, -0.20, ""), ("d", "g2", 1.0, 0.0, "x"),
                                        ("e", "g2", 1.0, 0.05, ""), ("f", "g2", 1.0, 0.50, "")])
    after = _run(tmp_path / "a.json", [("a", "g1", 1.0, 0.11, ""), ("b", "g1", 2.0, 0.12, ""),
                                       ("c", "g2", 2.0, -0.12, ""), ("d", "g2", 2.0, 0.5, "x"),
                                       ("e", "g2", 2.0, 0.30, ""), ("f", "g2", 2.0, 0.60, "")])
    lines = cmp.crossings(cmp.errors(before, "output_throughput"),
                          cmp.errors(after, "output_throughput"))
    assert lines == ["came within 15%: 2", "  b  +40.0% -> +12.0%", "  c  -20.0% -> -12.0%",
                     "left it: 1", "  e  +5.0% -> +30.0%"]
