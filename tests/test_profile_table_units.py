"""Profile tables: step times in milliseconds are flagged; CSV tables name their line.

Issue 11 ("calibrate accepts step times in milliseconds without a warning").
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
from calibrate_support import synthetic_steps

from servesim.cli import main
from simulator.errors import ConfigError
from simulator.profile_table import (
    ProfileTable,
    millisecond_warning,
    read_profile_table,
    write_profile_table,
)

META = {"device": "cpu", "model": "tiny", "dtype": "fp32", "tp": 1}
# three decode steps of 1, 2 and 4 sequences, then one 8-token prefill
FEW = pd.DataFrame({"phase": ["decode", "decode", "decode", "prefill"],
                    "num_prefill_tokens": [0, 0, 0, 8], "num_decode_seqs": [1, 2, 4, 0],
                    "prefill_attn_work": [0.0, 0.0, 0.0, 32.0],
                    "decode_context_tokens": [10, 20, 40, 0], "batch_size": [1, 2, 4, 1],
                    "time_s": [6.0, 7.0, 9.0, 8.0]})


def test_few_token_steps_of_seconds_read_as_milliseconds() -> None:
    msg = millisecond_warning(FEW, "p.parquet")
    # median of 6, 7, 8, 9 s = 7.5 s for steps of at most 16 tokens
    assert msg is not None and "p.parquet: time_s looks like milliseconds" in msg
    assert "7.5 s (4 such rows)" in msg and "divide time_s by 1000" in msg
    assert millisecond_warning(FEW.assign(time_s=FEW["time_s"] / 1000), "p.parquet") is None


def test_calibrate_warns_on_milliseconds(tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    steps = synthetic_steps()
    table = tmp_path / "ms.parquet"
    write_profile_table(ProfileTable(steps.assign(time_s=steps["time_s"] * 1000), META), table)
    out = tmp_path / "cost.json"
    assert main(["calibrate", str(table), "--out", str(out), "--no-plot"]) == 0
    assert "servesim: warning: " in capsys.readouterr().err
    write_profile_table(ProfileTable(steps, META), table)
    assert main(["calibrate", str(table), "--out", str(out), "--no-plot"]) == 0
    assert "warning" not in capsys.readouterr().err


def test_csv_profile_table_names_file_and_line(tmp_path: Path) -> None:
    path = tmp_path / "prof.csv"
    FEW.to_csv(path, index=False)
    assert len(read_profile_table(path).steps) == 4
    FEW.assign(time_s=[0.01, 0.02, -1.0, 0.03]).to_csv(path, index=False)
    with pytest.raises(ConfigError, match=r"prof.csv: line 4: time_s=-1.0 must be"):
        read_profile_table(path)
    (tmp_path / "bad.parquet").write_bytes(b"PAR1 not really PAR1")
    with pytest.raises(ConfigError, match=r"bad.parquet: cannot read profile table"):
        read_profile_table(tmp_path / "bad.parquet")
