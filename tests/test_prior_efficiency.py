"""The roofline prior's per-GPU efficiencies: the fit recovers known ones, the shipped file
is in sync with the shipped profiles, and every prior the simulator builds starts from it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from calibrate.prior_efficiency import fit_gpu, fitted, measured_by_gpu
from simulator.costs import CostProfile, RooflineCost, cost_model_from_config
from simulator.costs.host import split_host
from simulator.costs.prior_efficiency import EFFICIENCY_FILE, prior_knobs, prior_note
from simulator.specs.hardware import get_hardware
from simulator.specs.models import get_model


def synthetic(model: str, tp: int, **knobs: float) -> CostProfile:
    """A "measured" profile that is the prior itself at known efficiencies."""
    return CostProfile(hardware="a100-80gb", model=model, weight_dtype="bf16",
                       kv_dtype="bf16", tp=tp, form="roofline",
                       coefficients={k: float(v) for k, v in knobs.items()}, fit={},
                       provenance={"source": "synthetic"})


def test_fit_recovers_the_efficiencies_a_synthetic_table_was_made_with() -> None:
    knobs = {"compute_efficiency": 0.7, "memory_efficiency": 0.65,
             "kv_memory_efficiency": 0.75, "layer_overhead_s": 40e-6}
    profiles = [synthetic("llama-3.1-8b", 1, **knobs), synthetic("llama-3.1-70b", 4, **knobs),
                synthetic("qwen2.5-7b", 1, **knobs)]
    row = fit_gpu(profiles)
    for name, value in knobs.items():
        assert row[name] == pytest.approx(value, rel=0.005), name
    assert row["median_prior_over_measured"]["fitted"] == pytest.approx(1.0, abs=0.002)  # type: ignore[index]
    assert row["within_15pct"]["fitted"] == 1.0  # type: ignore[index]
    # leaving a profile out, the floor predicts it at least as well, so it was kept
    held = row["within_15pct_held_out"]
    assert held["with_layer_floor"] == 1.0 >= held["efficiencies"]  # type: ignore[index]


def test_the_floor_is_kept_only_where_it_predicts_held_out_profiles() -> None:
    knobs = {"compute_efficiency": 0.7, "memory_efficiency": 0.65, "kv_memory_efficiency": 0.75}
    row = fit_gpu([synthetic("llama-3.1-8b", 1, **knobs), synthetic("llama-3.1-70b", 4, **knobs)])
    assert row["layer_overhead_s"] == pytest.approx(0.0, abs=1e-7)  # none was put in
    assert row["compute_efficiency"] == pytest.approx(0.7, rel=0.005)


def test_shipped_file_is_the_fit_of_the_shipped_profiles() -> None:
    shipped = json.loads(EFFICIENCY_FILE.read_text())
    assert shipped == json.loads(json.dumps(fitted()))  # python -m calibrate.prior_efficiency
    groups = measured_by_gpu()
    assert {"a100-80gb", "h100-sxm", "h200", "l40s"} <= set(groups)
    assert "h100-pcie" not in groups and "rtx4090" not in groups  # no tables: defaults


def test_knobs_by_gpu_and_dtype(tmp_path: Path) -> None:
    path = tmp_path / "eff.json"
    path.write_text(json.dumps({"version": 1, "gpus": {"a100-80gb": {"bf16": {
        "compute_efficiency": 0.7, "memory_efficiency": 0.6, "kv_memory_efficiency": 0.5,
        "layer_overhead_s": 2e-5}}}}))
    assert prior_knobs("a100-80gb", "bf16", path) == {
        "compute_efficiency": 0.7, "memory_efficiency": 0.6, "kv_memory_efficiency": 0.5,
        "layer_overhead_s": 2e-5}
    assert prior_knobs("a100-80gb", "fp16", path)["memory_efficiency"] == 0.6  # same cost
    # int4 weights, and fp8 ones on a GPU without FP8 tensor cores, are multiplied in bf16
    # (weight-only kernels): bf16's fit; int8 runs on the A100's INT8 tensor cores, and has
    # no fit of its own here: the defaults
    assert prior_knobs("a100-80gb", "int4", path)["compute_efficiency"] == 0.7
    assert prior_knobs("a100-80gb", "fp8", path)["memory_efficiency"] == 0.6
    assert prior_knobs("a100-80gb", "int8", path) == {}
    assert prior_knobs("h100-pcie", "bf16", path) == {}
    assert "defaults" in prior_note("h100-pcie", "bf16", path)
    assert "eff_c 0.7, eff_m 0.6, eff_kv 0.5, t_layer 20 us" in prior_note("a100-80gb", "bf16",
                                                                           path)
    assert prior_knobs("a100-80gb", "bf16", tmp_path / "absent.json") == {}


def test_the_prior_built_on_the_fly_starts_from_the_fitted_efficiencies() -> None:
    # Llama-3.1-70B fp8 on 4 x L40S: no profile ships, so a prior is built on the fly
    model, hw = get_model("llama-3.1-70b"), get_hardware("l40s")
    knobs = prior_knobs("l40s", "fp8")
    assert knobs and knobs != {"compute_efficiency": 0.6, "memory_efficiency": 0.8,
                               "kv_memory_efficiency": 0.8, "layer_overhead_s": 0.0}
    cost, used = cost_model_from_config({}, model, hw, 4, "fp8", "fp8")
    kernel, _ = split_host(cost)
    assert isinstance(kernel, RooflineCost)
    assert {k: getattr(kernel, k) for k in knobs} == knobs
    assert "efficiencies fitted to l40s's measured fp8 operator tables" in used
    # a [cost] form = "roofline" section's own knobs win, one by one
    cost, used = cost_model_from_config({"form": "roofline", "memory_efficiency": 0.5},
                                        model, hw, 4, "fp8", "fp8")
    kernel, _ = split_host(cost)
    assert isinstance(kernel, RooflineCost) and kernel.memory_efficiency == 0.5
    assert kernel.compute_efficiency == knobs["compute_efficiency"]
    assert used.count("memory_efficiency=0.5") == 1


def test_a_profile_is_fitted_only_over_the_steps_it_was_composed_over() -> None:
    from calibrate.prior_efficiency import composed_over, shapes
    from simulator.shapes import StepShape

    # Composed up to 65,536 tokens of context (where its KV fits) and 16,384-token prefills
    p = synthetic("llama-3.1-8b", 1, compute_efficiency=0.7)
    p.fit["ranges"] = {"num_prefill_tokens": [0.0, 16384.0], "num_decode_seqs": [0.0, 512.0],
                       "decode_context_tokens": [0.0, 65536.0]}
    assert composed_over(p, StepShape(0, 0.0, 16, 16 * 3000))  # 48,000 tokens: inside
    assert not composed_over(p, StepShape(0, 0.0, 64, 64 * 1500))  # 96,000: past it
    assert composed_over(p, StepShape(8192, 8192**2 / 2, 0, 0))
    # of the fit's 30 shapes, the decodes within 65,536 tokens (1-16 rows at any of 500,
    # 1,500, 3,000 tokens; 64 rows at 500; 128 at 500: 64,000) and the nine prefills
    inside = [s for s in shapes() if composed_over(p, s)]
    assert len(inside) == 3 * 3 + 1 + 1 + 9
    # a profile without ranges counts every shape
    assert all(composed_over(synthetic("llama-3.1-8b", 1), s) for s in shapes())


def test_a_what_if_fit_leaves_models_out() -> None:
    from calibrate.prior_efficiency import measured_by_gpu

    def models(found: dict) -> set[str]:
        return {p.model for by_dtype in found.values() for ps in by_dtype.values() for p in ps}

    assert "mixtral-8x22b" in models(measured_by_gpu())
    left = models(measured_by_gpu(exclude=("mixtral-8x22b", "falcon-180b")))
    assert not {"mixtral-8x22b", "falcon-180b"} & left and "llama-3.1-70b" in left
