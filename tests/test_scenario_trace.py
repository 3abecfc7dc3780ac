"""A trace through a shipped scenario, and relative paths from the scenario's folder
(issue 11: trace precedence, ``--trace FILE``, ``dist = "trace"``, relative ``model.name``)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from servesim.cli import main
from simulator.deployment import resolve
from simulator.errors import ConfigError
from simulator.scenario import load_scenario, with_trace
from simulator.scenario_types import Scenario
from simulator.workload.build import build_requests
from simulator.workload.config import WorkloadConfig

CHAT = Path(__file__).parents[1] / "scenarios" / "chat.toml"
# arrival_s 0, 0.5, 1.0, ...; prompt 100, 110, ...; output 10, 11, ...
TRACE = pd.DataFrame({"request_id": range(12), "arrival_s": np.arange(12) * 0.5,
                      "prompt_tokens": 100 + 10 * np.arange(12),
                      "output_tokens": 10 + np.arange(12)})


def _trace(folder: Path) -> Path:
    path = folder / "t.csv"
    TRACE.to_csv(path, index=False)
    return path


def test_set_trace_on_chat_replays_the_trace_and_says_the_lengths_were_ignored(  # type: ignore[no-untyped-def]
        tmp_path: Path, capsys, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    trace = _trace(tmp_path)
    out = tmp_path / "o"
    code = main(["run", str(CHAT), "--set", f"workload.trace='{trace}'",
                 "--set", "workload.arrival='trace'", "--set", "workload.num_requests=12",
                 "--set", "workload.rate=2.0", "--set", "policy.name='continuous'",
                 "--out", str(out), "--json"])
    assert code == 0, capsys.readouterr().err
    summary = json.loads(capsys.readouterr().out)[0]
    notes = summary["workload_notes"]
    assert f"workload.prompt and workload.output ignored: the trace {trace} supplies the " \
           "lengths" in notes
    req = pd.read_parquet(out / "requests.parquet").sort_values("request_id")
    assert req["prompt_tokens"].tolist() == TRACE["prompt_tokens"].tolist()
    assert req["output_tokens"].tolist() == TRACE["output_tokens"].tolist()


def test_trace_flag_replays_the_trace_at_its_own_times(  # type: ignore[no-untyped-def]
        tmp_path: Path, capsys, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    _trace(tmp_path)
    out = tmp_path / "o"
    code = main(["run", str(CHAT), "--trace", "t.csv", "--set", "policy.name='continuous'",
                 "--out", str(out), "--json"])
    assert code == 0, capsys.readouterr().err
    summary = json.loads(capsys.readouterr().out)
    assert len(summary) == 1  # chat's rate sweep is replaced by the trace's own arrivals
    req = pd.read_parquet(out / "requests.parquet").sort_values("request_id")
    assert req["arrival_s"].tolist() == TRACE["arrival_s"].tolist()  # 0, 0.5, ..., 5.5
    assert req["prompt_tokens"].tolist() == TRACE["prompt_tokens"].tolist()


def test_trace_flag_then_set_rate_rescales(tmp_path: Path, capsys,  # type: ignore[no-untyped-def]
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    _trace(tmp_path)
    code = main(["run", str(CHAT), "--trace", "t.csv", "--set", "policy.name='continuous'",
                 "--set", "workload.rate=4.0", "--out", str(tmp_path / "o"), "--json"])
    assert code == 0, capsys.readouterr().err
    notes = json.loads(capsys.readouterr().out)[0]["workload_notes"]
    assert "trace arrivals rescaled to a mean rate of 4.0 req/s" in notes


def test_trace_flag_with_lengths_only_keeps_the_scenarios_arrivals(  # type: ignore[no-untyped-def]
        tmp_path: Path, capsys, monkeypatch: pytest.MonkeyPatch) -> None:
    # a lengths-only CSV (sarathi's ShareGPT layout): before, arrival = 'trace' failed
    # ("has no arrival times"); now its lengths at chat's own rates
    monkeypatch.chdir(tmp_path)
    pd.DataFrame({"num_prefill_tokens": TRACE["prompt_tokens"],
                  "num_decode_tokens": TRACE["output_tokens"]}).to_csv("l.csv", index=False)
    out = tmp_path / "o"
    code = main(["run", str(CHAT), "--trace", "l.csv", "--set", "policy.name='continuous'",
                 "--set", "workload.rate=[2.0, 8.0]", "--out", str(out), "--json"])
    assert code == 0, capsys.readouterr().err
    summaries = json.loads(capsys.readouterr().out)
    assert [s["rate"] for s in summaries] == [2.0, 8.0]  # the rates still sweep
    req = pd.read_parquet(out / "requests.parquet")
    for point in (0, 1):
        mine = req[req["point"] == point].sort_values("request_id")
        assert mine["prompt_tokens"].tolist() == TRACE["prompt_tokens"].tolist()
        assert mine["arrival_s"].iloc[0] > 0  # Poisson draws, not the CSV (which has none)


def test_with_trace_keeps_arrivals_only_when_asked_and_the_trace_has_none(
        tmp_path: Path) -> None:
    lengths, timed = tmp_path / "l.csv", _trace(tmp_path)
    pd.DataFrame({"num_prefill_tokens": [5], "num_decode_tokens": [3]}).to_csv(lengths,
                                                                              index=False)
    raw = {"workload": {"arrival": "poisson", "rate": 3.0, "prompt": {"mean": 9},
                        "num_requests": 50}}
    kept = with_trace(raw, lengths, own_arrivals=True)["workload"]
    assert kept == {"arrival": "poisson", "rate": 3.0, "trace": str(lengths.resolve())}
    for trace, own in ((lengths, False), (timed, True)):  # validate's replays; a timed trace
        assert with_trace(raw, trace, own_arrivals=own)["workload"] == {
            "arrival": "trace", "trace": str(trace.resolve())}


def test_trace_dist_without_path_says_what_works() -> None:
    with pytest.raises(ConfigError) as info:
        WorkloadConfig.from_dict({"prompt": {"dist": "trace", "column": "prompt"}})
    text = str(info.value)
    assert "workload.prompt.path is required with dist = \"trace\"" in text
    assert "path = \"t.csv\"" in text and "set workload.trace instead" in text
    assert "= None" not in text


def test_trace_beats_lengths_in_the_config(tmp_path: Path) -> None:
    trace = _trace(tmp_path)
    cfg = WorkloadConfig.from_dict({"trace": "t.csv", "arrival": "trace",
                                    "prompt": {"dist": "fixed", "tokens": 5}},
                                   base_dir=tmp_path)
    assert cfg.ignored == ("prompt",)
    built = build_requests(cfg, np.random.default_rng(0), None)
    assert built.table["prompt_tokens"].tolist() == TRACE["prompt_tokens"].tolist()
    assert f"workload.prompt ignored: the trace {trace} supplies the lengths" in built.notes


def _model_dir(folder: Path) -> Path:
    folder.mkdir(parents=True)
    (folder / "config.json").write_text(json.dumps({
        "num_hidden_layers": 2, "hidden_size": 64, "num_attention_heads": 4,
        "num_key_value_heads": 2, "intermediate_size": 128, "vocab_size": 1000,
        "max_position_embeddings": 2048}))
    return folder


def test_relative_model_path_is_taken_from_the_scenario_folder(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _model_dir(tmp_path / "a" / "mini")
    (tmp_path / "a" / "s.toml").write_text('[model]\nname = "mini"\n')
    elsewhere = tmp_path / "b"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)  # the current directory has no "mini"
    dep = resolve(load_scenario(tmp_path / "a" / "s.toml"))
    assert (dep.model.num_layers, dep.model.hidden_size) == (2, 64)


def test_a_missing_model_path_says_where_it_looked(tmp_path: Path) -> None:
    (tmp_path / "s.toml").write_text('[model]\nname = "models/nope"\n')
    sc = Scenario.from_dict(load_scenario(tmp_path / "s.toml"))
    with pytest.raises(ConfigError) as info:
        sc.model_spec()
    text = str(info.value)
    assert f"model.name = 'models/nope' is not a known model, and {tmp_path / 'models/nope'} " \
           "does not exist (a relative path is taken from the scenario's folder)" in text
