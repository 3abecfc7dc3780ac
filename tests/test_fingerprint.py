"""Machine fingerprints, the per-user profile cache, and validate's refusal of a profile
measured on another machine (simulator only: no torch, no engine run)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers import mark_measured, tiny_cpu_scenario

from servesim.cli import main
from simulator.costs.machine import machine_note
from simulator.costs.profile import PROFILES_DIR, load_profile
from simulator.deployment import resolve
from simulator.fingerprint import differences, fingerprint_id, this_machine
from simulator.profile_cache import ENV_VAR, cache_root, cached_profile_path
from simulator.shapes import StepShape

TINY = {"model": {"name": "tiny", "weight_dtype": "fp32"}, "hardware": {"gpu": "cpu"}}
OTHER_DEVICE = "Intel(R) Xeon(R) Platinum 0000 (a CPU no test machine has)"
SCENARIO = tiny_cpu_scenario("fp", 3, """arrival = "poisson"
rate = 2.0
num_requests = 12
prompt = { dist = "uniform", low = 20, high = 80 }
output = { dist = "uniform", low = 5, high = 20 }
""")


def foreign(fp: dict) -> dict:
    """``fp`` as another CPU would have it: another name, AMX where this one has none (or
    none where this one has it)."""
    flags = set(fp["cpu_flags"].split())
    flags ^= {"amx_tile"}
    other = {**fp, "device": OTHER_DEVICE, "cpu_flags": " ".join(sorted(flags))}
    other["id"] = fingerprint_id(other)
    return other


def test_the_fields_that_differ_are_named_and_change_the_id():
    here = this_machine("cpu", threads=1)
    other = foreign(here)
    assert {k for k, _, _ in differences(other, here)} == {"device", "cpu_flags"}
    assert differences(here, dict(here)) == []
    assert other["id"] != here["id"] and len(here["id"]) == 12
    assert fingerprint_id({**here, "note": "not compared"}) == here["id"]
    two = this_machine("cpu", threads=2)
    assert [k for k, _, _ in differences(two, here)] == ["threads"]
    with pytest.raises(ValueError, match="kind='tpu'"):
        this_machine("tpu")


def test_the_cache_folder_follows_the_environment(tmp_path, monkeypatch):
    monkeypatch.setenv(ENV_VAR, str(tmp_path / "c"))
    assert cache_root() == tmp_path / "c"
    path = cached_profile_path(this_machine("cpu", 1), "cpu", "tiny", "fp32", 1)
    assert path.parent.parent == tmp_path / "c" and path.name == "cpu__tiny__fp32__tp1.json"
    monkeypatch.delenv(ENV_VAR)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert cache_root() == tmp_path / "xdg" / "servesim" / "profiles"


def _write_profile(path: Path, fingerprint: dict, decode_step_s: float | None = None) -> Path:
    data = json.loads((PROFILES_DIR / "cpu__tiny__fp32__tp1.json").read_text())
    data["provenance"]["fingerprint"] = fingerprint
    if decode_step_s is not None:
        data["coefficients"]["decode_step_s"] = decode_step_s
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data))
    return path


def test_a_profile_cached_for_this_machine_wins_over_the_shipped_one(tmp_path, monkeypatch):
    monkeypatch.setenv(ENV_VAR, str(tmp_path))
    shipped = resolve(TINY)
    assert "cpu__tiny__fp32__tp1.json (" in shipped.cost_source
    path = cached_profile_path(this_machine("cpu", 1), "cpu", "tiny", "fp32", 1)
    _write_profile(path, this_machine("cpu", 1), decode_step_s=0.05)
    dep = resolve({**TINY, "cost": {"jitter_cv": 0}})
    assert str(path) in dep.cost_source
    assert "fingerprint matches this machine" in dep.cost_source
    # 4 decode rows: the cached profile's 50 ms fixed cost (x its 4-row factor 0.94), not
    # the shipped 13.6 ms
    shape = StepShape(num_decode_seqs=4, decode_context_tokens=400)
    assert dep.cost.step_time(shape) > 0.045 > 0.02 > shipped.cost.step_time(shape)


def test_every_run_says_whether_its_profile_holds_here(tmp_path):
    here = this_machine("cpu", 1)
    note = machine_note(load_profile(_write_profile(tmp_path / "f.json", foreign(here))))
    assert "ANOTHER machine" in note and f"device {OTHER_DEVICE!r}" in note
    assert "cpu_flags" in note and "servesim calibrate --here --model tiny" in note
    bare = json.loads((tmp_path / "f.json").read_text())
    del bare["provenance"]["fingerprint"]
    (tmp_path / "bare.json").write_text(json.dumps(bare))
    assert "no machine fingerprint" in machine_note(load_profile(tmp_path / "bare.json"))


@pytest.fixture()
def measured(tmp_path):
    """A one-point results folder whose summary says it was served on this machine."""
    scenario = tmp_path / "fp.toml"
    scenario.write_text(SCENARIO)
    out = tmp_path / "measured"
    assert main(["run", str(scenario), "--out", str(out), "--workers", "1"]) == 0
    summaries = json.loads((out / "summary.json").read_text())
    summaries[0]["fingerprint"] = this_machine("cpu", 1)
    (out / "summary.json").write_text(json.dumps(summaries))
    mark_measured(out, "engine")
    return scenario, out


def test_validate_refuses_a_foreign_profile_and_runs_it_when_forced(measured, tmp_path,
                                                                      capsys):
    scenario, out = measured
    profile = _write_profile(tmp_path / "intel.json", foreign(this_machine("cpu", 1)))
    capsys.readouterr()
    args = ["validate", str(scenario), "--measured", str(out), "--out", str(tmp_path / "v"),
            "--set", f"cost.profile='{profile}'"]
    assert main(args) == 2
    err = capsys.readouterr().err
    assert "measured on another machine than the engine" in err
    assert f"device {OTHER_DEVICE!r}" in err and "cpu_flags" in err
    assert "servesim calibrate --here --model tiny --threads 1" in err
    assert main([*args, "--set", "cost.force=true"]) == 0
    printed = capsys.readouterr().out
    assert "note: FORCED (cost.force = true)" in printed and "ANOTHER machine" in printed


def test_validate_uses_the_cached_profile_of_the_engine_machine(measured, tmp_path,
                                                               monkeypatch, capsys):
    scenario, out = measured
    monkeypatch.setenv(ENV_VAR, str(tmp_path / "cache"))
    path = cached_profile_path(this_machine("cpu", 1), "cpu", "tiny", "fp32", 1)
    _write_profile(path, this_machine("cpu", 1))
    capsys.readouterr()
    assert main(["validate", str(scenario), "--measured", str(out),
                 "--out", str(tmp_path / "v")]) == 0
    assert f"simulated with: {path}" in capsys.readouterr().out


def test_validate_will_not_calibrate_here_for_a_run_served_elsewhere(measured, tmp_path,
                                                                   capsys):
    scenario, out = measured
    summaries = json.loads((out / "summary.json").read_text())
    summaries[0]["fingerprint"] = foreign(summaries[0]["fingerprint"])
    (out / "summary.json").write_text(json.dumps(summaries))
    capsys.readouterr()
    assert main(["validate", str(scenario), "--measured", str(out),
                 "--out", str(tmp_path / "v")]) == 2
    err = capsys.readouterr().err
    assert "no cost profile of tiny measured on the machine that served the measured" in err


def test_a_sweep_point_is_recomputed_after_this_machine_is_calibrated(tmp_path, monkeypatch):
    from simulator.point_cache import point_key

    monkeypatch.setenv(ENV_VAR, str(tmp_path))
    before = point_key(TINY, "sweep")
    assert point_key(TINY, "sweep") == before
    path = cached_profile_path(this_machine("cpu", 1), "cpu", "tiny", "fp32", 1)
    _write_profile(path, this_machine("cpu", 1))
    assert point_key(TINY, "sweep") != before
