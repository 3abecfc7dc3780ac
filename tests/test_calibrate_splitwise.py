"""Shipped measured GPU profiles from splitwise-sim's perf table (../shared/traces)."""

from __future__ import annotations

import numpy as np
import pytest

from calibrate.splitwise import CSV_NAME, DEFAULT_TRACES, deployment_tables, load_medians
from simulator.costs import (
    PiecewiseCost,
    cost_model_from_config,
    find_shipped_profile,
    load_profile,
    shipped_profiles,
)
from simulator.profile_table import ProfileTable
from simulator.specs import get_hardware, get_model

CSV = DEFAULT_TRACES / CSV_NAME
needs_csv = pytest.mark.skipif(not CSV.is_file(), reason=f"{CSV} absent (shared traces)")
MEASURED = [p for p in shipped_profiles()  # the splitwise-sim ones (not engine-measured CPU)
            if "splitwise-sim" in load_profile(p).provenance.get("source", "")]


@needs_csv
def test_loader_row_counts_and_medians() -> None:
    medians, dropped = load_medians(CSV)
    assert dropped == 60  # 12 (model, hardware, tp) x 5 repeats at batch 64
    assert len(medians) == 12 * 18  # 19 distinct configurations each, batch 64 gone
    assert set(medians["repeats"]) == {5, 15}  # 512/1/128 is repeated across 3 sweeps
    row = medians.query("model == 'llama2-70b' and hardware == 'h100-80gb' and "
                        "tensor_parallel == 4 and prompt_size == 512 and batch_size == 1 "
                        "and token_size == 128")
    assert row["prompt_time"].item() == pytest.approx(59.62, abs=0.01)
    assert row["token_time"].item() == pytest.approx(29.72, abs=0.01)
    tables, _ = deployment_tables(CSV)
    assert sorted(tables) == sorted((hw, "llama-2-70b", tp) for hw in ("a100-80gb", "h100-sxm")
                                    for tp in (2, 4, 8))
    steps = tables[("h100-sxm", "llama-2-70b", 4)]
    assert len(steps) == 36 and (steps["phase"] == "prefill").sum() == 18
    pre = steps.query("phase == 'prefill' and batch_size == 4").iloc[0]
    assert (pre["num_prefill_tokens"], pre["prefill_attn_work"]) == (2048, 4 * 512 * 256)


def test_six_measured_profiles_are_shipped() -> None:
    names = sorted(p.name for p in MEASURED)
    assert names == sorted(f"{hw}__llama-2-70b__fp16__tp{tp}.json"
                           for hw in ("a100-80gb", "h100-sxm") for tp in (2, 4, 8))
    for path in MEASURED:
        p = load_profile(path)
        assert "8f99e7dc" in p.provenance["source"] and "MIT" in p.provenance["source"]
        # held-out MAPE 2.4-4.8% (linear form: 9.4-11.3%); see docs/calibration.md
        assert p.form == "piecewise" and p.fit["n_points"] == 36 and 0 < p.fit["mape"] < 0.05
        assert p.fit["by_phase"]["decode"]["mape"] < 0.035
        # splitwise has no mixed steps and no step that finishes a request
        assert list(p.fit["unmeasured"]) == ["mixed_step_s", "finish_s"]


@needs_csv
@pytest.mark.parametrize("path", MEASURED, ids=lambda p: p.name)
def test_measured_profile_predicts_its_source_points(path) -> None:  # type: ignore[no-untyped-def]
    profile = load_profile(path)
    cost = profile.build(get_model(profile.model), get_hardware(profile.hardware))
    assert isinstance(cost, PiecewiseCost)
    tables, _ = deployment_tables(CSV)
    steps = tables[(profile.hardware, profile.model, profile.tp)]
    pred = cost.step_times(ProfileTable(steps=steps).shapes())
    ape = np.abs(pred / steps["time_s"].to_numpy() - 1)
    # In-sample error equals the recorded one, and is below the held-out MAPE it states.
    assert ape.mean() == pytest.approx(profile.fit["insample_mape"], abs=1e-4)
    assert ape.mean() <= profile.fit["mape"]


def test_default_cost_prefers_the_measured_profile_over_the_prior() -> None:
    model, hw = get_model("llama-2-70b"), get_hardware("h100-sxm")
    path = find_shipped_profile(model, hw, "bf16", 4)  # bf16 and fp16 cost the same
    assert path is not None and path.name == "h100-sxm__llama-2-70b__fp16__tp4.json"
    cost, used = cost_model_from_config({}, model, hw, 4, "bf16", "bf16")
    assert isinstance(cost, PiecewiseCost) and used.startswith(
        "h100-sxm__llama-2-70b__fp16__tp4.json (measured: Mutinifni/splitwise-sim")
    cost, used = cost_model_from_config({}, model, hw, 4, "fp8", "fp8")  # no measured fp8
    assert not isinstance(cost, PiecewiseCost)
    cost, _ = cost_model_from_config({"profile": path.name}, model, hw, 4, "bf16", "bf16")
    assert isinstance(cost, PiecewiseCost)


@needs_csv
def test_shipped_profiles_are_what_the_script_fits() -> None:
    """python -m calibrate.splitwise regenerates the six files (coefficients and fit)."""
    from calibrate.splitwise import fit_all

    for fitted, _ in fit_all(CSV, date="x"):
        shipped = load_profile(find_shipped_profile(fitted.model, fitted.hardware, "fp16",
                                                    fitted.tp))  # type: ignore[arg-type]
        assert shipped.coefficients == pytest.approx(fitted.coefficients, rel=1e-6)
        assert shipped.fit["mape"] == pytest.approx(fitted.fit["mape"], abs=1e-5)


def test_measured_profile_for_another_deployment_is_refused() -> None:
    from simulator.errors import ConfigError

    model, hw = get_model("llama-3.1-70b"), get_hardware("h100-sxm")
    with pytest.raises(ConfigError, match=r"is for model='llama-2-70b', but the scenario has "
                                          r"model='llama-3.1-70b'"):
        cost_model_from_config({"profile": "h100-sxm__llama-2-70b__fp16__tp4.json"},
                               model, hw, 4, "bf16", "bf16")
    with pytest.raises(ConfigError, match=r"is for hardware='h100-sxm', but the scenario has "
                                          r"hardware='a100-80gb'"):
        cost_model_from_config({"profile": "h100-sxm__llama-2-70b__fp16__tp4.json"},
                               get_model("llama-2-70b"), get_hardware("a100-80gb"), 4,
                               "bf16", "bf16")
