"""Cost profiles (data contract 3): JSON round trip, errors, the scenario hook, shipped set."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from calibrate.roofline_profiles import PRIOR_SOURCE, deployments, sync
from simulator.costs import (
    CostProfile,
    LinearCost,
    RooflineCost,
    ScaledCost,
    cost_model_from_config,
    find_shipped_profile,
    load_profile,
    profile_file_name,
    save_profile,
    shipped_profiles,
)
from simulator.costs.prior_efficiency import fitted_prior, prior_knobs, prior_note
from simulator.errors import ConfigError
from simulator.shapes import StepShape
from simulator.specs import get_hardware, get_model
from simulator.specs.dtypes import dtype_label

LLAMA8B, H100 = get_model("llama-3.1-8b"), get_hardware("h100-sxm")
# A deployment whose shipped profile is a roofline prior (llama-3.1 on A100/H100/H200 may be
# composed from measured kernels: calibrate/aiconfigurator.py).
MISTRAL = get_model("mistral-7b")
COEFS = {
    "step_s": 0.004,
    "prefill_token_s": 5e-5,
    "prefill_attn_s": 1e-10,
    "decode_seq_s": 2e-5,
    "decode_context_s": 1e-8,
    "request_s": 1e-4,
}
SHAPE = StepShape(num_decode_seqs=4, decode_context_tokens=4000, num_finished=1)


def linear_profile() -> CostProfile:
    return CostProfile(
        hardware="h100-sxm",
        model="llama-3.1-8b",
        weight_dtype="bf16",
        kv_dtype="bf16",
        tp=1,
        form="linear",
        coefficients=dict(COEFS),
        fit={"mape": 0.031, "r2": 0.995, "n_points": 412, "ranges": {"num_decode_seqs": [1, 256]}},
        provenance={
            "source": "engine profile",
            "measured_by": "ci",
            "date": "2025-01-01",
            "software": "torch 2.13.0",
            "notes": "",
        },
    )


def hook(section: dict, model=LLAMA8B, hw=H100, tp=1, weight_dtype="bf16", kv_dtype="bf16"):
    return cost_model_from_config(section, model, hw, tp, weight_dtype, kv_dtype)


def test_save_load_round_trip(tmp_path: Path) -> None:
    path = tmp_path / "sub" / "p.json"
    save_profile(linear_profile(), path)
    assert load_profile(path) == linear_profile()
    assert [p.name for p in path.parent.iterdir()] == ["p.json"]  # no temp file left behind
    assert json.loads(path.read_text())["version"] == 1
    cost = load_profile(path).build(LLAMA8B, H100)
    # 0.004 + 2e-5*4 + 1e-8*4000 + 1e-4*1 = 0.00422
    assert cost.step_time(SHAPE) == pytest.approx(0.00422, rel=1e-12)


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda d: d.pop("tp"), r"p\.json: missing field\(s\) \['tp'\]"),
        (lambda d: d.update(version=2), r"p\.json: version=2 must be 1"),
        (lambda d: d.update(form="cubic"), r"p\.json: form='cubic' must be one of"),
        (lambda d: d.update(extra=1), r"p\.json: unknown field\(s\) \['extra'\]"),
        (lambda d: d["coefficients"].pop("step_s"), r"p\.json: .*missing: \['step_s'\]"),
        (lambda d: d["coefficients"].update(step_s=-1), r"p\.json: coefficients\.step_s=-1"),
        (lambda d: d.update(weight_dtype="fp4"), r"p\.json: weight_dtype='fp4'"),
        # not a string at all: the dtype table's lookup raised TypeError (unhashable)
        (lambda d: d.update(weight_dtype={}), r"p\.json: weight_dtype=\{\} is not a known"),
        (lambda d: d.update(kv_dtype=[1]), r"p\.json: kv_dtype=\[1\] is not a known"),
    ],
)
def test_load_errors_name_file_and_field(tmp_path: Path, edit, message: str) -> None:
    data = linear_profile().to_dict()
    edit(data)
    path = tmp_path / "p.json"
    path.write_text(json.dumps(data))
    with pytest.raises(ConfigError, match=message):
        load_profile(path)


def test_load_with_a_byte_order_mark_or_not_utf8(tmp_path: Path) -> None:
    path = tmp_path / "p.json"
    path.write_bytes(b"\xef\xbb\xbf" + json.dumps(linear_profile().to_dict()).encode())
    assert load_profile(path) == linear_profile()  # a BOM (Windows editors) is read past
    path.write_bytes(b"\xff\xfe{}")  # UTF-16: before, a bare UnicodeDecodeError
    with pytest.raises(ConfigError, match=r"p\.json: not UTF-8 text \(invalid start byte"):
        load_profile(path)


def test_load_bad_json(tmp_path: Path) -> None:
    (tmp_path / "p.json").write_text("{")
    with pytest.raises(ConfigError, match=r"p\.json: not valid JSON \(line 1"):
        load_profile(tmp_path / "p.json")


def test_empty_section_uses_shipped_profile() -> None:
    # On an RTX 4090, which has no kernel tables and no sibling that has (on H100 SXM a
    # measured stand-in wins: tests/test_shape_equivalent_profile.py; the H100 PCIe takes
    # the SXM's: tests/test_sibling_cost.py)
    gpu = get_hardware("rtx4090")
    cost, used = hook({}, model=MISTRAL, hw=gpu)
    assert used == "rtx4090__mistral-7b__bf16__tp1.json (roofline prior, not measured)"
    assert isinstance(cost, RooflineCost)
    # the file is the prior the simulator builds for it: the 4090's transferred eff_c
    assert cost.step_time(SHAPE) == fitted_prior(MISTRAL, gpu, 1, "bf16", "bf16").step_time(SHAPE)


def test_empty_section_without_shipped_profile_builds_roofline() -> None:
    on_the_fly = f"roofline prior (built on the fly), {prior_note('h100-sxm', 'bf16')}"
    _, used = hook({}, model=get_model("tiny"))  # no tiny profile for h100
    assert used == on_the_fly
    _, used = hook({}, kv_dtype="fp8")  # the shipped prior is for a bf16 KV cache
    assert used == on_the_fly


def test_profile_path_relative_to_cwd(tmp_path: Path, monkeypatch) -> None:
    save_profile(linear_profile(), tmp_path / "mine.json")
    monkeypatch.chdir(tmp_path)
    cost, used = hook({"profile": "mine.json"})
    assert isinstance(cost, LinearCost) and used == "mine.json (engine profile)"
    _, used = hook({"profile": "h100-sxm__llama-3.1-8b__bf16__tp1.json"})  # shipped by name
    assert used.startswith("h100-sxm__llama-3.1-8b__bf16__tp1.json (")


def test_profile_for_another_deployment_is_refused(tmp_path: Path) -> None:
    save_profile(linear_profile(), tmp_path / "mine.json")
    with pytest.raises(
        ConfigError, match=r"cost\.profile=.* is for tp=1, but the scenario has tp=2\. Use a "
                           r"profile measured for this deployment, or set cost\.force = true"
    ):
        hook({"profile": str(tmp_path / "mine.json")}, tp=2)
    with pytest.raises(ConfigError, match=r"is for hardware='h100-sxm', but the scenario has "
                                          r"hardware='a100-80gb'; and tp=1, but the scenario "
                                          r"has tp=4\."):
        hook({"profile": str(tmp_path / "mine.json")}, hw=get_hardware("a100-80gb"), tp=4)
    with pytest.raises(ConfigError, match=r"cost\.profile='nope.json': no such file"):
        hook({"profile": "nope.json"})
    with pytest.raises(ConfigError, match=r"cost\.step_s cannot be combined with cost\.profile"):
        hook({"profile": str(tmp_path / "mine.json"), "step_s": 0.1})


def test_force_uses_a_mismatched_profile_and_says_so(tmp_path: Path) -> None:
    save_profile(linear_profile(), tmp_path / "mine.json")
    section = {"profile": str(tmp_path / "mine.json"), "force": True}
    cost, used = hook(section, hw=get_hardware("a100-80gb"), tp=2)
    assert cost == LinearCost(**COEFS)  # the coefficients as measured
    assert used == (f"{tmp_path / 'mine.json'} (engine profile), FORCED (cost.force = true): "
                    "the profile is for hardware='h100-sxm', tp=1; the scenario has "
                    "hardware='a100-80gb', tp=2")
    _, used = hook(section)  # forcing a matching profile changes nothing
    assert used == f"{tmp_path / 'mine.json'} (engine profile)"
    # A prior's knobs are applied to the scenario's own deployment.
    prior = "h100-sxm__mistral-7b__bf16__tp1.json"
    cost, used = hook({"profile": prior, "force": True}, model=get_model("qwen2.5-7b"))
    fitted = prior_knobs("h100-sxm", "bf16")  # the prior file's: H100's fitted efficiencies
    assert cost == RooflineCost(get_model("qwen2.5-7b"), H100, **fitted) and "FORCED" in used
    with pytest.raises(ConfigError, match=r"cost\.force='yes' must be true or false"):
        hook({**section, "force": "yes"})
    with pytest.raises(ConfigError, match=r"cost\.force applies only with cost\.profile"):
        hook({"force": True})


def test_force_from_the_scenario_and_set(tmp_path: Path) -> None:
    """``--set cost.force=true`` is a plain override; the run's cost source records it."""
    from simulator.deployment import resolve
    from simulator.scenario import apply_overrides

    point = {"model": {"name": "llama-3.1-70b"}, "hardware": {"gpu": "h100-sxm", "tp": 4},
             "cost": {"profile": "h100-sxm__llama-2-70b__fp16__tp4.json"}}
    with pytest.raises(ConfigError, match=r"is for model='llama-2-70b', but the scenario has "
                                          r"model='llama-3.1-70b'.*cost\.force = true"):
        resolve(point)
    dep = resolve(apply_overrides(point, ["cost.force=true"]))
    assert dep.cost_source.endswith("FORCED (cost.force = true): the profile is for "
                                    "model='llama-2-70b'; the scenario has model='llama-3.1-70b'")


