"""Dashboard logic without streamlit: scenario form, TOML out, run shaping, uploads."""

from __future__ import annotations

import io
import json
import tomllib
from dataclasses import replace

import numpy as np
import pandas as pd
import pytest

from dashboard.logic.form_fields import carried_fields, form_problems
from dashboard.logic.run import cdf, requests_parquet, simulate, step_series, summary_json
from dashboard.logic.scenario_form import (
    Knobs,
    apply_knobs,
    collapse,
    knobs_from_point,
    load_shipped,
    shipped_scenarios,
    sweep_note,
)
from dashboard.logic.toml_out import to_toml
from dashboard.logic.uploads import MAX_UPLOAD_BYTES, UploadError, check_size, save_upload
from simulator.deployment import resolve
from simulator.scenario import check_structure, expand_sweep, load_scenario


def _chat_knobs() -> Knobs:
    """The form as chat.toml fills it (chunked, rate 10): what tests start from."""
    return knobs_from_point(collapse(load_shipped("chat")))


def test_collapse_takes_middle_and_prefers_chunked():
    point = collapse(load_shipped("chat"))
    assert point["policy"]["name"] == "chunked"
    assert point["workload"]["rate"] == 10.0
    assert len(expand_sweep(point)) == 1
    assert sweep_note(load_shipped("chat"), "chat.toml") == (
        "chat.toml is a sweep; the explorer runs one point of it: policy.name = 'chunked', "
        "workload.rate = 10.0")
    assert sweep_note(point, "one.toml") is None


@pytest.mark.parametrize("name", list(shipped_scenarios()))
def test_every_shipped_scenario_round_trips_through_the_form(name):
    point = collapse(load_shipped(name))
    knobs = knobs_from_point(point)
    assert knobs.num_requests <= 600
    resolve(apply_knobs(point, knobs))


def test_chunked_knobs_take_the_policy_subtable():
    knobs = knobs_from_point(collapse(load_shipped("chat")))
    assert knobs.max_num_batched_tokens == 2048  # [policy.chunked], not the shared 16384
    assert knobs.batch_size == 16


KNOBS = {"static": {"batch_size": 12}, "dynamic": {"max_batch_size": 20, "max_wait_s": 0.25},
         "continuous": {"max_num_seqs": 100, "max_num_batched_tokens": 4096},
         "chunked": {"max_num_seqs": 100, "max_num_batched_tokens": 1024}}


@pytest.mark.parametrize("policy", ["static", "dynamic", "continuous", "chunked"])
def test_the_policy_knobs_the_form_shows_are_the_ones_that_run(policy):
    point = apply_knobs(collapse(load_shipped("chat")),
                        replace(_chat_knobs(), policy=policy, **KNOBS[policy]))
    dep = resolve(point)
    assert dep.policy_name == policy
    for knob, value in KNOBS[policy].items():
        assert getattr(dep.policy, knob) == value
    # chat.toml's [policy.chunked] subtable is carried (written into when chunked runs)
    assert isinstance(point["policy"]["chunked"], dict)


def test_issue_scenario_rate_3_continuous_trace_round_trips(tmp_path):
    """Issue 11 item 5: rate 3, continuous, a trace: the form shows them and runs them."""
    (tmp_path / "t.csv").write_text("request_id,arrival_s,prompt_tokens,output_tokens\n"
                                    + "".join(f"{i},{i * 0.5},{100 + i},{10}\n"
                                              for i in range(20)))
    (tmp_path / "s.toml").write_text(
        '[workload]\narrival = "poisson"\nrate = 3.0\ntrace = "t.csv"\nnum_requests = 20\n'
        '[policy]\nname = "continuous"\n[kv]\nblock_size = 32\n')
    point = collapse(load_scenario(tmp_path / "s.toml"))
    knobs = knobs_from_point(point)
    assert (knobs.rate, knobs.policy, knobs.trace) == (3.0, "continuous", "t.csv")
    ran = apply_knobs(point, knobs)
    wl = ran["workload"]
    assert (wl["rate"], wl["trace"], wl["arrival"]) == (3.0, "t.csv", "poisson")
    assert "prompt" not in wl and "output" not in wl  # the trace gives the lengths
    assert ran["kv"] == {"block_size": 32}
    text = to_toml(ran)
    assert tomllib.loads(text) == {k: v for k, v in ran.items() if not k.startswith("_")}
    out = simulate(ran)
    assert len(out.requests) == 20 and out.requests["prompt_tokens"].max() == 119


def test_fields_the_form_does_not_show_are_carried_and_listed():
    point = collapse(load_shipped("chat"))
    point["kv"] = {"block_size": 32}
    point["workload"] |= {"context_rule": "drop"}
    point["policy"]["continuous"] = {"chunked_prefill": True, "max_num_seqs": 64}
    point["slo"]["e2el_ms"] = 9000
    ran = apply_knobs(point, knobs_from_point(point))
    assert ran["kv"] == {"block_size": 32} and ran["workload"]["context_rule"] == "drop"
    assert ran["policy"]["continuous"] == {"chunked_prefill": True, "max_num_seqs": 64}
    assert ran["slo"]["e2el_ms"] == 9000
    # chunked runs: [policy.continuous] is not on the form while another policy is chosen
    assert set(carried_fields(point)) == {
        "seed", "kv.block_size", "workload.context_rule", "policy.continuous.chunked_prefill",
        "policy.continuous.max_num_seqs", "slo.e2el_ms"}
    cont = knobs_from_point({**point, "policy": {**point["policy"], "name": "continuous"}})
    assert cont.max_num_seqs == 64  # the subtable wins, as in resolve
    ran = apply_knobs(point, replace(cont, max_num_seqs=48))
    assert ran["policy"]["continuous"]["max_num_seqs"] == 48 and resolve(
        ran | {"policy": {**ran["policy"], "name": "continuous"}}).policy.max_num_seqs == 48


