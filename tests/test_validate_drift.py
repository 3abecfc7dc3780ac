"""validate's drift correction: the profile scaled by the engine's speed probe, by hand."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from servesim.validate_profiles import drift_corrected, probe_factor
from simulator.costs.profile import PROFILES_DIR, load_profile
from simulator.shapes import StepShapes

PROFILE = PROFILES_DIR / "cpu__tiny__fp32__tp1.json"
POINT = {"model": {"name": "tiny", "weight_dtype": "fp32"}, "hardware": {"gpu": "cpu"},
         "policy": {"name": "continuous"}, "cost": {"profile": str(PROFILE)}}


def probe_rows(speed: float) -> list[dict]:
    """The three probe steps, timed at ``speed`` x what the tiny profile predicts."""
    rows = [  # decode 4 x 256, decode 1 x 256, prefill 1 x 128 (engine/speed_probe.py)
        {"num_prefill_tokens": 0, "prefill_attn_work": 0.0, "num_decode_seqs": 4,
         "decode_context_tokens": 4 * 257, "num_admitted": 0},
        {"num_prefill_tokens": 0, "prefill_attn_work": 0.0, "num_decode_seqs": 1,
         "decode_context_tokens": 257, "num_admitted": 0},
        {"num_prefill_tokens": 128, "prefill_attn_work": 128 * 64.0, "num_decode_seqs": 0,
         "decode_context_tokens": 0, "num_admitted": 1}]
    kernel = replace(load_profile(PROFILE), overhead={}).build_fitted()
    shapes = StepShapes(*(np.array([r[k] for r in rows]) for k in (
        "num_prefill_tokens", "prefill_attn_work", "num_decode_seqs", "decode_context_tokens",
        "num_admitted")), num_finished=np.zeros(3, np.int64))
    for row, t in zip(rows, kernel.step_times(shapes), strict=True):
        row["time_s"] = float(t) * speed
    return rows


def test_probe_factor_is_measured_over_predicted():
    kernel = load_profile(PROFILE).build_fitted()
    assert probe_factor(probe_rows(0.9), kernel) == pytest.approx(0.9)
    assert probe_factor(probe_rows(1.25), kernel) == pytest.approx(1.25)


def test_drift_multiplies_the_points_time_scale_and_says_so():
    point = {**POINT, "cost": {**POINT["cost"], "time_scale": 1.2}}
    [(_, new)], notes = drift_corrected([({"rate": 3.0}, point)],
                                        [{"engine": {"speed_probe": probe_rows(0.9)}}])
    assert new["cost"]["time_scale"] == pytest.approx(1.08)
    assert point["cost"]["time_scale"] == 1.2  # the caller's point is not changed
    assert "0.900x the profile's speed" in notes[0] and "rate=3.0" in notes[0]


def test_no_probe_or_an_absurd_one_changes_nothing():
    points = [({}, POINT)]
    assert drift_corrected(points, [{"engine": {}}]) == (points, [])
    assert drift_corrected(points, [{}]) == (points, [])
    out, notes = drift_corrected(points, [{"engine": {"speed_probe": probe_rows(3.0)}}])
    assert out == points and "not applied" in notes[0]
