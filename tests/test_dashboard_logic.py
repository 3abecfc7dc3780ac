"""Dashboard logic without streamlit: scenario form, TOML out, run shaping, uploads."""

from __future__ import annotations

import io
import json
import tomllib
from dataclasses import replace

import numpy as np
import pandas as pd
import pytest

from dashboard.logic.run import cdf, requests_parquet, simulate, step_series, summary_json
from dashboard.logic.scenario_form import (
    Knobs,
    apply_knobs,
    collapse,
    knobs_from_point,
    load_shipped,
    shipped_scenarios,
)
from dashboard.logic.toml_out import to_toml
from dashboard.logic.uploads import MAX_UPLOAD_BYTES, UploadError, check_size, save_upload
from simulator.deployment import resolve
from simulator.scenario import check_structure, expand_sweep


def test_collapse_takes_middle_and_prefers_chunked():
    point = collapse(load_shipped("chat"))
    assert point["policy"]["name"] == "chunked"
    assert point["workload"]["rate"] == 10.0
    assert len(expand_sweep(point)) == 1


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


@pytest.mark.parametrize("policy", ["static", "dynamic", "continuous", "chunked"])
def test_apply_knobs_writes_only_the_policys_knobs(policy):
    point = apply_knobs(collapse(load_shipped("chat")), replace(Knobs(), policy=policy))
    assert point["policy"]["name"] == policy
    assert not any(isinstance(v, dict) for v in point["policy"].values())
    assert resolve(point).policy_name == policy


def test_closed_loop_and_gamma_tables():
    closed = apply_knobs({}, replace(Knobs(), arrival="closed", concurrency=8))["workload"]
    assert closed["concurrency"] == 8 and "rate" not in closed
    gamma = apply_knobs({}, replace(Knobs(), arrival="gamma", cv=2.0))["workload"]
    assert gamma["cv"] == 2.0 and gamma["rate"] == 10.0


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
    point = apply_knobs(collapse(load_shipped("chat")), replace(Knobs(), num_requests=50))
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
