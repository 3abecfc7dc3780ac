"""What the first lent H200 measured (benchmarks/gpu_runs/h200-2026-12-04/), and the
arithmetic of the GEMM-table check that read it (benchmarks/gemm_tables_check.py).

docs/gpu-profiles.md, "The first lent GPU: an H200", gives the commands that made each file.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pandas as pd
import pytest

from servesim.cli import main

ROOT = Path(__file__).resolve().parents[1]
RUN = ROOT / "benchmarks" / "gpu_runs" / "h200-2026-12-04"
sys.path.insert(0, str(ROOT / "benchmarks"))

import gemm_tables_check  # noqa: E402


def test_gemm_compare_prints_measured_over_table_and_the_m_plus_one_jumps(tmp_path, capsys):
    """Two (n, k) pairs at m = 512 and 513: measured / table and both jumps by hand."""
    folder = tmp_path / "data" / "h200_sxm" / "gemm" / "vllm" / "0.1"
    folder.mkdir(parents=True)
    table = pd.DataFrame({
        "kernel_source": ["CutlassFP8ScaledMMLinearKernel"] * 4,
        "gemm_dtype": ["fp8"] * 4, "m": [512, 513, 512, 513], "n": [4096, 4096, 8192, 8192],
        "k": [4096] * 4, "latency": [0.020, 0.040, 0.040, 0.080]})  # ms; the table doubles
    table.to_parquet(folder / "gemm_perf.parquet")
    measured = tmp_path / "gemm.csv"
    measured.write_text("device,gpu,dtype,m,n,k,latency_ms,padded\n"
                        "NVIDIA H200,h200,fp8,512,4096,4096,0.030,0\n"  # 1.5x the table
                        "NVIDIA H200,h200,fp8,513,4096,4096,0.036,1\n"  # 0.9x; jump 1.2
                        "NVIDIA H200,h200,fp8,512,8192,8192,0.050,0\n"  # no such (n, k): dropped
                        "NVIDIA H200,h200,fp8,512,8192,4096,0.060,0\n"  # 1.5x
                        "NVIDIA H200,h200,fp8,513,8192,4096,0.072,1\n")  # 0.9x; jump 1.2
    assert gemm_tables_check.compare(measured, tmp_path) == 0
    out = capsys.readouterr().out
    assert "vllm 0.1: measured / table" in out
    assert "m    512:  1.50 [1.50, 1.50]   m+1 jump here 1.20, table 2.00" in out
    assert "m    513:  0.90 [0.90, 0.90]" in out


def _validate(tmp_path: Path, policy: str, rates: str, folder: str, capsys) -> pd.DataFrame:
    code = main(["validate", str(ROOT / "scenarios" / "validate-h200.toml"),
                 "--set", f"policy.name='{policy}'", "--set", f"workload.rate={rates}",
                 "--set", f"cost.profile='{RUN / 'h200__llama-3.1-8b__bf16__tp1.json'}'",
                 # the runs recorded the process's 16 threads, the profile 1 (fixed since)
                 "--set", "cost.force=true",
                 "--measured", str(RUN / folder), "--out", str(tmp_path / policy), "--json"])
    assert code in (0, 1)  # 1: some figures outside tolerance, which the test reads
    return pd.DataFrame(json.loads(capsys.readouterr().out))


@pytest.mark.skipif(not RUN.is_dir(), reason="benchmarks/gpu_runs is not in this checkout")
def test_the_h200_static_run_is_reproduced_when_its_steps_match_the_profile(tmp_path, capsys):
    """Static batching at 1.56 req/s on the H200, priced by the card's own profile: the
    profile prices the engine's steps at +7.2% of their measured sum, and TTFT, E2E and
    throughput land within 5%. (At 0.78 req/s the same engine's steps ran 40% slower than
    profiled for part of the run: the report shows it as the steps' own error.)"""
    rows = _validate(tmp_path, "static", "[0.78, 1.56]", "engine_static", capsys)
    err = rows.set_index(["load", "metric", "statistic"])["relative_error"]
    fast = err.loc["rate=1.56"]
    assert abs(fast["steps", "priced_total"] - 0.072) < 0.01
    for metric, stat in [("ttft", "mean"), ("ttft", "p50"), ("ttft", "p90"), ("e2el", "mean"),
                         ("e2el", "p50"), ("throughput", "output_throughput")]:
        assert abs(fast[metric, stat]) < 0.05, (metric, stat, fast[metric, stat])
    slow = err.loc["rate=0.78"]
    assert slow["steps", "priced_total"] < -0.35  # the engine's steps, not the simulator
    assert abs(slow["queue", "p50"]) < 0.01  # a static batch fills at the arrivals' pace

