"""benchmarks/published_splits.py: error splits and published ratios, checked by hand."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
pc = importlib.import_module("benchmarks.published_cases")
ps = importlib.import_module("benchmarks.published_splits")

CASES = {c.id: c for c in pc.load_cases()}
L2_012 = "trtllm0.12-h100-sxm-llama-2-7b-fp8-tp1-128-128"  # published 19,068.99
L2_013 = "trtllm0.13-h100-sxm-llama-2-7b-fp8-tp1-128-128"  # published 19,298.99
L3_013 = "trtllm0.13-h200-llama-3-70b-fp8-tp4-128-2048"  # published 12,876.38
L31_013 = "trtllm0.13-h200-llama-3.1-70b-fp8-tp4-128-2048"  # published 12,890.95
MIX_013 = "trtllm0.13-h200-mixtral-8x7b-fp8-tp4-128-2048"


@pytest.mark.parametrize("isl, osl, shape", [
    (128, 2048, "decode-heavy"), (500, 2000, "decode-heavy"),  # 2000 >= 4 x 500
    (2048, 128, "prefill-heavy"), (1000, 1000, "balanced"), (2048, 2048, "balanced"),
])
def test_shape_by_the_4x_rule(isl: int, osl: int, shape: str) -> None:
    assert ps.shape(isl, osl) == shape


def test_size_classes() -> None:
    assert ps.size("llama-3-70b") == "large"  # 70.6B parameters
    assert ps.size("llama-3-8b") == "small"
    assert ps.size("mixtral-8x7b") == "moe"
    assert ps.size("gpt-j-6b") == "small"  # 6.05B, in the catalogue since stop 39
    assert ps.size("falcon-180b") == "large"
    assert ps.size("qwen3-235b-a22b") == "moe"
    assert ps.size("deepseek-r1") == "moe"  # in the catalogue since stop 61
    assert ps.size("grok-1") == "?"  # outside the catalogue


def test_error_splits_by_hand() -> None:
    rows = [{"id": L2_013, "metrics": {"output_throughput": {"error": 0.10}}},
            {"id": L3_013, "metrics": {"output_throughput": {"error": 0.30}}},
            {"id": L31_013, "metrics": {"output_throughput": {"error": -0.05}}},
            {"id": MIX_013, "metrics": {"output_throughput": {"error": 0.20}}},
            {"id": L2_012, "fitted": "x", "metrics": {"output_throughput": {"error": 9.0}}}]
    out = ps.error_splits(rows, CASES, ["size"], {"version": {"0.13"}})
    # large: 0.30 and -0.05 -> median +12.5%, one of two within 15%
    assert out["large"] == (2, pytest.approx(0.125), 0.5)
    assert out["small"] == (1, pytest.approx(0.10), 1.0)
    assert out["moe"] == (1, pytest.approx(0.20), 0.0)
    # the in-sample row is left out even when its version is kept
    assert ps.error_splits(rows, CASES, [], {})["all"][0] == 4
    # another metric: only the rows that have it
    rows[0]["metrics"]["p99_ttft_ms"] = {"error": -0.2}
    rows[1]["metrics"]["p99_ttft_ms"] = {"error": 0.1}
    assert ps.error_splits(rows, CASES, [], {}, "p99_ttft_ms")["all"] == (
        2, pytest.approx(-0.05), 0.5)


def test_release_and_twin_ratios_by_hand() -> None:
    chosen = [CASES[i] for i in (L2_012, L2_013, L3_013, L31_013)]
    releases = ps.ratio_splits(chosen, [("0.12", "0.13")], ["model"], twins=False, only={})
    assert releases == {"0.13/0.12 llama-2-7b": (1, pytest.approx(19298.99 / 19068.99))}
    twins = ps.ratio_splits(chosen, [("llama-3-70b", "llama-3.1-70b")], ["tp"], twins=True,
                            only={"version": {"0.13"}})
    assert twins == {"llama-3.1-70b/llama-3-70b tp4": (1, pytest.approx(12890.95 / 12876.38))}
    # a filter that drops the first case of the pair leaves nothing
    assert ps.ratio_splits(chosen, [("llama-3-70b", "llama-3.1-70b")], [], twins=True,
                           only={"gpu": {"a100-80gb"}}) == {}
