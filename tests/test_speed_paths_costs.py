"""The cost models' scalar fast paths give bit for bit what their general paths give.

- ``RooflineCost.step_time`` (plain floats, terms cached per token count) against the
  vectorised ``step_times`` and against the formula's own float path (``terms``).
- The measured all-reduce curve's scalar ``time_s_scalar`` against ``np.interp``.
- Every ``decode_pricer`` (roofline, piecewise, linear, scaled, host overhead) against
  ``step_time`` of the pure-decode shape it stands for.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simulator.costs import LinearCost, PiecewiseCost, RooflineCost, ScaledCost
from simulator.costs.base import CostModel, JitterCost, decode_pricer
from simulator.costs.collectives import allreduce_curve
from simulator.costs.host import HostCost, Overhead
from simulator.shapes import StepShape, StepShapes
from simulator.specs import get_hardware, get_model

H100, A100 = get_hardware("h100-sxm"), get_hardware("a100-80gb")
ROOFLINES = {
    "dense": RooflineCost(get_model("llama-3.1-8b"), H100),
    "tp2-curve": RooflineCost(get_model("codellama-34b"), A100, tp=2, weight_dtype="fp16"),
    "tp4-formula": RooflineCost(get_model("llama-3.1-70b"), H100, tp=4, allreduce_kind=""),
    "moe-tp2": RooflineCost(get_model("mixtral-8x7b"), H100, tp=2, weight_dtype="fp8",
                            moe_kind=""),
    "moe-curve": RooflineCost(get_model("qwen3-235b-a22b"), get_hardware("b200"), tp=8,
                              moe_kind="sglang"),
    "cpu": RooflineCost(get_model("tiny"), get_hardware("cpu"), weight_dtype="fp32"),
    "windows": RooflineCost(get_model("gpt-oss-20b"), get_hardware("h200"),
                            weight_dtype="mxfp4", kv_dtype="fp8", moe_kind=""),
    "windows-moe-tp2": RooflineCost(get_model("gpt-oss-120b"), H100, tp=2,
                                    weight_dtype="mxfp4", moe_kind="vllm"),
}
PIECEWISE = PiecewiseCost(0.04, 0.03, 0.045, 0.029, 3e-5, 512, 6e-5, 2048, 2e-5, 3e-9, 2e-4,
                          7e-8, 1e-3, 2e-4)
LINEAR = LinearCost(0.01, 1e-4, 1e-8, 2e-4, 1e-6, 5e-4)
PRICED = {
    **{f"roofline-{k}": v for k, v in ROOFLINES.items()},
    "piecewise": PIECEWISE,
    "linear": LINEAR,
    "scaled": ScaledCost(ROOFLINES["tp2-curve"], 0.8),
    "host": HostCost(PIECEWISE, Overhead(step_s=1e-4, admit_s=2e-4, finish_s=3e-4,
                                         token_s=1e-5, seq_s=2e-6, request_s=0.01)),
    "host-scaled": HostCost(ScaledCost(LINEAR, 1.3), Overhead(seq_s=1e-6)),
}


def _grid() -> list[StepShape]:
    """Pure prefill, pure decode and mixed steps over wide ranges, edge values included."""
    shapes = []
    for p, d in itertools.product((0, 1, 2, 17, 512, 2048, 4096, 8192), (0, 1, 2, 31, 128, 512)):
        if p == d == 0:
            continue
        for ctx, adm, fin in itertools.product((0, 100, 30000), (0, 1, 3), (0, 2)):
            shapes.append(StepShape(p, p * (ctx + p / 2), d, d * (ctx + 1), adm, min(fin, d)))
    return shapes


@pytest.mark.parametrize("name", list(ROOFLINES))
def test_roofline_scalar_step_time_is_the_vectorised_one_bit_for_bit(name: str) -> None:
    cost = ROOFLINES[name]
    shapes = _grid()
    scalar = np.array([cost.step_time(s) for s in shapes])
    again = np.array([cost.step_time(s) for s in shapes])  # from the per-token-count cache
    formula = np.array([float(cost.terms(s).total_s) for s in shapes])
    vector = cost.step_times(StepShapes.from_shapes(shapes))
    worst = int(np.argmax(np.abs(vector - scalar)))
    assert np.array_equal(scalar, vector), (shapes[worst], scalar[worst], vector[worst])
    assert np.array_equal(scalar, again)
    assert np.array_equal(scalar, formula)


@settings(max_examples=300, deadline=None)
@given(nbytes=st.one_of(st.floats(0, 1e10), st.integers(0, 2**33).map(float)))
def test_allreduce_curve_scalar_is_np_interp(nbytes: float) -> None:
    curve = allreduce_curve("a100-80gb", 2)
    assert curve is not None
    knots = np.array(curve.knots_bytes)
    for x in (nbytes, *knots.tolist(), *(knots * 1.5).tolist()):
        vector = curve.time_s(np.array([x]))[0]
        assert curve.time_s_scalar(x) == vector
        assert curve.time_s(x) == vector


@pytest.mark.parametrize("name", list(PRICED))
def test_decode_pricer_is_step_time_of_the_decode_shape(name: str) -> None:
    cost: CostModel = PRICED[name]
    price = decode_pricer(cost)
    assert price is not None
    for d, ctx, fin in itertools.product((1, 2, 3, 64, 128, 1000), (1, 500, 20000), (0, 1, 2)):
        c = d * ctx
        shape = StepShape(num_decode_seqs=d, decode_context_tokens=c, num_finished=fin)
        assert price(d, c, fin) == cost.step_time(shape), (d, c, fin)


def test_models_without_an_exact_scalar_path_have_no_pricer() -> None:
    """Jittered steps draw random factors per call: the simulator must price them as before."""
    jitter = JitterCost(LINEAR, 0.1, seed=1)
    assert decode_pricer(jitter) is None
    assert decode_pricer(ScaledCost(jitter, 2.0)) is None
    assert decode_pricer(HostCost(jitter, Overhead(step_s=1e-3))) is None
