"""The profile table (data contract 2): round trip with metadata, errors name row and column."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pyarrow.parquet as pq
import pytest
from calibrate_support import synthetic_steps

from simulator.errors import ConfigError
from simulator.profile_table import (
    PROFILE_TABLE_VERSION,
    ProfileTable,
    read_profile_table,
    validate_profile_table,
    write_profile_table,
)

META = {"device": "cpu", "model": "tiny", "dtype": "fp32", "tp": 1, "threads": 1,
        "engine_version": "servesim-engine 0.1.0", "torch_version": "2.13.0"}


def test_round_trip_keeps_rows_and_metadata(tmp_path: Path) -> None:
    steps = synthetic_steps(n=50)
    path = tmp_path / "profile.parquet"
    write_profile_table(ProfileTable(steps=steps, metadata=META), path)
    back = read_profile_table(path)
    assert back.metadata == META and len(back.steps) == 50
    pd.testing.assert_frame_equal(back.steps, validate_profile_table(steps))
    assert [p.name for p in tmp_path.iterdir()] == ["profile.parquet"]  # no temp file left
    assert len(back.shapes()) == 50


def test_optional_columns_default_to_zero() -> None:
    steps = synthetic_steps(n=5).drop(columns=["num_admitted", "num_finished"])
    out = validate_profile_table(steps)
    assert (out["num_admitted"] == 0).all() and (out["num_finished"] == 0).all()


@pytest.mark.parametrize(
    ("column", "value", "message"),
    [
        ("time_s", -0.5, r"t\.parquet: row 3: time_s=-0.5 must be a finite number >= 0"),
        ("time_s", 0.0, r"row 3: time_s=0.0 must be > 0"),
        ("phase", "warmup", r"row 3: phase='warmup' must be one of"),
        ("num_decode_seqs", 2.5, r"row 3: num_decode_seqs=2.5 must be an integer >= 0"),
        ("batch_size", "many", r"row 3: batch_size='many' must be an integer"),
        ("prefill_attn_work", float("nan"), r"row 3: prefill_attn_work=nan must be a finite"),
    ],
)
def test_bad_value_names_row_column_and_value(column: str, value: object, message: str) -> None:
    steps = synthetic_steps(n=8).astype({column: object})
    steps.at[3, column] = value
    with pytest.raises(ConfigError, match=message):
        validate_profile_table(steps, "t.parquet")


def test_phase_must_agree_with_shape() -> None:
    steps = synthetic_steps(n=20)
    row = int((steps["phase"] == "decode").to_numpy().argmax())
    steps.at[row, "num_prefill_tokens"] = 7
    with pytest.raises(ConfigError, match=rf"row {row}: num_prefill_tokens=7 must be 0 in a "
                                          "decode row"):
        validate_profile_table(steps)


def test_missing_column_and_bad_metadata(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"missing column\(s\) \['time_s'\]"):
        validate_profile_table(synthetic_steps(n=3).drop(columns=["time_s"]))
    with pytest.raises(ConfigError, match=r"metadata tp=0 must be an int >= 1"):
        write_profile_table(ProfileTable(synthetic_steps(n=3), {"tp": 0}), tmp_path / "p.parquet")
    with pytest.raises(ConfigError, match=r"unknown metadata key\(s\) \['gpu'\]"):
        write_profile_table(ProfileTable(synthetic_steps(n=3), {"gpu": 1}), tmp_path / "p.parquet")


def test_plain_parquet_reads_with_empty_metadata_and_version_is_checked(tmp_path: Path) -> None:
    synthetic_steps(n=5).to_parquet(tmp_path / "plain.parquet")
    assert read_profile_table(tmp_path / "plain.parquet").metadata == {}
    path = tmp_path / "p.parquet"
    write_profile_table(ProfileTable(synthetic_steps(n=5), META), path)
    arrow = pq.read_table(path)
    blob = arrow.schema.metadata[b"servesim.profile_table"].replace(
        f'"version": {PROFILE_TABLE_VERSION}'.encode(), b'"version": 99')
    pq.write_table(arrow.replace_schema_metadata({b"servesim.profile_table": blob}), path)
    with pytest.raises(ConfigError, match=r"profile table version=99"):
        read_profile_table(path)
