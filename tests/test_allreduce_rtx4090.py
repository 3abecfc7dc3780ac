"""RTX 4090 all-reduce from published nccl-tests runs without peer-to-peer
(simulator/costs/collectives_published.json; docs/gpu-profiles.md, "RTX 4090 all-reduce")."""

from __future__ import annotations

import pytest

from simulator.costs.collectives import allreduce_curve
from simulator.costs.roofline import RooflineCost
from simulator.shapes import StepShape
from simulator.specs.hardware import get_hardware
from simulator.specs.models import MODELS

RTX4090 = get_hardware("rtx4090")
LLAMA_8B = MODELS["llama-3.1-8b"]  # 32 layers, hidden 4,096: 64 all-reduces a step
# the 8-GPU run's out-of-place times (us) past 64 KiB, as printed
TP8_US = (45.66, 67.27, 124.8, 196.9, 222.8, 373.4, 580.8, 1041.8, 1972.8, 3905.6, 7907.1,
          16253.0)


def test_tp8_is_the_8_gpu_run() -> None:
    curve = allreduce_curve("rtx4090", 8)
    assert curve is not None and curve.kind == "nccl"
    assert curve.knots_bytes[1:] == tuple(float(2**16 << i) for i in range(12))
    assert curve.latency_us == (38.83, *TP8_US)  # t_0: its 8-byte row
    # bus bandwidth at 32 MiB: 33,554,432 B / 3,905.6 us x 2 (8-1)/8 = 15.04 GB/s, the run's
    # busbw column; the prior's formula assumes 64/2 x 0.8 = 25.6 GB/s and 10 us
    assert 33554432 / 3905.6e-6 * 1.75 / 1e9 == pytest.approx(15.04, abs=0.01)


def test_tp4_and_tp2_are_tp8_at_equal_bus_bandwidth() -> None:
    tp8, tp4, tp2 = (allreduce_curve("rtx4090", n) for n in (8, 4, 2))
    assert tp8 is not None and tp4 is not None and tp2 is not None
    # busbw = S / t x 2 (n-1)/n equal: t_n = t_8 x ((n-1)/n) / (7/8)
    for t8, t4, t2 in zip(tp8.latency_us[1:], tp4.latency_us[1:], tp2.latency_us[1:],
                          strict=True):
        assert t4 == pytest.approx(t8 * 6 / 7, abs=1e-3)
        assert t2 == pytest.approx(t8 * 4 / 7, abs=1e-3)
    # floors: 2 GPUs measured (8.38 us), 4 linear in n - 1 between 2's and 8's
    assert tp2.latency_us[0] == 8.38
    assert tp4.latency_us[0] == pytest.approx(8.38 + (38.83 - 8.38) * 2 / 6, abs=1e-3)


def test_8b_decode_on_4_cards_by_hand() -> None:
    cost = RooflineCost(LLAMA_8B, RTX4090, 4)
    assert cost.measured_allreduce == allreduce_curve("rtx4090", 4)
    # 16 rows: 16 x 4,096 x 2 B = 128 KiB, a knot: 67.27 x 6/7 = 57.66 us, 64 x = 3.69 ms
    step = StepShape(num_decode_seqs=16, decode_context_tokens=16 * 500)
    assert cost.terms(step).allreduce_s == pytest.approx(64 * 67.27e-6 * 6 / 7, rel=1e-4)
    old = RooflineCost(LLAMA_8B, RTX4090, 4, allreduce_kind="")  # 10 us + bytes / 25.6 GB/s
    assert old.terms(step).allreduce_s == pytest.approx(64 * (10e-6 + 1.5 * 2**17 / 25.6e9))
    assert "without peer-to-peer" in (cost.allreduce_source() or "")
