"""benchmarks/prefill_pass_fit.py: the weight passes recovered from one-client TTFT gaps.

Synthetic rows: every one-client 200-token row of an A100 setting reads 1.5 weight passes
fast; longer prompts and more clients read anything (not used); an H100 setting at 0.5
passes is held out of the median. The fit must give k = 1.5 back per A100 setting.
"""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
sys.path.insert(0, str(ROOT))
fit = importlib.import_module("prefill_pass_fit")
prefill_pass = importlib.import_module("simulator.costs.prefill_pass")
specs_models = importlib.import_module("simulator.specs.models")
specs_hw = importlib.import_module("simulator.specs.hardware")


def row(setting: str, lengths: str, clients: int, gap_s: float) -> dict:
    isl, osl = lengths.split("/")
    return {"id": f"nim1.0-dli-{setting}-{isl}-{osl}-c{clients}", "status": "ok",
            "metrics": {"mean_ttft_ms": {"published": 20.0 + gap_s * 1e3, "simulated": 20.0}}}


def one_pass(gpu: str, model: str, dtype: str, tp: int) -> float:
    return prefill_pass.weight_pass_s(specs_models.get_model(model), specs_hw.get_hardware(gpu),
                                      tp, dtype)


def test_k_is_the_gap_over_one_weight_pass() -> None:
    a8 = one_pass("a100-80gb", "llama-3-8b", "fp16", 1)
    a70 = one_pass("a100-80gb", "llama-3-70b", "fp16", 4)
    rows = [row("a100-80gb-llama-3-8b-fp16-tp1", "200/200", 1, 1.5 * a8),
            row("a100-80gb-llama-3-8b-fp16-tp1", "200/2000", 1, 1.5 * a8),
            row("a100-80gb-llama-3-8b-fp16-tp1", "200/1000", 1, 9.0),  # an outlier: median
            row("a100-80gb-llama-3-8b-fp16-tp1", "7000/1000", 1, 1.0),  # not a short prompt
            row("a100-80gb-llama-3-8b-fp16-tp1", "200/200", 5, 1.0),  # not one client
            row("a100-80gb-llama-3-70b-fp16-tp4", "200/200", 1, 1.5 * a70)]
    found = {s: k for s, _, _, k in fit.passes(fit.one_client_gaps(rows))}
    assert found == pytest.approx({"a100-80gb-llama-3-8b-fp16-tp1": 1.5,
                                   "a100-80gb-llama-3-70b-fp16-tp4": 1.5}, rel=1e-9)


def test_fp8_settings_take_their_own_weight_bytes() -> None:
    h8 = one_pass("h100-sxm", "llama-3-8b", "fp8", 2)
    rows = [row("h100-sxm-llama-3-8b-fp8-tp2", "200/200", 1, 0.5 * h8)]
    [(setting, gap, one, k)] = fit.passes(fit.one_client_gaps(rows))
    assert one == pytest.approx(h8, rel=1e-12) and k == pytest.approx(0.5, rel=1e-9)
