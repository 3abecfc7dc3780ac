"""Validation and calibration: logic on generated data, and both pages under AppTest."""

from __future__ import annotations

import io
import json
from dataclasses import replace

import numpy as np
import pandas as pd
import pytest

from dashboard.logic.calibration import (
    cached_table,
    decode_surface,
    fit_quality,
    predict,
    profile_cost,
    provenance_table,
    read_profile_table,
    synthetic_table,
)
from dashboard.logic.run import latency_samples, simulate
from dashboard.logic.scenario_form import Knobs, apply_knobs, collapse, load_shipped
from dashboard.logic.validation import error_table, load_measured, worst_offender
from simulator.costs.profile import PROFILES_DIR, shipped_profiles
from simulator.fingerprint import this_machine
from simulator.profile_cache import cached_profile_path

PROFILE = PROFILES_DIR / "h100-sxm__llama-3.1-8b__bf16__tp1.json"


@pytest.fixture(scope="module")
def point():
    return apply_knobs(collapse(load_shipped("chat")), replace(Knobs(), num_requests=200))


def _records(point, slowdown: float, tmp_path, name="measured.csv"):
    slowed = {**point, "cost": {"time_scale": slowdown}}
    path = tmp_path / name
    simulate(slowed).requests.to_csv(path, index=False)
    return path


def test_records_against_themselves_have_no_error(point, tmp_path):
    measured = load_measured(_records(point, 1.0, tmp_path))
    assert measured.kind == "records" and len(measured.table) == 200
    sim = simulate(point)
    table = error_table(measured.samples, latency_samples(sim.requests, sim.steps))
    assert set(table["metric"]) == {"TTFT", "TPOT", "E2EL"}  # records carry no ITL
    assert np.allclose(table["error_pct"], 0.0)


def test_injected_slowdown_shows_in_the_error_table(point, tmp_path):
    measured = load_measured(_records(point, 1.5, tmp_path))
    sim = simulate(point)
    table = error_table(measured.samples, latency_samples(sim.requests, sim.steps)).set_index(
        ["metric", "stat"])
    # steps 1.5x slower: simulated TPOT is at least 1 - 1/1.5 = 33% low
    assert table.loc[("TPOT", "mean"), "error_pct"] < -30
    assert "Worst:" in worst_offender(table.reset_index())


def test_bad_records_name_file_line_and_column(tmp_path):
    path = tmp_path / "run.csv"
    path.write_text("request_id,arrival_s,first_token_s,finish_s,prompt_tokens,output_tokens\n"
                    "0,0.0,0.1,1.0,10,5\n1,0.5,oops,2.0,10,5\n")
    with pytest.raises(ValueError, match=r"run.csv line 3: first_token_s = 'oops'"):
        load_measured(path)
    (tmp_path / "short.csv").write_text("request_id,arrival_s\n0,0\n")
    with pytest.raises(ValueError, match="short.csv: request records lack columns"):
        load_measured(tmp_path / "short.csv")


def _bench(tmp_path, itls=None):
    data = {"request_rate": 4.0, "input_lens": [100, 200, 300], "output_lens": [3, 1, 0],
            "ttfts": [0.1, 0.2, 0.3], "itls": itls or [[0.01, 0.03], [], []],
            "errors": ["", "", "timeout"]}
    path = tmp_path / "bench.json"
    path.write_text(json.dumps(data))
    return path


def test_vllm_bench_result(tmp_path):
    m = load_measured(_bench(tmp_path))
    assert m.kind == "vllm_bench" and m.rate == 4.0 and len(m.table) == 2  # failed one dropped
    assert m.table["arrival_s"].isna().all()
    assert list(m.samples["ttft"][0]) == pytest.approx([100, 200])
    assert list(m.samples["tpot"][0]) == pytest.approx([20.0])  # 40 ms over 2 gaps
    assert list(m.samples["itl"][0]) == pytest.approx([10, 30])
    assert list(m.samples["e2el"][0]) == pytest.approx([140, 200])
    with pytest.raises(ValueError, match="entry 1"):
        load_measured(_bench(tmp_path, itls=[[0.01], ["x"], []]))


def test_provenance_lists_every_shipped_profile():
    table = provenance_table()
    assert len(table) == len(shipped_profiles()) and table["source"].str.len().min() > 0
    tiny = table.set_index("file").loc["cpu__tiny__fp32__tp1.json"]
    assert tiny["measured_on"].startswith("AMD EPYC") and tiny["this_machine"]  # says which
    assert table.set_index("file").loc["h100-sxm__llama-3.1-8b__bf16__tp1.json",
                                       "measured_on"] == ""  # composed: no machine


