"""The 2024 TensorRT engines' all-reduce rule, priced from AIConfigurator's tables
(calibrate/aic_allreduce_era.py). The rule and the table curve are checked by hand without
the tables; pricing one step needs the ``aiconfigurator`` extra and is skipped without it.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from calibrate import aiconfigurator as aic
from calibrate.aic_allreduce_era import (
    NcclTable,
    era_allreduce_ms,
    main,
    plugin_strategy,
    rows,
)
from calibrate.aic_tables import SystemTables, allreduce_curve_ms
from simulator.errors import ConfigError
from simulator.specs import get_model

ROOT = aic.find_data_root()
needs_tables = pytest.mark.skipif(
    ROOT is None, reason=f"needs the aiconfigurator extra: {aic.EXTRA_HINT}")


@pytest.mark.parametrize(("nbytes", "tp", "two_shot", "expected"), [
    (16_000_000, 2, False, "oneshot"),  # tp 2: one-shot up to the 16 MB workspace
    (16_000_001, 2, False, "nccl"),
    (999_999, 4, False, "oneshot"),  # tp 4: one-shot under 1 MB
    (1_000_000, 4, False, "nccl"),  # two-shot disabled: NCCL
    (1_000_000, 4, True, "twoshot"),  # the earlier rule
    (8_000_001, 4, True, "nccl"),  # above the 8 MB workspace
    (499_999, 8, False, "oneshot"),  # tp 8: one-shot under 500 KB
    (500_000, 8, False, "nccl"),
    (8_000_000, 8, True, "twoshot"),
])
def test_plugin_rule_at_its_thresholds(nbytes: int, tp: int, two_shot: bool,
                                       expected: str) -> None:
    assert plugin_strategy(nbytes, tp, two_shot) == expected


def test_one_gpu_has_no_all_reduce() -> None:
    with pytest.raises(ConfigError, match="tp=1"):
        plugin_strategy(1024, 1)


def test_table_curve_by_hand() -> None:
    t = pd.DataFrame({"num_gpus": [4, 4, 8], "message_size": [1000, 3000, 1000],
                      "latency": [0.010, 0.030, 0.5]})
    assert allreduce_curve_ms(t, 4, 2000, "x") == pytest.approx(0.020)  # halfway
    assert allreduce_curve_ms(t, 4, 6000, "x") == pytest.approx(0.060)  # last row's bandwidth
    with pytest.raises(ConfigError, match="x: no all-reduce over 2 GPUs"):
        allreduce_curve_ms(t, 2, 1000, "x")


def test_no_tables_is_a_clear_error(tmp_path: Path, capsys) -> None:
    assert main(["--data", str(tmp_path)]) == 2
    assert "pip install -e '.[aiconfigurator]'" in capsys.readouterr().err


@needs_tables
def test_era_all_reduce_is_the_table_row_times_161() -> None:
    """Llama-3.1-70B (80 layers: 1 + 2 x 80 = 161 all-reduces a step) on H100 SXM."""
    assert ROOT is not None
    tables = SystemTables(ROOT, *aic.SYSTEMS["h100-sxm"])
    nccl = NcclTable(ROOT, "h100_sxm")
    model = get_model("llama-3.1-70b")
    # tp 8, 256 decode rows: 2,097,152 elements (4.2 MB), NCCL's own row (mean of its two
    # sweeps, 0.05032 and 0.05049 ms)
    composer = aic.Composer(tables, model, "fp8", 8)
    strategy, ms = era_allreduce_ms(composer, nccl, 256)
    assert strategy == "nccl"
    assert ms == pytest.approx(161 * (0.05032 + 0.05049) / 2, rel=1e-9)
    # tp 2, 64 rows: 524,288 elements (1 MB), the plugin's one-shot: the 1.x table is kept
    composer = aic.Composer(tables, model, "fp8", 2)
    strategy, ms = era_allreduce_ms(composer, nccl, 64)
    assert strategy == "oneshot"
    assert ms == pytest.approx(161 * tables.allreduce(524_288, 2), rel=1e-12)
    assert ms == pytest.approx(161 * 0.006104, rel=1e-4)  # the table's row, 4 digits


@needs_tables
def test_the_swap_never_moves_a_large_step_by_more_than_five_percent() -> None:
    """What docs/gpu-profiles.md reports: where the 70B rows spend their time (decode of
    256+ rows, prefill of 8,192 tokens) the 2024 rule moves a step by under 5%."""
    assert ROOT is not None
    big = [r for r in rows(ROOT) if r.step.startswith("prefill")
           or int(r.step.split()[1]) >= 256]
    assert big and max(abs(r.change) for r in big) < 0.05
