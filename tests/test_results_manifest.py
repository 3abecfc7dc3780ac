"""Results folders say what produced them, and output is checked before the work
(issue 11: item 2's manifest and refusals without the engine, item 8's checks, smalls).

tests/test_engine_results.py runs the issue's reproduction with the real engine.
"""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest

from servesim.cli import main
from servesim.validate_profiles import overload_notes
from simulator.atomic import atomic_write
from simulator.results_folder import default_out, safe_name

SCENARIO = """
name = "m"
[policy]
name = "continuous"
[workload]
arrival = "constant"
rate = 1.0
num_requests = 2
prompt = { dist = "fixed", tokens = 16 }
output = { dist = "fixed", tokens = 10 }
"""


@pytest.fixture()
def scenario(tmp_path: Path) -> Path:
    path = tmp_path / "m.toml"
    path.write_text(SCENARIO)
    return path


def test_a_simulated_folder_has_a_manifest_and_validate_refuses_it_as_measured(
        scenario, tmp_path, capsys):
    out = tmp_path / "D"
    assert main(["run", str(scenario), "--out", str(out)]) == 0
    manifest = json.loads((out / "manifest.json").read_text())
    assert (manifest["kind"], manifest["backend"], manifest["endpoint"]) == \
        ("simulated", "sim", None)
    assert manifest["scenario"] == "m" and manifest["points"] == 1
    assert manifest["files"] == ["requests.parquet", "steps.parquet", "summary.json"]
    assert manifest["machine_id"] == manifest["machine"]["id"]
    capsys.readouterr()
    assert main(["validate", str(scenario), "--measured", str(out),
                 "--out", str(tmp_path / "v")]) == 2
    err = capsys.readouterr().err
    assert f"--measured {str(out)!r} holds simulated results" in err
    assert "compare it with itself" in err and not (tmp_path / "v" / "comparison.csv").exists()


def test_an_old_folder_without_a_manifest_is_judged_by_its_summary(scenario, tmp_path,
                                                                   capsys):
    out = tmp_path / "old"
    assert main(["run", str(scenario), "--out", str(out)]) == 0
    (out / "manifest.json").unlink()  # as written before manifests
    capsys.readouterr()
    assert main(["validate", str(scenario), "--measured", str(out),
                 "--out", str(tmp_path / "v")]) == 2
    assert "inferred from summary.json (sim_events" in capsys.readouterr().err
    summaries = json.loads((out / "summary.json").read_text())
    summaries[0]["backend"] = "engine"  # an old engine run's summary
    (out / "summary.json").write_text(json.dumps(summaries))
    assert main(["run", str(scenario), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert "holds engine measurements" in err and "backend = 'engine'" in err


def test_writing_over_another_kind_needs_overwrite_and_removes_its_files(scenario, tmp_path,
                                                                         capsys):
    out = tmp_path / "D"
    assert main(["run", str(scenario), "--out", str(out)]) == 0
    manifest = json.loads((out / "manifest.json").read_text())
    (out / "manifest.json").write_text(json.dumps({**manifest, "kind": "engine"}))
    (out / "tokens.parquet").write_bytes(b"an engine run's token times")
    before = (out / "summary.json").read_text()
    capsys.readouterr()
    assert main(["run", str(scenario), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert f"--out {str(out)!r} holds engine measurements" in err and "--overwrite" in err
    assert (out / "summary.json").read_text() == before  # nothing touched
    assert main(["run", str(scenario), "--out", str(out), "--overwrite"]) == 0
    assert not (out / "tokens.parquet").exists()  # not left beside the simulated results
    assert json.loads((out / "manifest.json").read_text())["kind"] == "simulated"


def test_an_unwritable_out_is_refused_before_any_work(scenario, tmp_path, capsys):
    blocker = tmp_path / "file"
    blocker.write_text("a file, not a folder")
    for command in (["run", str(scenario)], ["sweep", str(scenario)],
                    ["validate", str(scenario), "--measured", str(tmp_path / "none")]):
        capsys.readouterr()
        assert main([*command, "--out", str(blocker / "out")]) == 2
        err = capsys.readouterr().err
        assert f"--out {str(blocker / 'out')!r}: cannot write there" in err, command


def test_profile_checks_its_out_folder_before_measuring(tmp_path, capsys, monkeypatch):
    pytest.importorskip("torch")
    import engine.models

    def no_model(*args, **kwargs):  # type: ignore[no-untyped-def]
        raise AssertionError("the model was built before --out was checked")

    monkeypatch.setattr(engine.models, "build_model", no_model)
    blocker = tmp_path / "file"
    blocker.write_text("x")
    assert main(["profile", "--out", str(blocker / "p.parquet")]) == 2
    assert f"--out {str(blocker)!r}: cannot write there" in capsys.readouterr().err


@pytest.mark.parametrize(("umask", "mode"), [(0o022, 0o644), (0o027, 0o640), (0o077, 0o600)])
def test_result_files_follow_the_umask(tmp_path, umask, mode):
    old = os.umask(umask)
    try:
        path = atomic_write(tmp_path / "r.json", lambda p: p.write_text("{}"))
    finally:
        os.umask(old)
    assert stat.S_IMODE(path.stat().st_mode) == mode


def test_a_scenario_name_cannot_leave_results(tmp_path, monkeypatch, capsys):
    assert safe_name("../../x") == "x" and safe_name("a/b\\c d") == "a_b_c_d"
    assert safe_name("..") == "scenario" and default_out("chat", "-validate") == \
        Path("results/chat-validate")
    work = tmp_path / "a" / "b"
    work.mkdir(parents=True)
    (work / "s.toml").write_text(SCENARIO.replace('name = "m"', 'name = "../../x"'))
    monkeypatch.chdir(work)
    assert main(["run", "s.toml"]) == 0
    assert (work / "results" / "x" / "summary.json").is_file()
    assert not (tmp_path / "x").exists()


PROFILE = {"version": 1, "hardware": "h100-sxm", "model": "llama-3.1-8b",
           "weight_dtype": "bf16", "kv_dtype": "bf16", "tp": 1, "form": "linear",
           "coefficients": {"step_s": 0.01, "prefill_token_s": 0.0, "prefill_attn_s": 0.0,
                            "decode_seq_s": 0.0, "decode_context_s": 0.0, "request_s": 0.0}}


def test_validate_warns_when_the_machine_was_loaded_while_serving(tmp_path):
    profile = tmp_path / "p.json"
    profile.write_text(json.dumps(PROFILE))  # predicts 10 ms for any step
    point = {"model": {"name": "llama-3.1-8b"}, "cost": {"profile": str(profile)}}

    def summary(probe_s: float, load: float) -> dict:
        rows = [{"num_prefill_tokens": 0, "num_decode_seqs": 4, "prefill_attn_work": 0.0,
                 "decode_context_tokens": 1028, "time_s": probe_s}] * 3
        return {"engine": {"speed_probe": rows, "load_avg": load, "cpus": 2}}

    quiet = overload_notes([({"rate": 1}, point)], [summary(0.011, 1.0)])
    assert quiet == []  # 1.10x: within the 15% margin
    busy = overload_notes([({"rate": 1}, point)], [summary(0.013, 3.5)])
    assert len(busy) == 2
    assert "rate=1: load average 3.5 on 2 CPUs" in busy[0]
    assert "ran 1.30x slower than its calibration" in busy[1]
