"""``servesim run --backend engine``: what this machine cannot run is refused, clearly.

Skipped as a whole without torch (the core suite runs without the engine extra).
"""

from __future__ import annotations

import json

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from servesim.cli import main  # noqa: E402

TINY_CPU = """
name = "t"
seed = 2
[model]
name = "tiny"
weight_dtype = "fp32"
[hardware]
gpu = "cpu"
[policy]
name = "continuous"
[workload]
arrival = "poisson"
rate = 20.0
num_requests = 6
prompt = { dist = "uniform", low = 8, high = 40 }
output = { dist = "uniform", low = 2, high = 6 }
"""


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has a GPU")
def test_a_gpu_scenario_without_that_gpu_is_refused(capsys, tmp_path):
    code = main(["run", "scenarios/chat.toml", "--backend", "engine", "--out", str(tmp_path)])
    assert code == 2
    err = capsys.readouterr().err
    assert "hardware.gpu = 'h100-sxm'" in err and "no CUDA GPU" in err
    assert not (tmp_path / "summary.json").exists()  # nothing ran, nothing half-written


@pytest.mark.parametrize(("override", "says"), [
    ("cluster.replicas=2", "serves one replica"),
    ("hardware.tp=2", "tp=2 needs a GPU link"),  # refused while resolving, before the engine
])
def test_what_the_engine_cannot_do_is_named(override, says, capsys, tmp_path):
    scenario = tmp_path / "t.toml"
    scenario.write_text(TINY_CPU)
    code = main(["run", str(scenario), "--backend", "engine", "--set", override,
                 "--out", str(tmp_path / "o")])
    assert code == 2 and says in capsys.readouterr().err


def test_engine_backend_writes_the_simulator_s_tables(capsys, tmp_path):
    scenario = tmp_path / "t.toml"
    scenario.write_text(TINY_CPU)
    out = tmp_path / "o"
    assert main(["run", str(scenario), "--backend", "engine", "--out", str(out), "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)[0]
    assert summary["backend"] == "engine" and summary["completed"] == 6
    assert summary["engine"]["threads"] == 1 and summary["engine"]["device"] == "cpu"
    for name in ("summary.json", "requests.parquet", "steps.parquet", "tokens.parquet"):
        assert (out / name).is_file()
