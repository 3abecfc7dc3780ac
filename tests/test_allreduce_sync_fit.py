"""benchmarks/allreduce_sync_fit.py: the handshake recovered from one-client ITL gaps.

Synthetic rows: Llama-3-8B (32 layers) on one A100 reads 0.32 ms fast a step (10 us a
layer, what the kernels miss without any all-reduce); on two it reads that plus 64
all-reduces of 1.5 x the A100's NCCL small-message latency at TP 2. The fit must give
k = 1.5 back, and the one-GPU per-layer term must be taken out first.
"""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
sys.path.insert(0, str(ROOT))
fit = importlib.import_module("allreduce_sync_fit")
collectives = importlib.import_module("simulator.costs.collectives")


def row(setting: str, lengths: str, clients: int, gap_s: float) -> dict:
    isl, osl = lengths.split("/")
    return {"id": f"nim1.0-dli-{setting}-{isl}-{osl}-c{clients}", "status": "ok",
            "metrics": {"mean_tpot_ms": {"published": 20.0 + gap_s * 1e3,
                                         "simulated": 20.0}}}


def test_k_is_recovered_after_the_one_gpu_term() -> None:
    t0 = collectives.allreduce_curve("a100-80gb", 2).latency_s
    per_layer = 10e-6
    rows = [row("a100-80gb-llama-3-8b-fp16-tp1", "200/200", 1, 32 * per_layer),
            row("a100-80gb-llama-3-8b-fp16-tp1", "200/2000", 1, 32 * per_layer),
            row("a100-80gb-llama-3-8b-fp16-tp2", "200/200", 1, 32 * per_layer + 64 * 1.5 * t0),
            row("a100-80gb-llama-3-8b-fp16-tp2", "200/2000", 1,
                32 * per_layer + 64 * 1.5 * t0),
            row("a100-80gb-llama-3-8b-fp16-tp2", "200/200", 5, 1.0)]  # not one client
    gaps = fit.one_client_gaps(rows)
    assert gaps["a100-80gb-llama-3-8b-fp16-tp1"] == pytest.approx(32 * per_layer, rel=1e-9)
    [(setting, y, latency, k)] = fit.handshakes(gaps)
    assert setting == "a100-80gb-llama-3-8b-fp16-tp2" and latency == t0
    assert y == pytest.approx(1.5 * t0, rel=1e-6) and k == pytest.approx(1.5, rel=1e-6)


def test_a_setting_without_its_one_gpu_sibling_is_left_out() -> None:
    gaps = {"h100-sxm-llama-3-70b-fp8-tp4": 2e-3}  # no H100 FP8 one-GPU row
    assert fit.handshakes(gaps) == []
    assert fit.split("a100-80gb-llama-3-70b-bf16-tp8") == ("a100-80gb", "llama-3-70b",
                                                           "fp16", 8)
