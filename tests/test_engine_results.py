"""Engine results on disk (issue 11, items 2 and 8), with the tiny model on this CPU.

The issue's reproduction: ``run S --backend engine --out D``, then ``run S --out D``, then
``validate S --measured D`` said "22/22 within tolerance". Now the second run is refused,
``--overwrite`` leaves no tokens.parquet behind, and validate refuses the folder. And an
engine run interrupted in point 2 keeps point 1 and resumes from it.
"""

from __future__ import annotations

import json

import pandas as pd
import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")

from helpers import tiny_cpu_scenario  # noqa: E402

from servesim.cli import main  # noqa: E402


def load(rate: str) -> str:
    """3 requests of 16 prompt and 3 output tokens at ``rate`` (a TOML value)."""
    return (f'arrival = "constant"\nrate = {rate}\nnum_requests = 3\n'
            'prompt = { dist = "fixed", tokens = 16 }\noutput = { dist = "fixed", tokens = 3 }\n')


def test_an_engine_measurement_is_not_replaced_by_a_simulation(tmp_path, capsys):
    scenario = tmp_path / "s.toml"
    scenario.write_text(tiny_cpu_scenario("s", 1, load("20.0")))
    out = tmp_path / "D"
    assert main(["run", str(scenario), "--backend", "engine", "--out", str(out)]) == 0
    manifest = json.loads((out / "manifest.json").read_text())
    assert (manifest["kind"], manifest["backend"]) == ("engine", "engine")
    summary = json.loads((out / "summary.json").read_text())[0]
    assert manifest["machine"] == summary["fingerprint"]  # where the engine ran
    assert "tokens.parquet" in manifest["files"]
    assert len(pd.read_parquet(out / "tokens.parquet")) == 9  # 3 requests x 3 tokens
    capsys.readouterr()
    assert main(["run", str(scenario), "--out", str(out)]) == 2
    assert "holds engine measurements" in capsys.readouterr().err
    assert json.loads((out / "summary.json").read_text())[0] == summary  # untouched
    assert main(["run", str(scenario), "--out", str(out), "--overwrite"]) == 0
    assert sorted(p.name for p in out.iterdir()) == [
        "manifest.json", "requests.parquet", "steps.parquet", "summary.json"]
    capsys.readouterr()
    assert main(["validate", str(scenario), "--measured", str(out),
                 "--out", str(tmp_path / "v")]) == 2
    assert "holds simulated results" in capsys.readouterr().err


def test_an_interrupted_engine_run_keeps_its_finished_points_and_resumes(
        tmp_path, capsys, monkeypatch):
    import engine.backend

    scenario = tmp_path / "s.toml"
    scenario.write_text(tiny_cpu_scenario("s", 1, load("[20.0, 30.0]")))
    out = tmp_path / "D"
    real = engine.backend.run_point_engine
    served: list[float] = []

    def interrupt_second(labels, point, **kwargs):  # type: ignore[no-untyped-def]
        if len(served) == 1:
            raise KeyboardInterrupt  # Ctrl-C while point 2 is served
        served.append(point["workload"]["rate"])
        return real(labels, point, **kwargs)

    monkeypatch.setattr(engine.backend, "run_point_engine", interrupt_second)
    assert main(["run", str(scenario), "--backend", "engine", "--out", str(out)]) == 130
    assert capsys.readouterr().err.strip().endswith("servesim: interrupted")
    assert len(list((out / "partial").glob("*.json"))) == 1  # point 1 is on disk
    assert not (out / "summary.json").exists()
    first = json.loads(next((out / "partial").glob("*.json")).read_text())["summary"]

    def count(labels, point, **kwargs):  # type: ignore[no-untyped-def]
        served.append(point["workload"]["rate"])
        return real(labels, point, **kwargs)

    monkeypatch.setattr(engine.backend, "run_point_engine", count)
    assert main(["run", str(scenario), "--backend", "engine", "--out", str(out)]) == 0
    assert served == [20.0, 30.0]  # point 1 served once, point 2 on the rerun only
    assert "1 of 2 point(s) read back from" in capsys.readouterr().err
    summaries = json.loads((out / "summary.json").read_text())
    assert summaries[0] == first  # read back, not re-served
    assert [s["completed"] for s in summaries] == [3, 3]
    tokens = pd.read_parquet(out / "tokens.parquet")
    assert tokens.groupby("point").size().tolist() == [9, 9]
    assert not (out / "partial").exists()  # done: a later run measures afresh


def test_an_interrupted_validate_resumes_its_engine_side(tmp_path, capsys, monkeypatch):
    import engine.backend
    from simulator.costs.profile import PROFILES_DIR
    from simulator.fingerprint import this_machine
    from simulator.profile_cache import ENV_VAR, cached_profile_path

    monkeypatch.setenv(ENV_VAR, str(tmp_path / "cache"))  # a profile of this machine: no
    here = this_machine("cpu", 1)                          # calibration before serving
    profile = json.loads((PROFILES_DIR / "cpu__tiny__fp32__tp1.json").read_text())
    profile["provenance"]["fingerprint"] = here
    path = cached_profile_path(here, "cpu", "tiny", "fp32", 1)
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps(profile))
    scenario = tmp_path / "s.toml"
    scenario.write_text(tiny_cpu_scenario("s", 1, load("[20.0, 30.0]")))
    real = engine.backend.run_point_engine
    served: list[float] = []
    interrupt = True  # Ctrl-C while point 2 is served, on the first run only

    def serve(labels, point, **kwargs):  # type: ignore[no-untyped-def]
        if len(served) == 1 and interrupt:
            raise KeyboardInterrupt
        served.append(point["workload"]["rate"])
        return real(labels, point, **kwargs)

    monkeypatch.setattr(engine.backend, "run_point_engine", serve)
    args = ["validate", str(scenario), "--out", str(tmp_path / "v")]
    assert main(args) == 130
    assert len(list((tmp_path / "v" / "measured" / "partial").glob("*.json"))) == 1
    interrupt = False
    assert main(args) == 0
    assert served == [20.0, 30.0]  # point 1 was not served again
    assert (tmp_path / "v" / "comparison.csv").is_file()
    manifest = json.loads((tmp_path / "v" / "manifest.json").read_text())
    assert manifest["kind"] == "validation" and manifest["machine"]["id"] == here["id"]
    assert json.loads((tmp_path / "v" / "measured" / "manifest.json").read_text())["kind"] \
        == "engine"
