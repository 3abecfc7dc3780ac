"""The dashboard's Validation page reads client result files through simulator/measured/:
GuideLLM (no ITL) and AIPerf (ITL from chunk gaps), in the logic and in the page."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from dashboard_support import page

from dashboard.logic.validation import comparison, load_measured


def _guidellm(tmp_path: Path) -> Path:
    reqs = [{"request_start_time": 50.0 + 0.5 * k, "time_to_first_token_ms": 20.0 + k,
             "prompt_tokens": 40, "output_tokens": 5, "inter_token_latency_ms": 10.0,
             "info": {"timings": {"last_token_iteration": 50.0 + 0.5 * k + 0.1}}}
            for k in range(4)]
    path = tmp_path / "benchmarks.json"
    path.write_text(json.dumps({"metadata": {"guidellm_version": "0.8.1"}, "benchmarks": [
        {"requests": {"successful": reqs, "errored": [], "incomplete": []}}]}))
    return path


def _aiperf(tmp_path: Path) -> Path:
    lines = [json.dumps({"metadata": {"request_start_ns": 10**9 * k, "benchmark_phase":
                                      "profiling"},
                         "metrics": {"time_to_first_token": {"value": 30.0, "unit": "ms"},
                                     "request_latency": {"value": 90.0, "unit": "ms"},
                                     "inter_chunk_latency": {"value": [20.0, 40.0],
                                                             "unit": "ms"},
                                     "usage_prompt_tokens": {"value": 40, "unit": "tokens"},
                                     "usage_completion_tokens": {"value": 3,
                                                                 "unit": "tokens"}}})
             for k in range(3)]
    path = tmp_path / "profile_export.jsonl"
    path.write_text("\n".join(lines) + "\n")
    return path


def test_guidellm_upload_has_no_itl_samples(tmp_path: Path) -> None:
    m = load_measured(_guidellm(tmp_path))
    assert m.kind == "guidellm" and len(m.table) == 4 and "itl" not in m.samples
    assert m.table["arrival_s"].tolist() == [0.0, 0.5, 1.0, 1.5]
    assert m.rate == pytest.approx(2.0)  # 3 gaps over 1.5 s
    assert list(m.samples["ttft"][0]) == pytest.approx([20, 21, 22, 23])
    assert any("cannot give: ITL distribution" in n for n in m.notes)
    sim = {**m.summary, "mean_itl_ms": 5.0, "p99_itl_ms": 5.0}
    rows = comparison(m, sim, "continuous")
    assert "itl" not in set(rows["metric"]) and "ttft" in set(rows["metric"])


def test_aiperf_upload_has_chunk_gaps(tmp_path: Path) -> None:
    m = load_measured(_aiperf(tmp_path))
    assert m.kind == "aiperf" and list(m.samples["itl"][0]) == pytest.approx([20, 40] * 3)
    assert list(m.samples["tpot"][0]) == pytest.approx([30.0] * 3)  # (90 - 30) / 2
    assert m.summary["mean_itl_ms"] == pytest.approx(30.0)


def test_validation_page_takes_a_guidellm_upload(tmp_path: Path) -> None:
    at = page("validation").run()
    at.file_uploader(key="measured_file").set_value(
        ("benchmarks.json", _guidellm(tmp_path).read_bytes(), "application/json")).run()
    assert not at.exception and not at.error
    table = at.dataframe[0].value
    assert "ttft" in set(table["metric"]) and "itl" not in set(table["metric"])
