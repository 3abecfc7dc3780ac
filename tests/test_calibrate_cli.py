"""``servesim calibrate`` end to end on a synthetic profile table."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from calibrate_support import TRUE, synthetic_steps

from servesim.cli import main
from simulator.costs import load_profile
from simulator.profile_table import ProfileTable, write_profile_table

pytest.importorskip("matplotlib", reason="the residual plot needs the calibrate extra")


def test_calibrate_writes_json_and_png_and_prints_mape(tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    table = tmp_path / "profile.parquet"
    meta = {"device": "cpu", "model": "tiny", "dtype": "fp32", "tp": 1, "threads": 1}
    write_profile_table(ProfileTable(synthetic_steps(), meta), table)
    out = tmp_path / "fit" / "cost.json"
    assert main(["calibrate", str(table), "--out", str(out)]) == 0
    text = capsys.readouterr().out
    assert "cpu / tiny / fp32 / tp 1" in text and "mean APE" in text and "max APE" in text
    assert "piecewise form, held-out" in text and "knees:" in text
    profile = load_profile(out)
    assert (profile.hardware, profile.model, profile.kv_dtype) == ("cpu", "tiny", "bf16")
    assert profile.fit["mape"] < 0.03
    # mixed steps are in the table; batch-1 decode steps are not, so their cost is set by rule
    assert list(profile.fit["unmeasured"]) == ["single_token_step_s"]
    assert "note: single_token_step_s not measured" in text
    # linear data: every fixed cost is the one intercept
    assert profile.coefficients["decode_step_s"] == pytest.approx(TRUE["step_s"], rel=0.05)
    assert "servesim calibrate" in profile.provenance["notes"]
    png = out.with_suffix(".residuals.png")
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert json.loads(out.read_text())["form"] == "piecewise"


def test_form_linear_flag(tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    table = tmp_path / "profile.parquet"
    meta = {"device": "cpu", "model": "tiny", "dtype": "fp32", "tp": 1}
    write_profile_table(ProfileTable(synthetic_steps(), meta), table)
    out = tmp_path / "cost.json"
    assert main(["calibrate", str(table), "--out", str(out), "--form", "linear",
                 "--no-plot"]) == 0
    assert "linear form, held-out" in capsys.readouterr().out
    profile = load_profile(out)
    assert profile.form == "linear" and profile.fit["mape"] < 0.03
    assert profile.coefficients["decode_seq_s"] == pytest.approx(TRUE["decode_seq_s"], rel=0.05)


def test_flags_override_metadata_and_missing_metadata_is_named(tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    table = tmp_path / "plain.parquet"
    synthetic_steps().to_parquet(table)
    out = tmp_path / "c.json"
    assert main(["calibrate", str(table), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert "does not say hardware, model, weight_dtype; pass --hardware, --model, --dtype" in err
    argv = ["calibrate", str(table), "--out", str(out), "--hardware", "h100-sxm",
            "--model", "llama-3.1-8b", "--dtype", "bf16", "--tp", "2", "--no-plot"]
    assert main(argv) == 0
    p = load_profile(out)
    assert (p.hardware, p.model, p.weight_dtype, p.tp) == ("h100-sxm", "llama-3.1-8b", "bf16", 2)
    assert not out.with_suffix(".residuals.png").exists()


def test_bad_table_is_a_clean_error(tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    assert main(["calibrate", str(tmp_path / "nope.parquet"), "--out", "x.json"]) == 2
    assert "cannot read profile table" in capsys.readouterr().err


def test_metadata_tp_null_asks_for_the_flag(tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    meta = {"device": "h100-sxm", "model": "llama-3.1-8b", "dtype": "bf16", "tp": None}
    table = tmp_path / "t.parquet"
    write_profile_table(ProfileTable(synthetic_steps(), meta), table)
    assert main(["calibrate", str(table), "--out", str(tmp_path / "c.json"), "--no-plot"]) == 2
    # before: KeyError 'tp' (the flags named for missing fields lacked it)
    assert "does not say tp; pass --tp" in capsys.readouterr().err


@pytest.mark.parametrize(("field", "value", "flag"), [
    ("model", True, "--model"), ("dtype", ["bf16"], "--dtype"), ("device", 3.5, "--hardware"),
])
def test_metadata_that_is_no_string_names_the_table(tmp_path: Path, capsys, field: str,  # type: ignore[no-untyped-def]
                                                     value: object, flag: str) -> None:
    meta = {"device": "h100-sxm", "model": "llama-3.1-8b", "dtype": "bf16", "tp": 1,
            field: value}
    table = tmp_path / "t.parquet"
    write_profile_table(ProfileTable(synthetic_steps(), meta), table)
    assert main(["calibrate", str(table), "--out", str(tmp_path / "c.json"), "--no-plot"]) == 2
    # before: "model=True must be a non-empty string", naming neither file nor flag
    assert f"t.parquet: metadata {field}={value!r} must be a string (or pass {flag})" in \
        capsys.readouterr().err
