"""vLLM bench results: a request is failed only where the file says so (issue 11, item 4).

vLLM writes ``output_lens`` 0 both for a failed request and for one whose completion text
is empty; only the ``errors`` list tells them apart. Every count below can be checked by
reading the hand-written files.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from calibrate.run_records import read_runs
from simulator.errors import TraceError
from simulator.workload.traces_json import bench_latencies, load_vllm_bench, load_vllm_bench_result

# ten requests, all completed (completed = 10, no errors); three have empty completions
TEN = {
    "completed": 10, "request_rate": "inf", "max_concurrency": None,
    "input_lens": [100, 110, 120, 130, 140, 150, 160, 170, 180, 190],
    "output_lens": [5, 0, 4, 0, 3, 1, 2, 0, 6, 7],
    "errors": [""] * 10,
    "ttfts": [0.10, 0.05, 0.12, 0.06, 0.11, 0.07, 0.09, 0.04, 0.13, 0.14],
    "itls": [[0.02] * 4, [], [0.02] * 3, [], [0.02] * 2, [], [0.02], [], [0.02] * 5,
             [0.02] * 6],
}


def _write(tmp_path: Path, data: dict, name: str = "bench.json") -> Path:
    path = tmp_path / name
    path.write_text(json.dumps(data))
    return path


def test_empty_completions_are_completed_requests(tmp_path: Path) -> None:
    t = load_vllm_bench(_write(tmp_path, TEN))
    assert len(t.table) == 10 and t.dropped == {}
    # the three empty completions ran prefill and the one token that ended them
    assert t.table["output_tokens"].tolist() == [5, 1, 4, 1, 3, 1, 2, 1, 6, 7]
    assert any("3 completed request(s) have an empty completion" in n for n in t.notes)


def test_only_the_errors_list_marks_failures(tmp_path: Path) -> None:
    data = {**TEN, "completed": 8, "errors": [""] * 3 + ["timeout"] + [""] * 5 + ["reset"]}
    t = load_vllm_bench(_write(tmp_path, data))
    assert t.dropped == {"failed_request": 2} and len(t.table) == 8
    # rows 1 and 7 are empty completions (kept, 1 token); rows 3 and 9 failed
    assert t.table["prompt_tokens"].tolist() == [100, 110, 120, 140, 150, 160, 170, 180]
    assert t.table["output_tokens"].tolist() == [5, 1, 4, 3, 1, 2, 1, 6]


def test_without_errors_zero_output_fails_only_when_completed_says_so(tmp_path: Path) -> None:
    data = {k: v for k, v in TEN.items() if k != "errors"}
    assert len(load_vllm_bench(_write(tmp_path, data)).table) == 10
    fewer = load_vllm_bench(_write(tmp_path, {**data, "completed": 7}, "fewer.json"))
    assert fewer.dropped == {"failed_request": 3} and len(fewer.table) == 7
    with pytest.raises(TraceError, match=r"bench.json: errors has 2 entries"):
        load_vllm_bench(_write(tmp_path, {**TEN, "errors": ["", ""]}))


def test_latencies_of_kept_rows(tmp_path: Path) -> None:
    path = _write(tmp_path, TEN)
    _, data, rows = load_vllm_bench_result(path)
    first, gaps = bench_latencies(data, rows, path)
    assert first.tolist() == TEN["ttfts"]
    assert [len(g) for g in gaps] == [4, 0, 3, 0, 2, 0, 1, 0, 5, 6]  # no ITL for 0/1 tokens
    bad = {**TEN, "itls": [[0.02], ["x"]] + TEN["itls"][2:]}
    path = _write(tmp_path, bad, "bad.json")
    _, data, rows = load_vllm_bench_result(path)
    with pytest.raises(TraceError, match=r"bad.json: field itls\[1\]\[0\] = 'x'"):
        bench_latencies(data, rows, path)


def test_calibrate_from_run_keeps_all_ten(tmp_path: Path) -> None:
    (run,) = read_runs(_write(tmp_path, TEN))
    assert len(run.requests) == 10
    assert np.isnan(run.tpot_s[1]) and run.e2e_s[1] == pytest.approx(0.05)  # TTFT only
    assert run.tpot_s[0] == pytest.approx(0.02)  # 4 gaps of 20 ms over 5 - 1 tokens
