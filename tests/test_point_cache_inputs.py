"""The point cache keys on the contents of every file a point reads (issue 11, item 1).

One request of 16 prompt tokens and 10 output tokens under a linear profile whose only
term is a fixed ``step_s`` per step: a prefill step (the first token) and 9 decode steps,
so E2E = 10 x step_s. Editing the file between two cached sweeps must change the answer.
"""

from __future__ import annotations

import json
from pathlib import Path

from servesim.cli import main
from simulator.point_inputs import input_hashes

PROFILE = {"version": 1, "hardware": "h100-sxm", "model": "llama-3.1-8b",
           "weight_dtype": "bf16", "kv_dtype": "bf16", "tp": 1, "form": "linear",
           "coefficients": {"step_s": 0.01, "prefill_token_s": 0.0, "prefill_attn_s": 0.0,
                            "decode_seq_s": 0.0, "decode_context_s": 0.0, "request_s": 0.0}}


def _scenario(folder: Path, workload: str, cost: str) -> Path:
    path = folder / "s.toml"
    path.write_text(f'name = "c"\n[policy]\nname = "continuous"\n[workload]\n{workload}\n'
                    f'[cost]\n{cost}\n')
    return path


def _sweep(scenario: Path, out: Path, capsys) -> tuple[float, str]:  # type: ignore[no-untyped-def]
    """(mean E2E ms, stderr) of ``servesim sweep`` with the point cache on."""
    assert main(["sweep", str(scenario), "--out", str(out), "--json"]) == 0
    printed = capsys.readouterr()
    return round(float(json.loads(printed.out)[0]["mean_e2el_ms"]), 9), printed.err


LENGTHS = ('arrival = "constant"\nrate = 1.0\nnum_requests = 1\n'
           'prompt = { dist = "fixed", tokens = 16 }\noutput = { dist = "fixed", tokens = 10 }')


def test_an_edited_cost_profile_is_not_answered_from_the_cache(tmp_path, capsys):
    profile = tmp_path / "prof.json"
    profile.write_text(json.dumps(PROFILE))
    scenario = _scenario(tmp_path, LENGTHS, f'profile = "{profile}"')
    out = tmp_path / "o"
    assert _sweep(scenario, out, capsys)[0] == 100.0  # 10 steps x 10 ms
    tripled = {**PROFILE, "coefficients": {**PROFILE["coefficients"], "step_s": 0.03}}
    profile.write_text(json.dumps(tripled))
    e2e, err = _sweep(scenario, out, capsys)
    assert (e2e, "read from" in err) == (300.0, False)  # was 100, read from the cache
    e2e, err = _sweep(scenario, out, capsys)
    assert (e2e, "1 point(s) read from" in err) == (300.0, True)  # unchanged: a cache hit


def test_an_edited_trace_is_not_answered_from_the_cache(tmp_path, capsys):
    profile = tmp_path / "prof.json"
    profile.write_text(json.dumps(PROFILE))
    trace = tmp_path / "t.csv"
    trace.write_text("request_id,arrival_s,prompt_tokens,output_tokens\n0,0.0,16,10\n")
    scenario = _scenario(tmp_path, 'arrival = "trace"\ntrace = "t.csv"',
                         f'profile = "{profile}"')
    out = tmp_path / "o"
    assert _sweep(scenario, out, capsys)[0] == 100.0
    trace.write_text("request_id,arrival_s,prompt_tokens,output_tokens\n0,0.0,16,30\n")
    assert _sweep(scenario, out, capsys)[0] == 300.0  # 30 steps x 10 ms


def test_the_files_a_point_names_are_found_from_the_scenario_folder_and_the_cwd(
        tmp_path, monkeypatch):
    scenario_dir, cwd = tmp_path / "scenario", tmp_path / "cwd"
    (scenario_dir / "model").mkdir(parents=True)
    (scenario_dir / "model" / "config.json").write_text("{}")
    (scenario_dir / "model" / "weights.bin").write_text("not read")
    (scenario_dir / "t.csv").write_text("x")
    cwd.mkdir()
    (cwd / "p.json").write_text("{}")
    monkeypatch.chdir(cwd)
    point = {"model": {"name": "model"}, "workload": {"trace": "t.csv"},
             "cost": {"profile": "p.json"}, "policy": {"name": "continuous"},
             "_base_dir": str(scenario_dir)}
    found = input_hashes({"labels": {}, "point": point})  # a sweep's cache material
    assert sorted(found) == [f"point.cost.profile@{cwd / 'p.json'}",  # only config.json is read
                             f"point.model.name@{scenario_dir / 'model' / 'config.json'}",
                             f"point.workload.trace@{scenario_dir / 't.csv'}"]
    before = input_hashes(point)
    (scenario_dir / "model" / "config.json").write_text('{"a": 1}')
    assert input_hashes(point) != before
