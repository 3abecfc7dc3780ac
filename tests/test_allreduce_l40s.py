"""L40S all-reduce from a published nccl-tests run (simulator/costs/collectives_published.json,
read by simulator/costs/collectives.py; docs/gpu-profiles.md, "L40S all-reduce")."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from simulator.costs.collectives import PUBLISHED_FILE, allreduce_curve
from simulator.costs.roofline import RooflineCost
from simulator.shapes import StepShape
from simulator.specs.hardware import get_hardware
from simulator.specs.models import MODELS

L40S = get_hardware("l40s")
LLAMA_70B = MODELS["llama-3.1-70b"]  # 80 layers, hidden 8,192


def decode(rows: int) -> StepShape:
    return StepShape(num_decode_seqs=rows, decode_context_tokens=rows * 1024)


def test_l40s_tp8_is_the_nccl_tests_table() -> None:
    curve = allreduce_curve("l40s", 8)
    assert curve is not None and curve.kind == "nccl"
    # The run's out-of-place times (us) at 1, 2, 4, ..., 256 MiB, as printed.
    assert curve.knots_bytes[1:] == tuple(float(2**20 << i) for i in range(9))
    assert curve.latency_us[1:] == (146.25, 226.47, 393.60, 758.78, 2037.97, 5046.47,
                                    10114.5, 20927.0, 41021.9)
    # Bus bandwidth at 256 MiB: 268,435,456 B / 41,021.9 us x 2 (8-1)/8 = 11.45 GB/s, the
    # run's busbw column (11.45); the prior's formula assumes 64/2 x 0.8 = 25.6 GB/s.
    assert 268435456 / 41021.9e-6 * 1.75 / 1e9 == pytest.approx(11.45, abs=0.01)


def test_l40s_tp4_is_tp8_at_equal_bus_bandwidth() -> None:
    tp8, tp4 = allreduce_curve("l40s", 8), allreduce_curve("l40s", 4)
    assert tp8 is not None and tp4 is not None
    assert tp4.knots_bytes == tp8.knots_bytes
    # busbw = S / t x 2 (n-1)/n equal at n = 4 and 8: t4 = t8 x (6/4) / (14/8) = t8 x 6/7.
    for t4, t8 in zip(tp4.latency_us[1:], tp8.latency_us[1:], strict=True):
        assert t4 == pytest.approx(t8 * 6 / 7, abs=1e-3)
    assert tp4.time_s(2.0**20) == pytest.approx(125.357e-6)


def test_70b_decode_on_8_l40s_by_hand() -> None:
    # Llama-3.1-70B, TP8: 2 x 80 all-reduces per step of rows x 8,192 bf16 values.
    cost = RooflineCost(LLAMA_70B, L40S, 8, "fp8", "fp8")
    assert cost.measured_allreduce == allreduce_curve("l40s", 8)
    # 64 rows: 64 x 8,192 x 2 B = 1 MiB, a knot: 146.25 us each, 160 x = 23.4 ms.
    assert cost.terms(decode(64)).allreduce_s == pytest.approx(160 * 146.25e-6)
    # 96 rows: 1.5 MiB, halfway from 1 MiB (146.25 us) to 2 MiB (226.47 us): 186.36 us.
    assert cost.terms(decode(96)).allreduce_s == pytest.approx(160 * 186.36e-6)
    # The formula it replaces: 10 us + 2 (7/8) 1 MiB / 25.6 GB/s = 81.68 us at 64 rows.
    old = RooflineCost(LLAMA_70B, L40S, 8, "fp8", "fp8", allreduce_kind="")
    assert old.terms(decode(64)).allreduce_s == pytest.approx(
        160 * (10e-6 + 1.75 * 2**20 / 25.6e9))
    assert cost.step_time(decode(64)) - old.step_time(decode(64)) == pytest.approx(
        160 * (146.25e-6 - 10e-6 - 1.75 * 2**20 / 25.6e9))
    assert "measured by nccl-tests on 8x L40S" in (cost.allreduce_source() or "")


def test_other_pcie_deployments_keep_the_formula() -> None:
    for gpu, tp in (("l40s", 2), ("h100-pcie", 8)):
        assert allreduce_curve(gpu, tp) is None
        cost = RooflineCost(LLAMA_70B, get_hardware(gpu), tp)
        assert "formula 10 us" in (cost.allreduce_source() or "")


def test_a_fitted_curve_comes_first(tmp_path: Path) -> None:
    fitted = {"curves": [{"hardware": "l40s", "kind": "nccl", "tp": 8,
                          "knots_bytes": [0, 1048576], "latency_us": [5.0, 50.0],
                          "source": "AIConfigurator test"}]}
    path = tmp_path / "fitted.json"
    path.write_text(json.dumps(fitted))
    curve = allreduce_curve("l40s", 8, path=path)
    assert curve is not None and curve.latency_us == (5.0, 50.0)
    assert allreduce_curve("l40s", 4, path=path) == allreduce_curve("l40s", 4)
    assert allreduce_curve("l40s", 8, path=path, published=None) is not None
    assert allreduce_curve("l40s", 4, path=path, published=None) is None
    assert PUBLISHED_FILE.name == "collectives_published.json"
