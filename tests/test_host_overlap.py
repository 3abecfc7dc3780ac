"""Host work beside the step under an overlap scheduler (simulator/costs/host.py): the
per-row bookkeeping (``seq_s``) runs while the GPU computes, so a step lasts the longer of
the two, by hand; and a scenario's cost a row, in series under vLLM 0.12 and beside the
step under 0.14's async scheduling (simulator/deployment.py)."""

from __future__ import annotations

import pytest
from helpers import TokenCost

from simulator.costs.host import HostCost, Overhead, overlapped
from simulator.deployment import resolve
from simulator.shapes import StepShape, StepShapes

# kernels: 10 ms a step + 0.02 ms a decode row; host: 1 ms a step + 0.1 ms a decode row
KERNELS = TokenCost(step_s=0.010, decode_seq_s=2e-5)
SERIAL = HostCost(KERNELS, Overhead(step_s=0.001, seq_s=1e-4))
BESIDE = overlapped(SERIAL)


def _decode(rows: int) -> StepShape:
    return StepShape(num_decode_seqs=rows, decode_context_tokens=rows * 100)


def test_a_step_lasts_the_kernels_plus_the_host_or_the_longer_of_the_two() -> None:
    # 50 rows: kernels 11 ms; in series 11 + 1 + 5 = 17 ms; beside: max(11 + 1, 5) = 12 ms
    assert SERIAL.step_time(_decode(50)) == pytest.approx(0.017)
    assert BESIDE.step_time(_decode(50)) == pytest.approx(0.012)
    # 200 rows: kernels 14 ms, the rows' host work 20 ms: beside, the CPU sets the pace
    assert SERIAL.step_time(_decode(200)) == pytest.approx(0.035)
    assert BESIDE.step_time(_decode(200)) == pytest.approx(0.020)
    # a prefill-only step has no rows: the same either way (10 + 1 ms)
    prefill = StepShape(num_prefill_tokens=512, prefill_attn_work=512 * 256.0, num_admitted=1)
    assert BESIDE.step_time(prefill) == SERIAL.step_time(prefill) == pytest.approx(0.011)


def test_arrays_and_the_decode_pricer_agree_with_one_step() -> None:
    class Priced(TokenCost):
        def decode_pricer(self):  # noqa: ANN201
            return lambda d, c, f: self.step_s + self.decode_seq_s * d

    beside = overlapped(HostCost(Priced(step_s=0.010, decode_seq_s=2e-5),
                                 Overhead(step_s=0.001, seq_s=1e-4)))
    shapes = [_decode(1), _decode(50), _decode(200), _decode(400)]
    assert beside.step_times(StepShapes.from_shapes(shapes)) == pytest.approx(
        [beside.step_time(s) for s in shapes])
    pricer = beside.decode_pricer()
    assert pricer is not None
    assert (pricer(50, 5000, 0), pricer(200, 20000, 0)) == pytest.approx((0.012, 0.020))


def test_nothing_to_overlap_leaves_the_cost_as_it_is() -> None:
    plain = HostCost(KERNELS, Overhead(step_s=0.001))
    assert overlapped(plain) is plain and overlapped(KERNELS) is KERNELS
    assert overlapped(BESIDE) is BESIDE


def _point(version: str, seq_s: float) -> dict:
    return {"model": {"name": "llama-3.1-8b"}, "hardware": {"gpu": "h100-sxm", "tp": 1},
            "stack": {"name": "vllm-v1", "version": version},
            "cost": {"overhead": {"seq_s": seq_s}}}


def test_vllm_014_async_scheduling_runs_a_row_cost_beside_the_step_012_in_series() -> None:
    # the scenario's own 20 us a decode row (no vLLM preset carries one on one GPU)
    sync, beside = resolve(_point("0.12", 20e-6)), resolve(_point("0.14", 20e-6))
    assert "runs beside the step" in beside.cost_source
    assert "runs beside the step" not in sync.cost_source
    rows = 256  # a decode step whose kernels outlast 256 x 20 us = 5.1 ms of host work
    step = _decode(rows)
    assert sync.cost.step_time(step) - beside.cost.step_time(step) == pytest.approx(
        20e-6 * rows)
    # without a row cost the two releases price the step alike
    assert resolve(_point("0.12", 0.0)).cost.step_time(step) == beside.cost.step_time(step)


def test_speculation_keeps_the_host_work_in_series() -> None:
    spec = {**_point("0.14", 20e-6), "speculative": {"num_tokens": 3, "acceptance": 0.7,
                                                "draft_layers": 2}}
    dep = resolve(spec)
    assert "runs beside the step" not in dep.cost_source
    assert isinstance(dep.cost, HostCost) and not dep.cost.overlapped
