"""benchmarks/closed_loop_bracket.py: where a published TTFT sits between the lockstep and
random-phase replays, checked by hand on made-up numbers."""

from __future__ import annotations

import importlib
import math
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
bracket = importlib.import_module("benchmarks.closed_loop_bracket")


def test_position_runs_from_lockstep_to_random_phases() -> None:
    # lockstep replay 300 ms, random phases 100 ms: published 300 -> 0, 100 -> 1, 200 -> 0.5
    assert bracket.position(300.0, 300.0, 100.0) == 0.0
    assert bracket.position(100.0, 300.0, 100.0) == 1.0
    assert bracket.position(200.0, 300.0, 100.0) == 0.5
    assert bracket.position(400.0, 300.0, 100.0) == -0.5  # past the lockstep end
    assert math.isnan(bracket.position(120.0, 100.0, 100.0))  # no bracket


def test_inside_widens_each_end_by_15_percent() -> None:
    assert bracket.inside(200.0, 300.0, 100.0)
    assert bracket.inside(85.0, 300.0, 100.0) and not bracket.inside(84.9, 300.0, 100.0)
    assert bracket.inside(345.0, 300.0, 100.0) and not bracket.inside(345.1, 300.0, 100.0)


def test_table_by_group_and_band() -> None:
    def row(group: str, clients: int, pos: float, ins: bool) -> dict[str, object]:
        return {"group": group, "clients": clients, "position": pos, "inside": ins}
    rows = [row("a", 2, 0.0, True), row("a", 25, 0.2, True), row("a", 50, 0.6, False),
            row("b", 100, math.nan, False)]
    t = {(r["group"], r["clients"]): r for r in bracket.table(rows)}
    assert t[("a", "10-50")]["n"] == 2 and t[("a", "10-50")]["inside"] == 0.5
    assert t[("a", "10-50")]["position"] == pytest.approx(0.4)
    assert math.isnan(t[("b", "100-250")]["position"])
    assert t[("all", "")]["n"] == 4 and t[("all", "")]["position"] == pytest.approx(0.2)
    assert list(t)[-1] == ("all", "")


def test_only_closed_loops_with_a_ttft_are_bracketed() -> None:
    pc = importlib.import_module("benchmarks.published_cases")
    cases = {c.id: c for c in pc.load_cases()}
    closed = cases["nim1.8.0-h100-sxm-llama-3.3-70b-fp8-tp2-5000-500-c5"]
    assert bracket.ttft_key(closed) == "mean_ttft_ms"
    burst = cases["vllm0.8dev-pr14431-h100-sxm-llama-3.1-8b-tp1-sharegpt1000"]
    assert bracket.ttft_key(burst) is None


def test_table_by_prompt_splits_each_group_by_its_prompt_length() -> None:
    rows = [{"group": "a", "clients": 25, "prompt": 200, "position": 0.6, "inside": True},
            {"group": "a", "clients": 25, "prompt": 2000, "position": 0.0, "inside": True},
            {"group": "a", "clients": 25, "prompt": 0, "position": 0.2, "inside": False}]
    t = {(r["group"], r["clients"]): r for r in bracket.table(rows, by_prompt=True)}
    assert t[("a/200", "10-50")]["position"] == pytest.approx(0.6)
    assert t[("a/2000", "10-50")]["position"] == 0.0
    assert t[("a/-", "10-50")]["n"] == 1  # prompts that vary: no fixed length
    assert t[("all", "")]["n"] == 3 and t[("all", "")]["position"] == pytest.approx(0.2)


def test_a_case_with_its_own_ramp_is_replayed_both_ways(tmp_path: Path) -> None:
    # the course's cases spread their first round (client_start = "ramp"); the bracket's
    # lockstep and random-phase replays drop that ramp rather than fail on it
    pc = importlib.import_module("benchmarks.published_cases")
    f = tmp_path / "cases.toml"
    f.write_text('[[case]]\nid = "r"\nsource = "s"\nstack = "trtllm"\nstack_version = "1.0"\n'
                 'gpu = "h100-sxm"\nmodel = "llama-3.1-8b"\nweight_dtype = "bf16"\ntp = 1\n'
                 'workload = { prompt_tokens = 10, output_tokens = 10, num_prompts = 6, '
                 'arrival = "closed", concurrency = 2, client_start = "ramp", '
                 'client_ramp_s = 0.003 }\nmetrics = { mean_ttft_ms = 5.0 }\n')
    (case,) = pc.load_cases(f)
    row = bracket.bracket_row(case, math.inf)
    assert row is not None and row["published"] == 5.0
    assert row["clients"] == 2 and row["prompt"] == 10
