"""benchmarks/mixed_step_fit.py: the mixed-step ratio counted by hand on three profile
files."""

from __future__ import annotations

import importlib
import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
msf = importlib.import_module("benchmarks.mixed_step_fit")


def _profile(path: Path, prefill: float, decode: float, mixed: float) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"coefficients": {
        "prefill_step_s": prefill, "decode_step_s": decode, "mixed_step_s": mixed}}))


def test_ratios_count_the_profiles_whose_mixed_cost_passes_the_threshold(tmp_path: Path) -> None:
    _profile(tmp_path / "a.json", 0.010, 0.020, 0.040)  # 0.040 / 0.020 = 2.0
    _profile(tmp_path / "stacks" / "b.json", 0.010, 0.009, 0.011)  # 1.1
    (tmp_path / "c.json").write_text(json.dumps({"coefficients": {"step_s": 1.0}}))  # linear
    seen, over = msf.ratios(1.3, tmp_path)
    assert seen == 2
    assert [name for _, name in over] == ["a.json"]
    assert over[0][0] == pytest.approx(2.0)

