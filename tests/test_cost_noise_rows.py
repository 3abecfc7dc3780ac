"""Step jitter (JitterCost) and the per-decode-row-count factor (RowsFactorCost), by hand."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from calibrate.fit import fit_steps
from simulator.costs.base import JitterCost, RowsFactorCost
from simulator.costs.linear import LinearCost
from simulator.costs.profile import CostProfile
from simulator.errors import ConfigError
from simulator.shapes import StepShape, StepShapes

BASE = LinearCost(step_s=0.01, decode_seq_s=0.001)


def shapes(d: list[int]) -> StepShapes:
    return StepShapes.from_shapes([StepShape(num_decode_seqs=x, decode_context_tokens=10 * x)
                                   for x in d])


def test_jitter_keeps_the_mean_and_has_the_asked_cv():
    cost = JitterCost(BASE, 0.1, seed=1)
    t = cost.step_times(shapes([4] * 200_000))
    assert t.mean() == pytest.approx(0.014, rel=2e-3)
    assert t.std() / t.mean() == pytest.approx(0.1, rel=0.02)
    assert (t > 0).all()
    again = JitterCost(BASE, 0.1, seed=1).step_times(shapes([4] * 5))
    assert np.array_equal(again, t[:5])  # seeded: one simulation is reproducible


def test_rows_factor_interpolates_and_is_one_beyond_the_table():
    cost = RowsFactorCost(BASE, (1, 3, 4), (1.0, 1.4, 0.9))
    t = cost.step_times(shapes([1, 2, 3, 4, 8]))
    base = BASE.step_times(shapes([1, 2, 3, 4, 8]))
    assert t / base == pytest.approx([1.0, 1.2, 1.4, 0.9, 1.0])  # 2 rows: halfway 1 -> 1.4
    assert cost.step_time(StepShape(num_decode_seqs=2, decode_context_tokens=20)) == \
        pytest.approx(t[1])
    prefill = StepShape(num_prefill_tokens=100, prefill_attn_work=5000.0)
    assert cost.step_time(prefill) == BASE.step_time(prefill)  # prefill-only: untouched
    with pytest.raises(ConfigError, match="decode_rows_factor"):
        RowsFactorCost(BASE, (1, 2), (1.0, 9.0))


def test_fit_recovers_a_row_count_factor_from_noisy_synthetic_steps():
    rng = np.random.default_rng(0)
    rows = []
    for d in (1, 2, 3, 4, 5, 6, 8):
        for c in (64, 256, 512, 1024):
            true = 0.008 + 0.0005 * d + 2e-7 * d * (c + 1)
            true *= 1.3 if d == 3 else 1.0  # a kernel that is slow at 3 rows
            rows.append({"phase": "decode", "num_prefill_tokens": 0, "num_decode_seqs": d,
                         "prefill_attn_work": 0.0, "decode_context_tokens": d * (c + 1),
                         "batch_size": d, "time_s": true * rng.normal(1, 0.01),
                         "time_cv": 0.05})
    for p in (16, 64, 128, 256, 512, 1024):
        rows.append({"phase": "prefill", "num_prefill_tokens": p, "num_decode_seqs": 0,
                     "prefill_attn_work": p * p / 2, "decode_context_tokens": 0,
                     "batch_size": 1, "time_s": 0.01 + 1e-4 * p, "time_cv": 0.05})
    steps = pd.DataFrame(rows)
    plain = fit_steps(steps, "piecewise")
    report = fit_steps(steps, "piecewise", rows_factor=True)
    assert report.rows_factor["3"] / report.rows_factor["4"] == pytest.approx(1.3, rel=0.03)
    assert report.mape < plain.mape / 2
    assert report.step_time_cv == pytest.approx(0.05)


def test_profile_with_rows_factor_round_trips(tmp_path):
    from simulator.costs.profile import load_profile, save_profile
    from simulator.specs.hardware import get_hardware
    from simulator.specs.models import get_model

    prof = CostProfile(hardware="cpu", model="tiny", weight_dtype="fp32", kv_dtype="bf16", tp=1,
                       form="linear", coefficients={"step_s": 0.01, "prefill_token_s": 0.0,
                                                    "prefill_attn_s": 0.0, "decode_seq_s": 0.001,
                                                    "decode_context_s": 0.0, "request_s": 0.0},
                       decode_rows_factor={"3": 1.5})
    save_profile(prof, tmp_path / "p.json")
    back = load_profile(tmp_path / "p.json")
    cost = back.build(get_model("tiny"), get_hardware("cpu"))
    assert cost.step_time(StepShape(num_decode_seqs=3)) == pytest.approx(0.013 * 1.5)
    with pytest.raises(ConfigError, match="decode_rows_factor"):
        CostProfile(**{**prof.to_dict(), "decode_rows_factor": {"x": 1.0}})


def test_a_profile_s_measured_cv_jitters_steps_unless_turned_off(tmp_path):
    from simulator.costs.from_config import cost_model_from_config
    from simulator.costs.profile import save_profile
    from simulator.specs.hardware import get_hardware
    from simulator.specs.models import get_model

    coef = {"step_s": 0.01, "prefill_token_s": 0.0, "prefill_attn_s": 0.0,
            "decode_seq_s": 0.001, "decode_context_s": 0.0, "request_s": 0.0}
    prof = CostProfile(hardware="cpu", model="tiny", weight_dtype="fp32", kv_dtype="bf16", tp=1,
                       form="linear", coefficients=coef, fit={"step_time_cv": 0.08})
    path = tmp_path / "p.json"
    save_profile(prof, path)
    args = (get_model("tiny"), get_hardware("cpu"), 1, "fp32", "bf16")
    cost, used = cost_model_from_config({"profile": str(path)}, *args)
    assert isinstance(cost, JitterCost) and cost.cv == 0.08 and "step jitter CV 8.0%" in used
    cost, used = cost_model_from_config({"profile": str(path), "jitter_cv": 0}, *args)
    assert isinstance(cost, LinearCost) and "jitter" not in used
    with pytest.raises(ConfigError, match="cost.jitter_cv"):
        cost_model_from_config({"profile": str(path), "jitter_cv": 2.0}, *args)
