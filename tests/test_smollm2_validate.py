"""A run of SmolLM2-135M on the engine can be simulated: ``servesim run --backend engine``
with ``model.name='smollm2-135m'``, then ``servesim validate --measured`` on its folder.

The engine runs SmolLM2's shapes with random weights (engine/backend.py builds catalogue
models; timing does not depend on the weights). The simulated side is priced by a profile
in this test's per-user cache stamped with this machine's fingerprint, as
``servesim calibrate --here --model smollm2-135m`` would leave it; that calibration takes
minutes here, so the test writes a hand-checkable stand-in instead (tests/smollm2_support.py:
every step costs STEP_S, so every simulated inter-token gap is a whole number of
steps). What is checked is that the
pipeline runs end to end on one model name, not the profile's accuracy (that is
tests/test_validate_engine.py's job, on the tiny model).
"""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")

from smollm2_support import write_linear_profile  # noqa: E402

from servesim.cli import main  # noqa: E402
from simulator.fingerprint import this_machine  # noqa: E402
from simulator.profile_cache import ENV_VAR, cached_profile_path  # noqa: E402

SCENARIO = Path(__file__).resolve().parents[1] / "scenarios" / "validate-cpu.toml"
STEP_S = 0.025
NUM_REQUESTS = 6
SETS = [
    "--set",
    "model.name='smollm2-135m'",
    "--set",
    "policy.name='continuous'",
    "--set",
    "workload.rate=3.0",
    "--set",
    f"workload.num_requests={NUM_REQUESTS}",
    "--set",
    "workload.output={dist='uniform', low=8, high=16}",
]


def test_validate_a_smollm2_engine_run(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv(ENV_VAR, str(tmp_path / "cache"))
    here = this_machine("cpu", 1)
    profile = write_linear_profile(
        cached_profile_path(here, "cpu", "smollm2-135m", "fp32", 1), here, STEP_S
    )
    measured = tmp_path / "measured"
    assert main(["run", str(SCENARIO), *SETS, "--backend", "engine", "--out", str(measured)]) == 0
    summary = json.loads((measured / "summary.json").read_text())[0]
    assert summary["completed"] == NUM_REQUESTS and summary["backend"] == "engine"
    capsys.readouterr()

    out = tmp_path / "v"
    assert (
        main(["validate", str(SCENARIO), *SETS, "--measured", str(measured), "--out", str(out)])
        == 0
    )
    printed = capsys.readouterr().out
    assert f"simulated with: {profile}" in printed  # this machine's profile, not a prior
    assert "policy continuous, load rate=3.0" in printed and "overall:" in printed
    rows = {
        (r["metric"], r["statistic"]): r for r in json.loads((out / "comparison.json").read_text())
    }
    assert {m for m, _ in rows} == {"queue", "ttft", "tpot", "itl", "e2el", "throughput",
                                    "steps"}
    # the engine's own steps priced by the profile: STEP_S each, whatever their shape
    n_steps = len(pd.read_parquet(measured / "steps.parquet"))
    assert rows["steps", "priced_total"]["simulated"] == pytest.approx(1000 * STEP_S * n_steps)
    # one step of STEP_S between most two tokens, more where prefill-only steps came between
    # (continuous batching: a step prefills or decodes; simulator/itl_gaps.py). The mean is
    # at most the simulated requests' summed (finish - first token) over their gaps: the
    # decoders carried across a prefill get their whole gap, a request's first gap only the
    # step's (docs/metrics.md)
    assert rows["itl", "p50"]["simulated"] == pytest.approx(1000 * STEP_S, rel=1e-9)
    sim = pd.read_parquet(out / "simulated" / "requests.parquet")
    pooled = 1000 * (sim.finish_s - sim.first_token_s).sum() / (sim.output_tokens - 1).sum()
    assert rows["itl", "mean"]["simulated"] <= pooled * (1 + 1e-9)
    for stat in ("mean", "p50", "p90", "p99"):
        assert rows["itl", stat]["simulated"] >= 1000 * STEP_S * (1 - 1e-9)
        assert rows["itl", stat]["measured"] > 0
    row = rows["tpot", "mean"]
    assert row["measured"] == pytest.approx(summary["mean_tpot_ms"], rel=1e-9)
    assert row["relative_error"] == pytest.approx(row["simulated"] / row["measured"] - 1)