def test_the_cache_table_lists_profiles_measured_here(tmp_path, monkeypatch):
    monkeypatch.setenv("SERVESIM_PROFILE_CACHE", str(tmp_path))
    assert len(cached_table()) == 0
    here = this_machine("cpu", 1)
    data = json.loads((PROFILES_DIR / "cpu__tiny__fp32__tp1.json").read_text())
    data["provenance"]["fingerprint"] = here
    path = cached_profile_path(here, "cpu", "tiny", "fp32", 1)
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps(data))
    table = cached_table()
    assert table["path"].tolist() == [str(path)]
    assert table["this_machine"].iloc[0].startswith("fingerprint matches this machine")


def test_profile_table_residuals_and_quality():
    _, cost = profile_cost(PROFILE)
    scored = predict(cost, synthetic_table(cost, scale=1.1, noise=0.0))
    assert np.allclose(scored["residual_pct"], 10.0)
    q = fit_quality(scored)
    assert q["mape_pct"] == pytest.approx(100 / 11) and q["n_points"] == 14
    surface = decode_surface(cost, np.array([1, 8, 64]), np.array([512, 4096]))
    assert surface.shape == (2, 3) and np.all(np.diff(surface, axis=1) > 0)


def test_bad_profile_table(tmp_path):
    path = tmp_path / "prof.csv"
    path.write_text("phase,num_prefill_tokens\nprefill,10\n")
    with pytest.raises(ValueError, match=r"prof.csv: profile table lacks columns"):
        read_profile_table(path)
    _, cost = profile_cost(PROFILE)
    bad = synthetic_table(cost)
    bad.loc[3, "time_s"] = -1.0
    bad.to_csv(path, index=False)
    with pytest.raises(ValueError, match=r"prof.csv line 5: time_s = -1.0 must be a number > 0"):
        read_profile_table(path)


pytest.importorskip("streamlit")
from dashboard_support import array, axis_titles, figures, page, trace_names  # noqa: E402


def _errors(at) -> pd.DataFrame:
    return at.dataframe[0].value.set_index(["metric", "stat"])


def test_validation_page_demo_shows_the_slowdown():
    at = page("validation").run()
    assert not at.exception, at.exception
    assert _errors(at).loc[("TPOT", "mean"), "error_pct"] < -15
    fig = figures(at)["Measured vs simulated CDFs"]
    assert {"measured TTFT", "simulated TTFT", "measured TPOT", "simulated TPOT"} <= set(
        trace_names(fig))
    assert all(axis_titles(fig))


def test_validation_page_uploads(point, tmp_path):
    at = page("validation").run()
    data = _records(point, 1.0, tmp_path).read_bytes()
    at.file_uploader(key="measured_file").set_value(("same.csv", data, "text/csv")).run()
    assert not at.exception and not at.error
    assert abs(_errors(at).loc[("TPOT", "mean"), "error_pct"]) < 1
    at.file_uploader(key="measured_file").set_value(
        ("bench.json", _bench(tmp_path).read_bytes(), "application/json")).run()
    assert not at.exception and ("ITL", "P99") in _errors(at).index
    assert at.number_input(key="rate").value == 4.0
    bad = b"request_id,arrival_s,first_token_s,finish_s,prompt_tokens,output_tokens\n0,x,1,2,3,4\n"
    at.file_uploader(key="measured_file").set_value(("bad.csv", bad, "text/csv")).run()
    assert not at.exception
    assert "bad.csv line 2: arrival_s = 'x'" in " ".join(e.value for e in at.error)
    at.selectbox(key="gpu").set_value("h200").run()  # the page keeps answering
    assert not at.exception


def test_calibration_page_surface_and_uploaded_table():
    at = page("calibration").run()
    assert not at.exception, at.exception
    figs = figures(at)
    assert trace_names(figs["Measured vs predicted"]) == ["decode", "prefill", "y = x"]
    assert all(all(axis_titles(spec)) for spec in figs.values())
    _, cost = profile_cost(PROFILE)
    buf = io.BytesIO()
    synthetic_table(cost, scale=1.25, noise=0.0).to_parquet(buf)
    at.file_uploader(key="profile_table").set_value(("mine.parquet", buf.getvalue(),
                                                     "application/octet-stream")).run()
    assert not at.exception and not at.error
    residuals = np.concatenate([array(t["y"]) for t in figures(at)["Residuals"]["data"]])
    assert np.allclose(residuals, 25.0)
    assert at.metric[0].value == "20.0 %"  # |1/1.25 - 1| as MAPE of predictions
    at.file_uploader(key="profile_table").set_value(("bad.csv", b"phase\nx\n", "text/csv")).run()
    assert "bad.csv: profile table lacks columns" in " ".join(e.value for e in at.error)
    at.selectbox(key="profile").set_value("h200__llama-3.1-8b__bf16__tp1.json").run()
    assert not at.exception
