"""benchmarks/profile_fit_quality.py: the composed profiles grouped by folder, each with its
own recorded fit."""

from __future__ import annotations

import importlib
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
pfq = importlib.import_module("benchmarks.profile_fit_quality")


def test_a_composed_file_is_listed_with_its_own_fit_and_a_prior_is_not() -> None:
    rows = pfq.quality(None)
    generic = {name: (mape, decode) for name, mape, decode in rows["(generic)"]}
    composed = json.loads((ROOT / "simulator/profiles/h100-sxm__llama-3.1-8b__bf16__tp1.json")
                          .read_text())
    assert generic["h100-sxm__llama-3.1-8b__bf16__tp1.json"] == (
        composed["fit"]["mape"], composed["fit"]["by_phase"]["decode"]["mape"])
    assert "rtx4090__llama-3.1-8b__bf16__tp1.json" not in generic  # a roofline prior
    assert {"stacks/vllm", "stacks/sglang"} <= set(rows)