def test_inline_linear_and_roofline_forms() -> None:
    cost, used = hook({"form": "linear", **COEFS})
    assert cost == LinearCost(**COEFS) and "inline linear" in used
    cost, used = hook({"form": "roofline", "memory_efficiency": 0.5})
    fitted = {**prior_knobs("h100-sxm", "bf16"), "memory_efficiency": 0.5}  # the GPU's, then
    assert cost == RooflineCost(LLAMA8B, H100, **fitted)  # the section's knobs over them
    assert used == (f"roofline prior (built on the fly), {prior_note('h100-sxm', 'bf16')}; "
                    "with memory_efficiency=0.5")


def test_time_scale() -> None:
    base, _ = hook({})
    cost, used = hook({"time_scale": 0.8})
    assert isinstance(cost, ScaledCost) and used.endswith("x time_scale 0.8")
    assert cost.step_time(SHAPE) == pytest.approx(0.8 * base.step_time(SHAPE), rel=1e-12)


@pytest.mark.parametrize(
    ("section", "message"),
    [
        ({"bogus": 1}, r"cost\.bogus is not a cost setting; known: profile, form"),
        ({"form": "cubic"}, r"cost\.form='cubic' must be one of"),
        ({"form": "linear", "memory_efficiency": 0.5}, r"cost\.memory_efficiency does not apply"),
        ({"form": "roofline", "step_s": 0.1}, r"cost\.step_s does not apply to form = 'roofline'"),
        ({"form": "linear", "step_s": "fast"}, r"cost\.step_s='fast' must be a number"),
        ({"form": "roofline", "compute_efficiency": 2}, r"cost\.compute_efficiency=2 must be"),
        ({"step_s": 0.1}, r"cost\.step_s needs cost\.form"),
        ({"time_scale": 0}, r"cost\.time_scale=0 must be a number in \(0.0"),
        ({"form": "linear"}, r"cost: LinearCost: all coefficients are 0"),
    ],
)
def test_bad_sections_name_the_field(section: dict, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        hook(section)


def test_every_shipped_profile_loads_and_builds() -> None:
    paths = shipped_profiles()
    assert 20 <= len(paths) <= 300  # ~4 KB each; calibrate.aic_models added 54, stop 39 37
    for path in paths:
        p = load_profile(path)
        label = dtype_label(p.weight_dtype, p.kv_dtype)  # fp8-kvbf16: a dtype pair
        assert path.name == profile_file_name(p.hardware, p.model, label, p.tp)
        if p.form == "roofline":
            assert p.provenance["source"] == PRIOR_SOURCE and p.fit == {}
        else:  # measured: fit quality and a source (tests/test_calibrate_splitwise.py)
            assert p.fit["mape"] > 0 and p.provenance["source"].startswith("measured")
        t = p.build(get_model(p.model), get_hardware(p.hardware)).step_time(SHAPE)
        assert math.isfinite(t) and t > 0, path.name


def test_find_shipped_profile() -> None:
    assert find_shipped_profile(LLAMA8B, H100, "fp8", 1) is not None
    assert find_shipped_profile("llama-3.1-70b", "h100-sxm", "bf16", 4) is not None
    assert find_shipped_profile("llama-3.1-70b", "h100-sxm", "bf16", 3) is None


def test_generator_is_in_sync_and_spares_measured_profiles(tmp_path: Path) -> None:
    assert sync(Path(shipped_profiles()[0]).parent, check=True, date="x") == []
    save_profile(linear_profile(), tmp_path / "measured.json")
    stale = CostProfile(**{**load_profile(shipped_profiles()[0]).to_dict(), "tp": 16})
    save_profile(stale, tmp_path / "old__prior__bf16__tp16.json")
    changes = sync(tmp_path, check=False, date="2025-01-01")
    assert "remove old__prior__bf16__tp16.json" in changes
    assert len(list(tmp_path.glob("*.json"))) == len(list(deployments())) + 1  # + measured
    # A measured profile under a prior's file name (cpu__tiny__fp32 is engine-measured) stays.
    save_profile(linear_profile(), tmp_path / "cpu__tiny__fp32__tp1.json")
    assert "write cpu__tiny__fp32__tp1.json" not in sync(tmp_path, check=False, date="x")
    assert load_profile(tmp_path / "cpu__tiny__fp32__tp1.json").form == "linear"


def test_fp8_deployment_uses_shipped_fp8_profile() -> None:
    gpu = get_hardware("rtx4090")
    cost, used = hook({}, hw=gpu, weight_dtype="fp8", kv_dtype="fp8")
    assert used.startswith("rtx4090__llama-3.1-8b__fp8__tp1.json (roofline prior")
    assert cost == RooflineCost(LLAMA8B, gpu, weight_dtype="fp8", kv_dtype="fp8")


def test_engine_measured_cpu_profile_matches_its_committed_table() -> None:
    """cpu__tiny__fp32__tp1 was fitted on calibrate/profiles/cpu__tiny__fp32.parquet."""
    import numpy as np

    from simulator.profile_table import read_profile_table

    root = Path(__file__).resolve().parents[1]
    profile = load_profile(root / "simulator/profiles/cpu__tiny__fp32__tp1.json")
    table = read_profile_table(root / "calibrate/profiles/cpu__tiny__fp32.parquet")
    assert profile.form == "piecewise" and table.metadata["model"] == "tiny"
    assert "servesim calibrate calibrate/profiles/cpu__tiny__fp32.parquet" in \
        profile.provenance["notes"] and "engine" in profile.provenance["source"]
    cost = profile.build(get_model("tiny"), get_hardware("cpu"))
    ape = np.abs(cost.step_times(table.shapes()) / table.steps["time_s"].to_numpy() - 1)
    assert ape.mean() == pytest.approx(profile.fit["insample_mape"], abs=1e-4)
    assert profile.fit["n_points"] == len(table.steps) == 69
    assert profile.fit["mape"] < 0.05  # first table, linear form: 10.1%; docs/calibration.md
    assert profile.decode_rows_factor["3"] > 1.2  # the 3-row GEMM kernel, measured
    assert 0 < profile.fit["step_time_cv"] < 0.2
