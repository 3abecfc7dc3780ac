"""calibrate --from-run reads a vLLM bench JSON through the one reader of its times.

``calibrate/run_records.read_vllm_bench`` used to re-check ``ttfts``/``itls`` itself, with
a vaguer message ("ttfts[1] = ... or itls[1] is not a number of seconds"); it now calls
``simulator.workload.traces_json.bench_latencies``, which names the exact bad entry.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from calibrate.run_records import read_vllm_bench
from simulator.errors import ConfigError


def _write(path: Path, itls: list) -> Path:
    data = {"input_lens": [10, 20, 30], "output_lens": [3, 2, 1], "ttfts": [0.1, 0.2, 0.3],
            "itls": itls, "errors": ["", "", ""], "request_rate": "inf"}
    path.write_text(json.dumps(data))
    return path


def test_figures_by_hand(tmp_path: Path) -> None:
    run = read_vllm_bench(_write(tmp_path / "b.json", [[0.01, 0.03], [0.05], []]))
    assert run.ttft_s.tolist() == [0.1, 0.2, 0.3]
    assert run.e2e_s.tolist() == pytest.approx([0.14, 0.25, 0.3])  # ttft + sum of gaps
    assert run.tpot_s[:2].tolist() == pytest.approx([0.02, 0.05])  # gaps / (output - 1)


def test_bad_gap_is_named_by_position(tmp_path: Path) -> None:
    path = _write(tmp_path / "b.json", [[0.01, "x"], [0.05], []])
    with pytest.raises(ConfigError, match=r"field itls\[0\]\[1\] = 'x': not a number"):
        read_vllm_bench(path)
