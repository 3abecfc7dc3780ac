"""The request table contract: validation, CSV/Parquet round trips, transformations."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simulator.errors import ConfigError, TraceError
from simulator.workload import (
    OPTIONAL_COLUMNS,
    REQUEST_TABLE_VERSION,
    REQUIRED_COLUMNS,
    fit_context,
    read_request_table,
    scale_to_rate,
    validate_request_table,
    with_arrivals,
    write_request_table,
)


def table(**extra: list) -> pd.DataFrame:
    cols = {
        "request_id": [0, 1, 2, 3],
        "arrival_s": [0.0, 1.0, 3.0, 7.0],
        "prompt_tokens": [100, 900, 50, 2000],
        "output_tokens": [10, 200, 1500, 30],
    }
    return pd.DataFrame({**cols, **extra})


def test_constants() -> None:
    assert REQUEST_TABLE_VERSION == 1
    assert REQUIRED_COLUMNS == ("request_id", "arrival_s", "prompt_tokens", "output_tokens")
    assert "prefix_group" in OPTIONAL_COLUMNS and "think_s" in OPTIONAL_COLUMNS


def test_validate_coerces_dtypes_and_orders_columns() -> None:
    raw = pd.DataFrame(
        {
            "priority": ["1", "2"],
            "output_tokens": [5.0, 6.0],
            "prompt_tokens": ["7", "8"],
            "arrival_s": [0, 2],
            "request_id": [3, 4],
        }
    )
    out = validate_request_table(raw, "mem")
    assert list(out.columns) == [*REQUIRED_COLUMNS, "priority"]
    assert out.dtypes.to_dict() == {
        "request_id": np.int64,
        "arrival_s": np.float64,
        "prompt_tokens": np.int64,
        "output_tokens": np.int64,
        "priority": np.int64,
    }


@pytest.mark.parametrize(
    "change, fragment",
    [
        ({"prompt_tokens": [1, 0, 1, 1]}, "mem row 2: prompt_tokens = 0: must be >= 1"),
        ({"output_tokens": [1, 2, 2.5, 1]}, "mem row 3: output_tokens = 2.5: must be a whole"),
        ({"request_id": [0, 1, 1, 2]}, "mem row 3: request_id = 1: duplicate"),
        ({"arrival_s": [0.0, 2.0, 1.0, 3.0]}, "mem row 3: arrival_s = 1.0: earlier than"),
        (
            {"arrival_s": [0.0, np.nan, 1.0, 3.0]},
            "mem row 2: arrival_s = nan: must be all NaN",
        ),
        ({"arrival_s": [-1.0, 0.0, 1.0, 3.0]}, "mem row 1: arrival_s = -1.0: must be >= 0"),
        ({"prompt_tokens": [1, "x", 1, 1]}, "mem row 2: prompt_tokens = 'x': not a number"),
        ({"prefix_tokens": [0, 900, 0, 0]}, "mem row 2: prefix_tokens = 900: must be <"),
        ({"client_id": [0, -1, 0, 0]}, "mem row 2: client_id = -1"),
        ({"colour": [0, 0, 0, 0]}, "unknown column(s) ['colour']"),
    ],
)
def test_validate_errors_name_row_column_value(change: dict, fragment: str) -> None:
    df = table()
    for col, values in change.items():
        df[col] = values
    with pytest.raises(TraceError) as info:
        validate_request_table(df, "mem")
    assert fragment in str(info.value)


def test_missing_required_column() -> None:
    with pytest.raises(TraceError, match=r"missing required column\(s\) \['output_tokens'\]"):
        validate_request_table(table().drop(columns="output_tokens"), "mem")


def test_all_nan_arrivals_allowed_for_closed_loop() -> None:
    out = validate_request_table(
        table(arrival_s=[np.nan] * 4, client_id=[0, 1, 0, 1], think_s=[0.0, 1.5, 0.0, 2.0]), "mem"
    )
    assert out["arrival_s"].isna().all()


@pytest.mark.parametrize("suffix", [".csv", ".parquet"])
def test_round_trip(tmp_path: Path, suffix: str) -> None:
    df = validate_request_table(
        table(prefix_group=[-1, 0, 0, -1], prefix_tokens=[0, 64, 32, 0]), "mem"
    )
    df["arrival_s"] = [0.0, 0.1 + 0.2, 1 / 3, 7.0]  # exact float round trip
    path = write_request_table(df, tmp_path / f"reqs{suffix}")
    pd.testing.assert_frame_equal(read_request_table(path), df)
    assert [p.name for p in tmp_path.iterdir()] == [f"reqs{suffix}"]  # no temp file left


def test_read_csv_error_names_line(tmp_path: Path) -> None:
    p = tmp_path / "r.csv"
    p.write_text("request_id,arrival_s,prompt_tokens,output_tokens\n0,0,5,5\n1,1,-5,5\n")
    with pytest.raises(TraceError, match=r"r.csv line 3: prompt_tokens = -5: must be >= 1"):
        read_request_table(p)
    with pytest.raises(TraceError, match="not '.txt'"):
        write_request_table(table(), tmp_path / "r.txt")


def test_scale_to_rate_exact() -> None:
    out = scale_to_rate(table(), 2.0)
    # 3 gaps over 7 s -> 3 gaps over 1.5 s: factor 1.5 / 7
    np.testing.assert_allclose(out["arrival_s"], np.array([0.0, 1.0, 3.0, 7.0]) * 1.5 / 7)
    arr = out["arrival_s"].to_numpy()
    assert (len(arr) - 1) / (arr[-1] - arr[0]) == pytest.approx(2.0, rel=1e-12)
    # 3 gaps over 3 s at 0.5 req/s -> 6 s: gaps doubled, first arrival kept
    shifted = scale_to_rate(table(arrival_s=[10.0, 11.0, 12.5, 13.0]), 0.5)
    assert shifted["arrival_s"].tolist() == [10.0, 12.0, 15.0, 16.0]
    with pytest.raises(ConfigError, match="same time"):
        scale_to_rate(table(arrival_s=[1.0] * 4), 1.0)
    with pytest.raises(ConfigError, match="rate_per_s = -1"):
        scale_to_rate(table(), -1)


def test_with_arrivals() -> None:
    out = with_arrivals(table(arrival_s=[np.nan] * 4), np.array([0.5, 0.5, 1.0, 2.0]))
    assert out["arrival_s"].tolist() == [0.5, 0.5, 1.0, 2.0]
    with pytest.raises(ConfigError, match="3 arrival times for 4 requests"):
        with_arrivals(table(), np.array([0.0, 1.0, 2.0]))
    with pytest.raises(TraceError, match="earlier than the previous row"):
        with_arrivals(table(), np.array([0.0, 2.0, 1.0, 3.0]))


def test_fit_context_truncate_by_hand() -> None:
    # max 1000: row0 110 fits; row1 900+200 -> prompt 800; row2 50+1500 (output >= max)
    # -> prompt 1, output 999; row3 2000+30 -> prompt 970
    out, counts = fit_context(table(prefix_tokens=[0, 850, 0, 0]), 1000, "truncate")
    assert out["prompt_tokens"].tolist() == [100, 800, 1, 970]
    assert out["output_tokens"].tolist() == [10, 200, 999, 30]
    assert out["prefix_tokens"].tolist() == [0, 799, 0, 0]
    assert counts == {"truncated": 3, "truncated_output": 1, "dropped_context": 0}
    assert out["request_id"].tolist() == [0, 1, 2, 3]


def test_fit_context_drop_by_hand() -> None:
    out, counts = fit_context(table(), 1100, "drop")
    assert out["request_id"].tolist() == [0, 1]  # 1100 fits exactly; 1550 and 2030 do not
    assert counts == {"truncated": 0, "truncated_output": 0, "dropped_context": 2}
    with pytest.raises(ConfigError, match="rule = 'cut'"):
        fit_context(table(), 1100, "cut")  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="max_context_tokens = 1"):
        fit_context(table(), 1)


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.tuples(st.integers(1, 5000), st.integers(1, 5000)), min_size=1, max_size=40),
    st.integers(2, 4000),
)
def test_fit_context_truncate_property(pairs: list[tuple[int, int]], limit: int) -> None:
    prompt, output = (np.array(x, dtype=np.int64) for x in zip(*pairs, strict=True))
    df = pd.DataFrame(
        {
            "request_id": np.arange(len(pairs)),
            "arrival_s": np.arange(len(pairs), dtype=float),
            "prompt_tokens": prompt,
            "output_tokens": output,
        }
    )
    out, counts = fit_context(df, limit, "truncate")
    total = out["prompt_tokens"] + out["output_tokens"]
    assert (total <= limit).all() and (out["prompt_tokens"] >= 1).all()
    fits = prompt + output <= limit
    assert counts["truncated"] == (~fits).sum()
    assert (out["output_tokens"][fits] == output[fits]).all()  # untouched when they fit
    assert (total[~fits] == limit).all()  # a truncated request fills the context exactly
    validate_request_table(out, "property")
