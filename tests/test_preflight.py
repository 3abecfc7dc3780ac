"""Every point of a sweep is checked before any runs: a point whose arrivals would span
more simulated time than float64 resolves, or whose tables cannot fit in memory, stops the
command with exit 2 before the first point is simulated, so nothing is half written."""

from __future__ import annotations

from pathlib import Path

import pytest

from servesim.cli import main
from simulator.deployment import resolve
from simulator.errors import ConfigError
from simulator.memory_guard import check_fits
from simulator.runner import preflight

SWEEP = """
name = "pre"
[model]
name = "llama-3.1-8b"
[policy]
name = "continuous"
[workload]
arrival = "poisson"
rate = [4.0, 1e-300]
num_requests = 50
prompt = { dist = "fixed", tokens = 100 }
output = { dist = "fixed", tokens = 10 }
"""


def test_a_bad_second_point_stops_the_sweep_before_the_first_runs(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "pre.toml"
    path.write_text(SWEEP)
    out = tmp_path / "out"
    assert main(["sweep", str(path), "--out", str(out), "--workers", "1"]) == 2
    err = capsys.readouterr().err
    # 50 requests at 1e-300 req/s span 5e301 s > 1e9 s: the lowest rate is 50 / 1e9
    assert "workload.rate = 1e-300 req/s" in err and "at least 5e-08 req/s" in err
    assert "Traceback" not in err
    assert not (out / "summary.json").exists()
    assert not list(out.glob("cache/*.json"))  # the good first point did not run either


def test_points_run_at_once_share_the_memory() -> None:
    # 10^6 requests x 1,664 bytes = 1.66e9 bytes: fits in 3 GiB alone, not in half of it
    check_fits(10**6, available=3 * 2**30)
    with pytest.raises(ConfigError, match="each of 2 points run at once has 1.5 GiB"):
        check_fits(10**6, available=3 * 2**30, parallel=2)


def test_preflight_checks_the_resolved_point() -> None:
    dep = resolve({"workload": {"rate": 1e-3, "num_requests": 10**7}})
    with pytest.raises(ConfigError, match="num_requests = 10,000,000"):
        preflight(dep, available=2**30)  # 21.8 GB > 1 GiB
    with pytest.raises(ConfigError, match="workload.rate = 0.001 req/s"):
        preflight(dep, available=2**50)  # fits, but 10^7 / 1e-3 = 1e10 s > 1e9 s


def test_a_trace_rescaled_to_a_vanishing_rate_is_refused() -> None:
    import pandas as pd

    from simulator.workload.transforms import scale_to_rate

    table = pd.DataFrame({"request_id": [0, 1, 2], "arrival_s": [0.0, 1.0, 3.0],
                          "prompt_tokens": [10] * 3, "output_tokens": [5] * 3})
    # 3 arrivals at 0.5 req/s span (3 - 1) / 0.5 = 4 s: gaps x 4/3
    assert scale_to_rate(table, 0.5)["arrival_s"].tolist() == pytest.approx([0, 4 / 3, 4])
    # at 1e-300 req/s they would span 2e300 s, where a 10 ms step vanishes in float64
    with pytest.raises(ConfigError, match="workload.rate = 1e-300 req/s: 2 requests"):
        scale_to_rate(table, 1e-300)
