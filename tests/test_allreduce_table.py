"""All-reduce curves fitted to AIConfigurator's measured tables, and the roofline prior
using them (simulator/costs/collectives.py, calibrate/collectives_fit.py)."""

from __future__ import annotations

import numpy as np
import pytest

from calibrate.collectives_fit import fit_curve
from simulator.costs.collectives import allreduce_curve, allreduce_kinds
from simulator.costs.from_config import cost_model_from_config
from simulator.costs.prior_efficiency import prior_note
from simulator.costs.roofline import RooflineCost
from simulator.errors import ConfigError
from simulator.shapes import StepShape
from simulator.specs.hardware import get_hardware
from simulator.specs.models import MODELS

A100, B200 = get_hardware("a100-80gb"), get_hardware("b200")
CODELLAMA = MODELS["codellama-34b"]


def decode(rows: int) -> StepShape:
    return StepShape(num_decode_seqs=rows, decode_context_tokens=rows * 1024)


def test_a100_nccl_tp2_curve_by_hand() -> None:
    curve = allreduce_curve("a100-80gb", 2)
    assert curve is not None and curve.kind == "nccl"
    assert curve.knots_bytes == (0, 16384, 131072, 1048576, 8388608, 67108864)
    assert curve.latency_us == (9.691, 12.76, 12.394, 36.161, 86.917, 391.535)
    # 16 KiB (one token of a 8,192-wide bf16 vector) is a knot: 12.76 us (the table: 12.8 us
    # for 8,192 half elements). 32 KiB lies 1/7 of the way from 16 KiB to 128 KiB.
    assert curve.time_s(16384) == pytest.approx(12.76e-6)
    assert curve.time_s(32768) == pytest.approx((12.76 + (12.394 - 12.76) / 7) * 1e-6)
    # Past 64 MiB: the last segment's slope, 304.618 us per 56 MiB.
    slope = (391.535 - 86.917) / (67108864 - 8388608)
    assert curve.time_s(2 * 67108864) == pytest.approx((391.535 + 67108864 * slope) * 1e-6)
    assert curve.latency_s == pytest.approx(9.691e-6)
    sizes = np.array([16384.0, 32768.0])
    assert curve.time_s(sizes) == pytest.approx([curve.time_s(16384), curve.time_s(32768)])


def test_prior_uses_the_curve() -> None:
    # CodeLlama-34B, TP2 on A100: 2 x 48 all-reduces of 1 x 8,192 bf16 values per decode step.
    cost = RooflineCost(CODELLAMA, A100, 2)
    assert cost.terms(decode(1)).allreduce_s == pytest.approx(96 * 12.76e-6)
    assert cost.terms(decode(64)).allreduce_s == pytest.approx(96 * 36.161e-6)  # 1 MiB knot
    # The formula it replaces: 10 us + 2 (1/2) 16,384 B / (600/2 GB/s x 0.8) per all-reduce.
    old = RooflineCost(CODELLAMA, A100, 2, allreduce_kind="")
    assert old.terms(decode(1)).allreduce_s == pytest.approx(96 * (10e-6 + 16384 / 240e9))
    assert cost.step_time(decode(1)) - old.step_time(decode(1)) == pytest.approx(
        96 * (12.76e-6 - 10e-6 - 16384 / 240e9))
    assert RooflineCost(CODELLAMA, A100, 1).terms(decode(1)).allreduce_s == 0.0


def test_gpus_without_a_table_keep_the_formula_and_say_so() -> None:
    cost = RooflineCost(MODELS["llama-3.1-70b"], B200, 2)
    assert cost.measured_allreduce is None
    assert cost.allreduce_source() == ("formula 10 us + bytes / (0.8 x link) "
                                       "(no measured nccl curve for b200 tp2)")
    # A deployment with no shipped profile (calibrate.aic_models composes tp 1, 2 and 4).
    _, used = cost_model_from_config({}, CODELLAMA, A100, 8, "bf16", "bf16")
    assert used.startswith(f"roofline prior (built on the fly), {prior_note(A100.name, 'bf16')}"
                           "; all-reduce: nccl all-reduce fitted to AIConfigurator 0.12.0 "
                           "data/a100_sxm/comm/nccl/2.27.3/")


def test_setting_a_formula_knob_selects_the_formula() -> None:
    section = {"form": "roofline", "allreduce_latency_s": 2e-5}
    cost, used = cost_model_from_config(section, CODELLAMA, A100, 2, "bf16", "bf16")
    assert "all-reduce: formula 20 us" in used
    assert cost.terms(decode(1)).allreduce_s == pytest.approx(96 * (2e-5 + 16384 / 240e9))


def test_unknown_kind_is_refused() -> None:
    assert {"nccl", "trtllm", "vllm_graph", "vllm_eager"} <= set(allreduce_kinds())
    with pytest.raises(ConfigError, match=r"allreduce_kind='mpi' must be"):
        RooflineCost(CODELLAMA, A100, 2, allreduce_kind="mpi")


def test_fit_recovers_a_piecewise_linear_curve() -> None:
    knots = (0.0, 1000.0, 4000.0)
    truth = [5.0, 6.0, 18.0]
    sizes = np.array([100.0, 500.0, 900.0, 2000.0, 3000.0, 8000.0])
    latency = np.interp(sizes, knots, truth)
    latency[-1] = 18.0 + 4000.0 * (12.0 / 3000.0)  # past the last knot: the last slope
    coef, fit = fit_curve(sizes, latency, knots)
    assert coef == pytest.approx(truth, abs=1e-3)
    assert fit["max_ape"] < 1e-4
