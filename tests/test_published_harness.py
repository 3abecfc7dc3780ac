"""A published case's harness that shares the engine's process: its host cost is replayed
on the engines it shares a process with, and nowhere else."""

from __future__ import annotations

import importlib
import math
import sys
from pathlib import Path

import pytest
from helpers import published_case_toml

from simulator.errors import ConfigError

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
pc = importlib.import_module("benchmarks.published_cases")
ph = importlib.import_module("benchmarks.published_harness")

V0 = "vllm-v0-0.7-accelmark-h200-llama-3-8b-tp1-A-online300-qps25-29b2ec38"
FIT = "vllm-v0-0.7-accelmark-h100-sxm-llama-3-8b-tp1-A-online300-qps25-831c95a7"


@pytest.fixture(scope="module")
def cases() -> dict:
    return {c.id: c for c in pc.load_cases()}


def test_the_runner_costs_a_v0_engine_and_not_a_v1_one() -> None:
    assert ph.harness_host("accelmark", "vllm-v0") == {"token_s": 76.7e-6}
    # V1's engine core runs in a process of its own: the runner's work does not block it
    assert ph.harness_host("accelmark", "vllm-v1") == {}
    assert ph.harness_host("", "vllm-v0") == {}
    assert ph.harness_note("accelmark", "vllm-v1") == ""
    assert "token_s 76.7 us" in ph.harness_note("accelmark", "vllm-v0")


def test_every_accelmark_case_names_its_harness_and_one_is_the_fit(cases: dict) -> None:
    runs = [c for c in cases.values() if "-accelmark-" in c.id]
    assert len(runs) == 123 and all(c.harness == "accelmark" for c in runs)
    fitted = [c.id for c in runs if c.fitted]
    assert fitted == [FIT]  # in sample: the report leaves it out of the held-out table
    assert FIT in ph.ACCELMARK_FIT
    assert not any(c.harness for c in cases.values() if "-accelmark-" not in c.id)


def test_a_v0_case_replays_the_host_cost_and_a_v1_case_does_not(cases: dict,
                                                                 tmp_path: Path) -> None:
    point, notes = pc.scenario_point(cases[V0], max_prompts=300, use_stack=True,
                                     burst_rate=math.inf, trace_dir=tmp_path)
    assert point["cost"]["overhead"] == {"token_s": 76.7e-6}
    assert any(n.startswith("harness accelmark: the runner shares the engine's process")
               for n in notes)
    v1 = next(c for c in cases.values() if c.harness and c.stack == "vllm-v1")
    point, notes = pc.scenario_point(v1, max_prompts=300, use_stack=True,
                                     burst_rate=math.inf, trace_dir=tmp_path)
    assert "overhead" not in point.get("cost", {})
    assert not any(n.startswith("harness") for n in notes)


def test_the_stack_preset_keeps_its_other_host_terms(cases: dict, tmp_path: Path) -> None:
    from simulator.specs.hardware import get_hardware
    from simulator.specs.models import get_model
    from simulator.stacks import StackSection, apply_stack

    point, _ = pc.scenario_point(cases[V0], max_prompts=300, use_stack=True,
                                 burst_rate=math.inf, trace_dir=tmp_path)
    preset = StackSection("vllm-v0", "0.7").preset()
    model, gpu = get_model("llama-3.1-8b"), get_hardware("h200")
    merged = apply_stack(point, preset, model, gpu)["cost"]["overhead"]
    own = preset.host_costs(model.num_layers, 1, gpu)  # type: ignore[union-attr]
    assert merged == {**own, "token_s": 76.7e-6}


def test_an_unknown_harness_is_refused_naming_the_case(tmp_path: Path) -> None:
    bad = tmp_path / "cases.toml"
    bad.write_text(published_case_toml('harness = "locust"\n', stack="vllm-v0", version="0.7"))
    with pytest.raises(ConfigError, match=r"\(x\).*harness = 'locust': must be one of"):
        pc.load_cases(bad)
