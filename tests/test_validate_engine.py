"""``servesim validate`` end to end on this CPU: the real engine against the simulator.

A small version of benchmarks/fidelity.py (one policy, one light load, 30 requests), with
tolerances a real regression breaks (a cost profile 25% off, a scheduling divergence, a
lost request) but machine noise on a shared 2-core box does not. The full table with
issue 4's 5%/10% targets is the benchmark's job, not a timed test's.

It starts from an empty profile cache, so validate first calibrates whatever machine runs
the test (``servesim calibrate --here``, about a minute): nothing here depends on the
machine the shipped profiles were measured on.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")

from servesim.cli import main  # noqa: E402
from simulator.fingerprint import this_machine  # noqa: E402
from simulator.profile_cache import cached_profile_path  # noqa: E402

SCENARIO = Path(__file__).resolve().parents[1] / "scenarios" / "validate-cpu.toml"
TOLERANCE = {"mean": 0.20, "p50": 0.20}  # relative error of TPOT and E2E latency
# TTFT of 30 light-load requests is ~30 prefills, most right after an idle gap: one run here
# read -25% where every other read within 10%. 40% still fails a profile from another CPU
# (2-4x off) or a lost host cost, and does not fail on this VM's minutes of drift.
TTFT_TOLERANCE = 0.40


def test_validate_cpu_small(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("SERVESIM_PROFILE_CACHE", str(tmp_path / "cache"))
    out = tmp_path / "v"
    code = main(["validate", str(SCENARIO), "--out", str(out), "--json",
                 "--set", "policy.name='continuous'", "--set", "workload.rate=3.0",
                 "--set", "workload.num_requests=30"])
    assert code == 0
    printed = capsys.readouterr()
    assert "calibrating it now" in printed.err  # the cache was empty: this machine first
    here = this_machine("cpu", 1)
    cached = cached_profile_path(here, "cpu", "tiny", "fp32", 1)
    profile = json.loads(cached.read_text())
    assert profile["provenance"]["fingerprint"]["id"] == here["id"]
    assert profile["fit"]["mape"] < 0.15  # held-out, on the profiler's own grid
    host = profile["overhead"]  # the serving loop's own work, measured on its own run
    assert 0 < host["finish_s"] < 0.02 and 0 <= host["admit_s"] < 0.02
    assert cached.with_suffix(".parquet").is_file()
    # served steps / profiled on the same synthetic run: recorded as a check, not applied
    check = profile["fit"]["served_time_scale"]
    assert 0.5 < check["value"] < 1.5 and check["applied"] is False
    assert "time_scale" not in profile
    rows = json.loads(printed.out)
    by = {(r["metric"], r["statistic"]): r for r in rows}
    for metric in ("tpot", "e2el"):
        for stat, tol in TOLERANCE.items():
            err = by[metric, stat]["relative_error"]
            assert abs(err) <= tol, f"{metric} {stat}: {err:+.1%}"
    ttft = by["ttft", "mean"]["relative_error"]
    assert abs(ttft) <= TTFT_TOLERANCE, f"ttft mean: {ttft:+.1%}"
    assert abs(by["throughput", "output_throughput"]["relative_error"]) <= 0.10
    measured = json.loads((out / "measured" / "summary.json").read_text())[0]
    assert measured["completed"] == 30 and measured["backend"] == "engine"
    assert measured["fingerprint"]["id"] == here["id"]  # where the engine ran
    assert (out / "cdf.png").is_file()