def test_values_no_widget_can_hold_are_named():
    point = collapse(load_shipped("chat"))
    point["hardware"] = {"gpu": "cpu", "tp": 3}
    point["workload"] |= {"rate": 0.0}
    point["policy"]["chunked"] = {"max_num_seqs": "256"}
    point["workload"]["prompt"] = {"dist": "lognormal", "mean": 0.5, "sigma": 1.0}
    problems = " | ".join(form_problems(point))
    for text in ("hardware.gpu = 'cpu'", "hardware.tp = 3",
                 "workload.rate = 0.0: must be a number > 0 (req/s)",
                 "policy.chunked.max_num_seqs = '256': must be an integer",
                 "workload.prompt.mean = 0.5"):
        assert text in problems
    assert form_problems(collapse(load_shipped("chat"))) == []


def test_absent_fields_take_the_simulators_defaults():
    knobs = knobs_from_point({"workload": {"arrival": "poisson"}})
    assert knobs.policy == "continuous" and knobs.max_num_batched_tokens == 8192
    assert knobs.rate == 1.0
    assert resolve(apply_knobs({}, knobs)).policy.max_num_batched_tokens == 8192


def test_closed_loop_and_gamma_tables():
    closed = apply_knobs({}, replace(_chat_knobs(), arrival="closed", concurrency=8))["workload"]
    assert closed["concurrency"] == 8 and "rate" not in closed
    gamma = apply_knobs({}, replace(_chat_knobs(), arrival="gamma", cv=2.0))["workload"]
    assert gamma["cv"] == 2.0 and gamma["rate"] == 10.0
    replay = apply_knobs({}, replace(_chat_knobs(), arrival="trace", trace="t.csv",
                                     rescale_trace=False))["workload"]
    assert "rate" not in replay and replay["trace"] == "t.csv"  # the trace's own times


def test_toml_round_trip():
    raw = load_shipped("chat")
    text = to_toml(raw)
    back = tomllib.loads(text)
    check_structure(back, "round trip")
    assert back == {k: v for k, v in raw.items() if not k.startswith("_")}
    assert "[policy.chunked]" in text


def test_cdf_is_monotone_weighted_and_thinned():
    x, y = cdf(np.arange(10_000.0), max_points=100)
    assert len(x) <= 100 and y[-1] == 1.0 and np.all(np.diff(x) >= 0) and np.all(np.diff(y) >= 0)
    x, y = cdf(np.array([1.0, 2.0]), np.array([3.0, 1.0]))
    assert list(y) == [0.75, 1.0]
    assert cdf(np.array([]))[0].size == 0


def test_step_series_sums_replicas_and_scales_kv():
    steps = pd.DataFrame({
        "end_s": [1.0, 1.0, 2.0, 2.0], "queue_len": [1, 2, 3, 4], "num_running": [5, 5, 6, 6],
        "kv_blocks_used": [10, 30, 20, 40], "replica": [0, 1, 0, 1]})
    s = step_series(steps, kv_blocks=100, bins=2)
    assert list(s["queue_len"]) == [3, 7] and list(s["num_running"]) == [10, 12]
    assert list(s["kv_usage_pct"]) == [20.0, 30.0]


def test_simulate_and_exports():
    point = apply_knobs(collapse(load_shipped("chat")), replace(_chat_knobs(), num_requests=50))
    out = simulate(point)
    assert len(out.requests) == 50 and {"ttft_ms", "tpot_ms", "e2el_ms"} <= set(out.requests)
    assert json.loads(summary_json(out))["completed"] == 50
    assert len(pd.read_parquet(io.BytesIO(requests_parquet(out)))) == 50


def test_uploads(tmp_path):
    with pytest.raises(UploadError, match="big.csv.*upload limit"):
        check_size("big.csv", MAX_UPLOAD_BYTES + 1)
    p = save_upload("../we ird.csv", b"a,b\n", tmp_path)
    assert p.name == "we_ird.csv" and p.parent.parent == tmp_path and p.read_bytes() == b"a,b\n"
    assert save_upload("../we ird.csv", b"a,b\n", tmp_path) == p


def test_dashboard_subcommand_parses_and_checks_the_port(capsys):
    from servesim.cli import build_parser, main
    from servesim.dashboard_command import streamlit_args

    args = build_parser().parse_args(["dashboard", "--port", "9000"])
    assert args.command == "dashboard" and args.port == 9000
    cmd = streamlit_args(9000)
    assert cmd[cmd.index("--server.address") + 1] == "127.0.0.1" and "9000" in cmd
    assert main(["dashboard", "--port", "0"]) == 2
    assert "--port 0" in capsys.readouterr().err


def test_attention_dp_round_trips_through_the_form() -> None:
    point = load_scenario("scenarios/moe-attention-dp.toml")
    one = expand_sweep(point)[0][1]
    k = knobs_from_point(one)
    assert (k.tp, k.attention_dp) == (1, 4)
    assert apply_knobs(one, k)["hardware"] == {"gpu": "h200", "tp": 1, "attention_dp": 4}
    # back to tensor parallel: the scenario's ranks are overwritten, not kept
    tp4 = apply_knobs(one, replace(k, tp=4, attention_dp=1))["hardware"]
    assert tp4 == {"gpu": "h200", "tp": 4, "attention_dp": 1}
    assert resolve(apply_knobs(one, k)).gpus == 4
    # a dense scenario gets no attention_dp field
    chat = expand_sweep(load_scenario("scenarios/chat.toml"))[0][1]
    assert "attention_dp" not in apply_knobs(chat, knobs_from_point(chat))["hardware"]
