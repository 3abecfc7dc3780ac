"""Trace loaders on small hand-made fixtures: exact values, drop counts, errors."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from simulator.errors import TraceError
from simulator.workload import (
    TRACE_FORMATS,
    detect_format,
    load_azure,
    load_burstgpt,
    load_generic,
    load_lengths_csv,
    load_mooncake,
    load_trace,
    load_vllm_bench,
)

FIX = Path(__file__).parent / "fixtures" / "workload"


def test_azure_2023_seven_fractional_digits() -> None:
    t = load_azure(FIX / "azure_2023.csv")
    assert t.format == "azure" and t.dropped == {}
    assert t.table["request_id"].tolist() == [0, 1, 2]
    # 18:15:50.9951690 - 18:15:46.6805900 and 18:15:51.2224671 - 18:15:46.6805900
    np.testing.assert_allclose(t.table["arrival_s"], [0.0, 4.314579, 4.5418771], atol=1e-9)
    assert t.table["prompt_tokens"].tolist() == [374, 396, 879]
    assert t.table["output_tokens"].tolist() == [44, 109, 55]
    assert t.table["arrival_s"].dtype == np.float64
    assert t.table["prompt_tokens"].dtype == np.int64


def test_azure_2024_with_time_zone() -> None:
    t = load_azure(FIX / "azure_2024.csv")
    # 00:00:00.5 - 00:00:00.009930 and 00:00:02 - 00:00:00.009930
    np.testing.assert_allclose(t.table["arrival_s"], [0.0, 0.49007, 1.99007], atol=1e-9)
    assert any("time zone" in n for n in t.notes)


def test_burstgpt_1_drops_zero_token_rows_by_reason() -> None:
    t = load_burstgpt(FIX / "burstgpt1.csv")
    assert t.dropped == {"failed_request": 1, "zero_prompt_tokens": 1, "zero_output_tokens": 1}
    assert t.table["arrival_s"].tolist() == [0.0, 40.0, 113.0]  # 45 - 5, 118 - 5
    assert t.table["prompt_tokens"].tolist() == [472, 1087, 417]
    assert t.table["output_tokens"].tolist() == [18, 230, 276]


def test_burstgpt_3_layout_read_by_name_and_sorted_stably() -> None:
    t = load_burstgpt(FIX / "burstgpt3.csv")
    assert t.table["arrival_s"].tolist() == [0.0, 40.0, 51.0, 51.0]
    assert t.table["prompt_tokens"].tolist() == [906, 1779, 36, 10]  # ties keep file order
    assert t.table["request_id"].tolist() == [0, 1, 2, 3]
    assert any("sorted" in n for n in t.notes)


def test_mooncake_ms_and_prefix_groups() -> None:
    t = load_mooncake(FIX / "mooncake.jsonl")
    tab = t.table
    assert tab["arrival_s"].tolist() == [0.0, 0.0, 1.5, 2.75, 3.0]
    assert tab["prefix_group"].tolist() == [0, -1, 0, 0, 0]
    # shared leading ids with an earlier request of the group: none, -, [0,1], [0,1], [0,1,2]
    # the fourth is capped at input_length - 1 = 1023
    assert tab["prefix_tokens"].tolist() == [0, 0, 1024, 1023, 1536]


def test_vllm_bench_drops_failures_and_has_no_arrivals() -> None:
    t = load_vllm_bench(FIX / "vllm_bench.json")
    assert t.dropped == {"failed_request": 1}
    assert t.table["prompt_tokens"].tolist() == [128, 512, 64]
    assert t.table["output_tokens"].tolist() == [32, 16, 8]
    assert t.table["arrival_s"].isna().all()
    assert any("synthesise" in n for n in t.notes)
    assert any("request_rate = 4.0" in n for n in t.notes)


def test_lengths_csv_has_nan_arrivals() -> None:
    t = load_lengths_csv(FIX / "lengths.csv")
    assert t.table["prompt_tokens"].tolist() == [74, 290, 1402]
    assert t.table["output_tokens"].tolist() == [918, 905, 711]
    assert t.table["arrival_s"].isna().all()


def test_generic_keeps_ids_and_optional_columns() -> None:
    t = load_generic(FIX / "generic.csv")
    assert t.table["request_id"].tolist() == [10, 11, 12]
    assert t.table["prefix_group"].tolist() == [-1, 3, 3]
    assert t.table["priority"].tolist() == [0, 1, 0]


@pytest.mark.parametrize(
    "name, fmt",
    [
        ("azure_2023.csv", "azure"),
        ("azure_2024.csv", "azure"),
        ("burstgpt1.csv", "burstgpt"),
        ("burstgpt3.csv", "burstgpt"),
        ("mooncake.jsonl", "mooncake"),
        ("vllm_bench.json", "vllm_bench"),
        ("lengths.csv", "lengths_csv"),
        ("generic.csv", "generic"),
    ],
)
def test_auto_detection(name: str, fmt: str) -> None:
    assert detect_format(FIX / name) == fmt
    assert load_trace(FIX / name).format == fmt


@pytest.mark.parametrize(
    "name, fragments",
    [
        ("azure_bad.csv", ["azure_bad.csv line 3", "TIMESTAMP", "25:99:00"]),
        ("burstgpt_bad.csv", ["burstgpt_bad.csv line 4", "Request tokens", "'abc'"]),
        ("mooncake_bad.jsonl", ["mooncake_bad.jsonl line 3", "'output_length'", "missing"]),
        ("vllm_bench_bad.json", ["vllm_bench_bad.json", "output_lens[2]", "-5"]),
        ("lengths_bad.csv", ["lengths_bad.csv line 3", "num_decode_tokens", "-7"]),
        ("generic_bad.csv", ["generic_bad.csv line 3", "prompt_tokens", "= 0"]),
    ],
)
def test_malformed_files_name_file_line_field_value(name: str, fragments: list[str]) -> None:
    with pytest.raises(TraceError) as info:
        load_trace(FIX / name)
    for fragment in fragments:
        assert fragment in str(info.value), str(info.value)


def test_blank_line_in_csv_is_a_missing_field_on_its_line(tmp_path: Path) -> None:
    p = tmp_path / "t.csv"
    p.write_text("num_prefill_tokens,num_decode_tokens\n1,2\n\n3,4\n\n\n")
    with pytest.raises(TraceError, match=r"t.csv line 3: num_prefill_tokens .* missing"):
        load_lengths_csv(p)


def test_missing_column_and_bad_json(tmp_path: Path) -> None:
    p = tmp_path / "a.csv"
    p.write_text("TIMESTAMP,ContextTokens\n2023-11-16 18:15:46.6805900,3\n")
    with pytest.raises(TraceError, match=r"a.csv line 1: missing column.*GeneratedTokens"):
        load_azure(p)
    j = tmp_path / "m.jsonl"
    j.write_text('{"timestamp": 0, "input_length": 5, "output_length": 1}\n{"timestamp": 1,\n')
    with pytest.raises(TraceError, match=r"m.jsonl line 2: not valid JSON"):
        load_mooncake(j)
    v = tmp_path / "v.json"
    v.write_text('{"completed": 3}')
    with pytest.raises(TraceError, match=r"input_lens.*--save-detailed"):
        load_vllm_bench(v)


def test_unknown_format_lists_known_ones(tmp_path: Path) -> None:
    p = tmp_path / "x.csv"
    p.write_text("foo,bar\n1,2\n")
    with pytest.raises(TraceError) as info:
        load_trace(p)
    assert all(fmt in str(info.value) for fmt in TRACE_FORMATS)
    with pytest.raises(TraceError, match="unknown; known formats"):
        load_trace(FIX / "lengths.csv", fmt="sharegpt")
    with pytest.raises(TraceError, match="no such file"):
        load_trace(tmp_path / "absent.csv")
