"""Traces through whole scenarios: a trace replayed, rescaled, and a malformed row refused."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pandas as pd
import pytest

from servesim.cli import main

FIXTURES = Path(__file__).parent / "fixtures" / "workload"
SHARED = Path(__file__).parents[1].parent / "shared" / "traces"


def _scenario(tmp_path: Path, trace: Path, extra: str = "") -> Path:
    shutil.copy(trace, tmp_path / trace.name)
    path = tmp_path / "s.toml"
    path.write_text(f"""
[model]
name = "llama-3.1-8b"
[policy]
name = "continuous"
[workload]
arrival = "trace"
trace = "{trace.name}"
{extra}
""")
    return path


def test_azure_trace_is_replayed_at_its_own_times(tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    out = tmp_path / "o"
    assert main(["run", str(_scenario(tmp_path, FIXTURES / "azure_2023.csv")), "--out",
                 str(out), "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    req = pd.read_parquet(out / "requests.parquet")
    source = pd.read_csv(FIXTURES / "azure_2023.csv")
    assert rows[0]["completed"] == len(source) == len(req)
    # second arrival = 18:15:50.9951690 - 18:15:46.6805900 = 4.314579 s (trace-relative)
    assert req["arrival_s"].iloc[1] == pytest.approx(4.314579, abs=1e-6)
    assert req["prompt_tokens"].tolist() == source["ContextTokens"].tolist()


def test_a_malformed_trace_row_names_file_line_and_field(tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    assert main(["run", str(_scenario(tmp_path, FIXTURES / "azure_bad.csv"))]) == 2
    err = capsys.readouterr().err
    assert "azure_bad.csv" in err and "line" in err


@pytest.mark.skipif(not SHARED.exists(), reason="../shared/traces absent (public trace samples)")
def test_burstgpt_sample_rescaled_to_a_target_rate(tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    scenario = _scenario(tmp_path, SHARED / "burstgpt1.head400.csv", "rate = 4.0")
    assert main(["run", str(scenario), "--out", str(tmp_path / "o"), "--json"]) == 0
    row = json.loads(capsys.readouterr().out)[0]
    assert row["workload_counts"]["dropped_trace"] == 17  # zero-token failures, counted
    req = pd.read_parquet(tmp_path / "o" / "requests.parquet")
    span = req["arrival_s"].max() - req["arrival_s"].min()
    assert (len(req) - 1) / span == pytest.approx(4.0, rel=1e-9)
