"""simulator/measured/ on small hand-written files: each format's fields, failures, warm-up,
the records and summary it converts to, and the format sniffing. Every number can be
checked by reading the file written in the test."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from simulator.errors import ConfigError
from simulator.measured import load_measured, load_measured_runs


def _ms(v: float) -> dict:
    return {"value": v, "unit": "ms"}


def _aiperf(start_ns: int, phase: str = "profiling", error: dict | None = None) -> dict:
    rec = {"metadata": {"request_start_ns": start_ns, "benchmark_phase": phase},
           "metrics": {"time_to_first_token": _ms(100.0), "request_latency": _ms(160.0),
                       "inter_chunk_latency": {"value": [20.0, 40.0], "unit": "ms"},
                       "input_sequence_length": {"value": 10, "unit": "tokens"},
                       "output_sequence_length": {"value": 3, "unit": "tokens"},
                       "usage_prompt_tokens": {"value": 11, "unit": "tokens"},
                       "usage_completion_tokens": {"value": 3, "unit": "tokens"}}}
    if error:
        rec["error"], rec["metrics"] = error, {}
    return rec


def test_aiperf_warmup_left_out_and_errors_failed(tmp_path: Path) -> None:
    path = tmp_path / "profile_export.jsonl"
    lines = [_aiperf(1_000_000_000, "warmup"), _aiperf(5_000_000_000),
             _aiperf(5_500_000_000, error={"code": 500, "message": "boom"})]
    path.write_text("\n".join(json.dumps(x) for x in lines) + "\n")
    run = load_measured(path)
    r = run.requests
    assert len(r) == 2 and any("1 warm-up request(s) left out" in n for n in run.notes)
    assert r["arrival_s"].tolist() == [0.0, 0.5]  # from the first profiling send
    assert r["status"].tolist() == ["finished", "failed"] and r["reason"][1] == "boom"
    assert r.loc[0, ["prompt_tokens", "ttft_s", "e2e_s"]].tolist() == pytest.approx(
        [11, 0.1, 0.16])  # the server's usage count (11), not AIPerf's (10)
    rec = run.records()
    assert rec["status"].tolist() == ["finished", "rejected"] and rec["reason"][1] == "boom"
    assert rec.loc[0, "first_token_s"] == pytest.approx(0.1) and math.isnan(
        rec.loc[0, "scheduled_s"])
    s = run.summary()
    assert s["completed"] == 1 and s["num_rejected"] == 1
    assert s["mean_itl_ms"] == pytest.approx(30.0) and s["mean_tpot_ms"] == pytest.approx(30.0)


def _guidellm(tmp_path: Path) -> Path:
    ok = {"request_start_time": 100.0, "time_to_first_token_ms": 100.0,
          "inter_token_latency_ms": 20.0, "prompt_tokens": 50, "output_tokens": 5,
          "info": {"timings": {}}}
    late = {**ok, "request_start_time": 100.25, "info": {"timings": {
        "last_token_iteration": 100.75}}}
    bad = {"request_start_time": 100.5, "prompt_tokens": 50, "output_tokens": None,
           "info": {"error": "HTTP 500"}}
    data = {"metadata": {"guidellm_version": "0.8.1"}, "benchmarks": [{"requests": {
        "successful": [late, ok], "errored": [bad], "incomplete": []}}]}
    path = tmp_path / "benchmarks.json"
    path.write_text(json.dumps(data))
    return path


def test_guidellm_fields_and_fallbacks(tmp_path: Path) -> None:
    run = load_measured(_guidellm(tmp_path))
    r = run.requests
    assert r["arrival_s"].tolist() == [0.0, 0.25, 0.5]  # sorted by send time
    # no last-token time: E2E = TTFT + mean ITL x (5 - 1) = 0.1 + 0.08
    assert r["e2e_s"].tolist() == pytest.approx([0.18, 0.5, math.nan], nan_ok=True)
    assert r["status"].tolist() == ["finished", "finished", "failed"]
    assert r["reason"][2] == "HTTP 500" and r["output_tokens"][2] == 0
    s = run.summary()
    assert s["mean_itl_ms"] is None and s["completed"] == 2
    assert s["mean_e2el_ms"] == pytest.approx(340.0)


def test_vllm_bench_through_the_loader(tmp_path: Path) -> None:
    path = tmp_path / "bench.json"
    path.write_text(json.dumps({
        "input_lens": [10, 20], "output_lens": [3, 2], "ttfts": [0.1, 0.2],
        "itls": [[0.01, 0.03], [0.05]], "errors": ["", ""], "request_rate": "inf"}))
    run = load_measured(path)
    assert run.format == "vllm_bench" and run.arrivals_known  # a burst: all sent at 0
    assert run.requests["e2e_s"].tolist() == pytest.approx([0.14, 0.25])
    assert run.gaps_s[0].tolist() == [0.01, 0.03]
    assert run.summary()["mean_itl_ms"] == pytest.approx(30.0)  # (10 + 30 + 50) / 3


def test_servesim_folder_through_the_loader(tmp_path: Path) -> None:
    pd.DataFrame({"request_id": [0, 1], "arrival_s": [0.0, 1.0], "scheduled_s": [0.0, 1.0],
                  "first_token_s": [0.2, 1.5], "finish_s": [0.4, np.nan],
                  "prompt_tokens": [5, 6], "output_tokens": [3, 4], "preemptions": [0, 0],
                  "replica": [0, 0], "status": ["finished", "in_flight"],
                  "reason": ["", ""], "point": [0, 0]}).to_parquet(tmp_path / "requests.parquet")
    pd.DataFrame({"request_id": [0, 0, 0], "token_index": [0, 1, 2], "time_s": [0.2, 0.25, 0.4],
                  "point": [0, 0, 0]}).to_parquet(tmp_path / "tokens.parquet")
    (tmp_path / "summary.json").write_text(json.dumps([{"completed": 1, "policy": "dynamic"}]))
    run = load_measured(tmp_path)
    assert run.requests["ttft_s"][0] == pytest.approx(0.2)
    assert run.requests["status"].tolist() == ["finished", "failed"]
    assert run.requests["reason"][1] == "in_flight"
    assert run.gaps_s[0].tolist() == pytest.approx([0.05, 0.15])
    assert run.policy == "dynamic" and run.summary() == {"completed": 1, "policy": "dynamic"}


@pytest.mark.parametrize(("text", "match"), [
    ('{"hello": 1}', "not a measured run servesim knows"),
    ('{"a": 1}\n{"b": 2}\n', "not AIPerf records"),
    ('{"aiperf_version": "0.13.0"}', "pass the records file"),
    ('{"metadata": {"guidellm_version": "0.8.1"}, "benchmarks": [{}]}',
     r"benchmarks\[0\].requests is missing"),
])
def test_unknown_or_damaged_files_are_named(tmp_path: Path, text: str, match: str) -> None:
    path = tmp_path / "x.json"
    path.write_text(text)
    with pytest.raises(ConfigError, match=match):
        load_measured_runs(path)


def test_a_bad_value_names_its_line_and_field(tmp_path: Path) -> None:
    rec = _aiperf(1)
    rec["metrics"]["time_to_first_token"] = {"value": -3, "unit": "ms"}
    path = tmp_path / "p.jsonl"
    path.write_text(json.dumps(_aiperf(0)) + "\n" + json.dumps(rec) + "\n")
    with pytest.raises(ConfigError, match=r"line 2: metrics.time_to_first_token.value = -3"):
        load_measured(path)


@pytest.mark.parametrize(("where", "value", "match"), [
    # JSON integers have no size limit: math.isfinite raised OverflowError on this one
    ("ttft", 10**400, r"line 2: metrics.time_to_first_token.value = 1000.*and at most 2\*\*53"),
    ("ttft", 1e20, r"line 2: metrics.time_to_first_token.value = 1e\+20: expected a number >= 0 "
                   r"and at most 2\*\*53"),
    ("metrics", [1, 2], r"line 2: metrics = \[1, 2\]: expected an object"),
])
def test_aiperf_out_of_range_or_misshapen_values_are_named(
        tmp_path: Path, where: str, value: object, match: str) -> None:
    rec = _aiperf(1)
    if where == "metrics":
        rec["metrics"] = value
    else:
        rec["metrics"]["time_to_first_token"] = {"value": value, "unit": "ms"}
    path = tmp_path / "p.jsonl"
    path.write_text(json.dumps(_aiperf(0)) + "\n" + json.dumps(rec) + "\n")
    with pytest.raises(ConfigError, match=match):
        load_measured(path)


@pytest.mark.parametrize(("field", "value", "match"), [
    ("output_lens", [3, 10**20], r"output_lens\[1\] = 100000000000000000000: too large"),
    ("itls", [[0.01, 1e300], [0.05]], r"itls\[0\]\[1\] = 1e\+300: too large"),
    ("request_rate", 10**400, r"b.json: request_rate = 1000.*: expected a number > 0 or inf"),
    ("burstiness", "abc", r"b.json: burstiness = 'abc': expected a number > 0"),
    ("burstiness", -1, r"b.json: burstiness = -1: expected a number > 0"),
])
def test_vllm_bench_out_of_range_values_are_named(
        tmp_path: Path, field: str, value: object, match: str) -> None:
    data = {"input_lens": [10, 20], "output_lens": [3, 2], "ttfts": [0.1, 0.2],
            "itls": [[0.01, 0.03], [0.05]], "errors": ["", ""], "request_rate": 4.0,
            "duration": 1.0}
    data[field] = value
    path = tmp_path / "b.json"
    path.write_text(json.dumps(data))
    with pytest.raises(ConfigError, match=match):
        load_measured(path)


def test_vllm_bench_infinite_rate_spellings_are_a_burst(tmp_path: Path) -> None:
    path = tmp_path / "b.json"
    for rate in ("inf", "Infinity", None, math.inf):  # json writes math.inf as Infinity
        path.write_text(json.dumps({"input_lens": [10], "output_lens": [3], "ttfts": [0.1],
                                    "itls": [[0.01, 0.03]], "errors": [""],
                                    "request_rate": rate}))
        run = load_measured(path)
        assert run.arrivals_known and run.requests["arrival_s"].tolist() == [0.0]


def test_measured_files_with_a_byte_order_mark(tmp_path: Path) -> None:
    path = tmp_path / "p.jsonl"
    path.write_bytes(b"\xef\xbb\xbf" + (json.dumps(_aiperf(0)) + "\n").encode())
    run = load_measured(path)
    assert run.format == "aiperf" and run.requests["ttft_s"].tolist() == [0.1]


def test_a_finished_request_without_lengths_is_named(tmp_path: Path) -> None:
    # before: the replay's own table refused it, naming out/measured/replay-0.parquet
    rec = _aiperf(1)
    rec["metrics"]["usage_prompt_tokens"] = {"value": 0, "unit": "tokens"}
    path = tmp_path / "p.jsonl"
    path.write_text(json.dumps(_aiperf(0)) + "\n" + json.dumps(rec) + "\n")
    with pytest.raises(ConfigError, match=r"p.jsonl line 2: a finished request of 0 prompt "
                                          r"and 3 output tokens"):
        load_measured(path)
    failed = _aiperf(1, error={"message": "boom"})  # a failed one has no lengths to replay
    path.write_text(json.dumps(_aiperf(0)) + "\n" + json.dumps(failed) + "\n")
    assert load_measured(path).requests["status"].tolist() == ["finished", "failed"]


@pytest.mark.parametrize(("edit", "match"), [
    (lambda ok: ok.update(info=[1]), r"successful\[1\].info = \[1\]: expected an object"),
    (lambda ok: ok["info"].update(timings="x"), r"successful\[1\].info.timings = 'x'"),
    (lambda ok: ok.update(prompt_tokens=None), r"successful\[1\]: a finished request of 0 "
                                               r"prompt and 5 output tokens"),
])
def test_guidellm_misshapen_request_is_named(tmp_path: Path, edit, match: str) -> None:
    path = _guidellm(tmp_path)
    data = json.loads(path.read_text())
    edit(data["benchmarks"][0]["requests"]["successful"][1])
    path.write_text(json.dumps(data))
    with pytest.raises(ConfigError, match=match):  # before: AttributeError, or the replay's
        load_measured(path)
