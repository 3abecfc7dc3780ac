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
from dashboard.logic.run import simulate
from dashboard.logic.scenario_form import (
    Knobs,
    apply_knobs,
    collapse,
    knobs_from_point,
    load_shipped,
)
from dashboard.logic.validation import comparison, load_measured, verdict
from simulator.costs.profile import PROFILES_DIR, shipped_profiles
from simulator.fingerprint import this_machine
from simulator.profile_cache import cached_profile_path

PROFILE = PROFILES_DIR / "h100-sxm__llama-3.1-8b__bf16__tp1.json"


def _chat_knobs() -> Knobs:
    """The form as chat.toml fills it (chunked, rate 10): what tests start from."""
    return knobs_from_point(collapse(load_shipped("chat")))


@pytest.fixture(scope="module")
def point():
    return apply_knobs(collapse(load_shipped("chat")), replace(_chat_knobs(), num_requests=200))


def _records(point, slowdown: float, tmp_path, name="measured.csv"):
    slowed = {**point, "cost": {"time_scale": slowdown}}
    path = tmp_path / name
    simulate(slowed).requests.to_csv(path, index=False)
    return path


def _rows(table: pd.DataFrame) -> pd.DataFrame:
    return table.set_index(["metric", "statistic"])


def test_records_against_themselves_are_all_ok(point, tmp_path):
    measured = load_measured(_records(point, 1.0, tmp_path))
    assert measured.kind == "records" and len(measured.table) == 200
    table = comparison(measured, simulate(point).summary, "chunked")
    # records carry no per-token times: no ITL rows; queue is measured (scheduled_s)
    assert set(table["metric"]) == {"queue", "ttft", "tpot", "e2el", "throughput"}
    assert len(table) == 4 * 4 + 2 and table["ok"].all()
    assert np.allclose(table["relative_error"], 0.0)
    assert verdict(table).startswith("18/18 figures within tolerance.")


def test_injected_slowdown_misses_with_validate_tolerances(point, tmp_path):
    measured = load_measured(_records(point, 1.5, tmp_path))
    table = _rows(comparison(measured, simulate(point).summary, "chunked"))
    # steps 1.5x slower: simulated TPOT is at least 1 - 1/1.5 = 33% low, far outside 5%
    assert table.loc[("tpot", "mean"), "relative_error"] < -0.30
    assert table.loc[("tpot", "mean"), "tolerance"] == 0.05
    assert not table.loc[("tpot", "mean"), "ok"]
    assert table.loc[("tpot", "p99"), "tolerance"] == 0.10
    assert "Worst:" in verdict(table.reset_index())


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
    assert m.summary["mean_ttft_ms"] == pytest.approx(150) and m.summary["mean_queue_ms"] is None
    with pytest.raises(ValueError, match=r"itls\[1\]\[0\] = 'x'"):
        load_measured(_bench(tmp_path, itls=[[0.01], ["x"], []]))


def test_vllm_bench_empty_completions_are_requests(tmp_path):
    """Issue 11 item 4: completed = 10, no errors, three empty completions: ten requests."""
    data = {"completed": 10, "duration": 2.0, "input_lens": [50] * 10,
            "output_lens": [3, 0, 3, 0, 3, 1, 3, 0, 3, 3], "errors": [""] * 10,
            "ttfts": [0.1] * 10, "itls": [[0.02, 0.02] if o == 3 else [] for o in
                                           [3, 0, 3, 0, 3, 1, 3, 0, 3, 3]]}
    path = tmp_path / "ten.json"
    path.write_text(json.dumps(data))
    m = load_measured(path)
    assert len(m.table) == 10 and m.table["output_tokens"].tolist() == [3, 1, 3, 1, 3, 1,
                                                                        3, 1, 3, 3]
    assert len(m.samples["ttft"][0]) == 10 and len(m.samples["tpot"][0]) == 6
    assert len(m.samples["itl"][0]) == 12  # six requests x two gaps; none for 0/1 tokens
    assert m.summary["request_throughput"] == pytest.approx(5.0)  # 10 completed / 2 s
    assert m.rate == pytest.approx(5.0)


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
    with pytest.raises(ValueError, match=r"prof.csv: missing column"):
        read_profile_table(path)
    _, cost = profile_cost(PROFILE)
    bad = synthetic_table(cost)
    bad.loc[3, "time_s"] = -1.0
    bad.to_csv(path, index=False)
    with pytest.raises(ValueError, match=r"prof.csv: line 5: time_s=-1.0 must be"):
        read_profile_table(path)


def test_profile_table_in_milliseconds_is_flagged(tmp_path):
    _, cost = profile_cost(PROFILE)
    table = synthetic_table(cost, scale=1.0, noise=0.0)
    path = tmp_path / "ms.csv"
    table.assign(time_s=table["time_s"] * 1000).to_csv(path, index=False)
    steps, warning = read_profile_table(path)
    assert len(steps) == 14 and "ms.csv: time_s looks like milliseconds" in warning
    table.to_csv(path, index=False)
    assert read_profile_table(path)[1] is None


pytest.importorskip("streamlit")
from dashboard_support import array, axis_titles, figures, page, trace_names  # noqa: E402


def _errors(at) -> pd.DataFrame:
    return at.dataframe[0].value.set_index(["metric", "statistic"])


def test_validation_page_demo_shows_the_slowdown():
    at = page("validation").run()
    assert not at.exception, at.exception
    rows = _errors(at)
    assert rows.loc[("tpot", "mean"), "relative_error"] < -0.15  # steps 1.3x slower
    assert rows.loc[("tpot", "mean"), "ok"] == "MISS" and "tolerance" in rows.columns
    assert any("figures within tolerance" in m.value for m in at.markdown)
    # validate-cpu runs on the CPU, which the GPU list cannot show: not offered (it crashed)
    assert "validate-cpu" not in at.selectbox(key="val_scenario").options
    fig = figures(at)["Measured vs simulated CDFs"]
    assert {"measured TTFT", "simulated TTFT", "measured TPOT", "simulated TPOT"} <= set(
        trace_names(fig))
    assert all(axis_titles(fig))


def test_validation_page_uploads(point, tmp_path):
    at = page("validation").run()
    data = _records(point, 1.0, tmp_path).read_bytes()
    at.file_uploader(key="measured_file").set_value(("same.csv", data, "text/csv")).run()
    assert not at.exception and not at.error
    assert abs(_errors(at).loc[("tpot", "mean"), "relative_error"]) < 0.01
    at.file_uploader(key="measured_file").set_value(
        ("bench.json", _bench(tmp_path).read_bytes(), "application/json")).run()
    assert not at.exception and ("itl", "p99") in _errors(at).index
    assert at.number_input(key="val_rate").value == 4.0
    bad = b"request_id,arrival_s,first_token_s,finish_s,prompt_tokens,output_tokens\n0,x,1,2,3,4\n"
    at.file_uploader(key="measured_file").set_value(("bad.csv", bad, "text/csv")).run()
    assert not at.exception
    assert "bad.csv line 2: arrival_s = 'x'" in " ".join(e.value for e in at.error)
    at.selectbox(key="val_gpu").set_value("h200").run()  # the page keeps answering
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
    assert "bad.csv: missing column" in " ".join(e.value for e in at.error)
    at.selectbox(key="profile").set_value("h200__llama-3.1-8b__bf16__tp1.json").run()
    assert not at.exception
