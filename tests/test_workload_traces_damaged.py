"""Damaged trace files are a TraceError (a ConfigError) naming the file, never a raw
pyarrow/gzip error (issue 11: "corrupt-Parquet trace errors do not name the file")."""

from __future__ import annotations

from pathlib import Path

import pytest

from simulator.errors import TraceError
from simulator.workload.traces import load_generic, load_trace

HEADER = "request_id,arrival_s,prompt_tokens,output_tokens\n"


@pytest.mark.parametrize(("name", "data", "says"), [
    ("bad.parquet", b"PAR1garbagegarbagePAR1", "not a readable Parquet file"),
    ("truncated.parquet", b"not parquet at all", "not a readable Parquet file"),
    ("bad.csv.gz", b"not gzip at all", "cannot read the trace (BadGzipFile"),
    ("bad2.csv.gz", b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\x03garbage", "cannot read the trace"),
])
def test_damaged_file_is_named(tmp_path: Path, name: str, data: bytes, says: str) -> None:
    path = tmp_path / name
    path.write_bytes(data)
    with pytest.raises(TraceError) as info:
        load_trace(path)
    assert isinstance(info.value, ValueError)  # the CLI prints it and exits 2
    assert str(info.value).startswith(f"{path}: ") and says in str(info.value)


def test_real_parquet_cut_short_is_named(tmp_path: Path) -> None:
    import pandas as pd

    good = tmp_path / "t.parquet"
    pd.DataFrame({"request_id": [0, 1], "arrival_s": [0.0, 1.0], "prompt_tokens": [5, 6],
                  "output_tokens": [2, 3]}).to_parquet(good)
    cut = tmp_path / "cut.parquet"
    cut.write_bytes(good.read_bytes()[:-30])
    with pytest.raises(TraceError, match=r"cut.parquet: not a readable Parquet file"):
        load_generic(cut)


def test_damaged_csv_names_file_and_line(tmp_path: Path) -> None:
    path = tmp_path / "t.csv"
    path.write_text(HEADER + "0,0.0,5,2\n1,0.5,6,3,99\n")
    with pytest.raises(TraceError, match=r"t.csv: cannot parse CSV: .*line 3"):
        load_trace(path)
    path.write_text(HEADER + "0,0.0,5,2\n1,0.5,oops,3\n")
    with pytest.raises(TraceError, match=r"t.csv line 3: prompt_tokens = 'oops'"):
        load_trace(path)


def test_cli_names_the_damaged_trace(tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    from helpers import tiny_cpu_scenario

    from servesim.cli import main

    (tmp_path / "t.parquet").write_bytes(b"PAR1garbagegarbagePAR1")
    scenario = tmp_path / "s.toml"
    scenario.write_text(tiny_cpu_scenario("s", 0, 'arrival = "trace"\ntrace = "t.parquet"\n'))
    assert main(["run", str(scenario), "--out", str(tmp_path / "out"), "--no-cache"]) == 2
    err = capsys.readouterr().err
    assert "t.parquet: not a readable Parquet file" in err and "Traceback" not in err


@pytest.mark.parametrize("value", ["99999999999999999999", "1e20", "-1e20"])
def test_csv_count_past_2_53_is_named_not_wrapped(tmp_path: Path, value: str) -> None:
    # past 2**63 the int64 cast wrapped: 1e20 read as a negative count ("must be >= 0")
    path = tmp_path / "t.csv"
    path.write_text(HEADER + "0,0.0,5,2\n" + f"1,1.0,{value},2\n")
    with pytest.raises(TraceError, match=r"t.csv line 3: prompt_tokens = \S+: too large"):
        load_trace(path)


@pytest.mark.parametrize(("value", "says"), [
    ("100000000000000000000", "too large"),  # an int past int64: numpy could not take it
    ("1e20", "too large"),  # a float past int64: the int64 column wrapped
    ("NaN", "must be a finite number >= 0"),
])
def test_mooncake_count_out_of_range_is_named(tmp_path: Path, value: str, says: str) -> None:
    path = tmp_path / "m.jsonl"
    path.write_text('{"timestamp": 0, "input_length": 10, "output_length": 2}\n'
                    f'{{"timestamp": 5, "input_length": {value}, "output_length": 2}}\n')
    with pytest.raises(TraceError, match=rf"m.jsonl line 2: field 'input_length' = .*{says}"):
        load_trace(path)


@pytest.mark.parametrize(("name", "text"), [
    ("m.jsonl", '{"timestamp": 0, "input_length": 10, "output_length": 2}\n'
                '{"timestamp": 5, "input_length": 7, "output_length": 3}\n'),
    ("b.json", '{"input_lens": [10, 7], "output_lens": [2, 3], "errors": ["", ""]}'),
    ("t.csv", HEADER + "0,0.0,10,2\n1,0.005,7,3\n"),
])
def test_a_byte_order_mark_is_read_past(tmp_path: Path, name: str, text: str) -> None:
    # Windows editors and Excel's "UTF-8" export start a file with a BOM; json.loads
    # refused it ("Unexpected UTF-8 BOM") where the CSV reader already took it
    path = tmp_path / name
    path.write_bytes(b"\xef\xbb\xbf" + text.encode())
    trace = load_trace(path)
    assert trace.table["prompt_tokens"].tolist() == [10, 7]
    assert trace.table["output_tokens"].tolist() == [2, 3]
