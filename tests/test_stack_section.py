"""The ``[stack]`` section: a stack's preset fills what the scenario leaves out, nothing more."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from simulator.deployment import resolve
from simulator.errors import ConfigError
from simulator.scenario import expand_sweep, load_scenario
from simulator.scenario_types import Scenario
from simulator.stacks import STACKS, StackSection, apply_stack

SCENARIOS = sorted((Path(__file__).resolve().parents[1] / "scenarios").glob("*.toml"))


def test_no_stack_changes_nothing() -> None:
    plain = Scenario.from_dict({"policy": {"max_num_seqs": 8}})
    named = Scenario.from_dict({"policy": {"max_num_seqs": 8}, "stack": {"name": "none"}})
    assert plain == named
    assert resolve(plain).stack == "none"


def test_a_preset_fills_the_policy_and_kv_the_scenario_leaves_out() -> None:
    sc = Scenario.from_dict({"stack": {"name": "vllm-v1", "version": "0.8"}})
    policy = sc.policy.policy
    assert sc.policy.name == "chunked"
    assert (policy.max_num_seqs, policy.max_num_batched_tokens, policy.chunked_prefill) == (
        1024, 8192, True)  # 0.8 on the default GPU, an H100: 1024 sequences, 8192 tokens
    assert sc.kv.block_size == 16
    assert resolve(sc).stack == "vllm-v1 0.8"


def test_what_the_scenario_gives_wins_knob_by_knob() -> None:
    sc = Scenario.from_dict({"stack": {"name": "trtllm"}, "policy": {"max_num_seqs": 48},
                             "kv": {"block_size": 64}})
    policy = sc.policy.policy
    assert policy.max_num_seqs == 48  # the scenario's
    assert policy.max_num_batched_tokens == 8192  # the preset's
    assert sc.kv.block_size == 64  # the scenario's
    assert sc.kv.gpu_memory_utilization == 0.9  # the preset's


def test_a_static_policy_named_by_the_scenario_keeps_its_own_knobs() -> None:
    sc = Scenario.from_dict({"stack": {"name": "vllm-v0"},
                             "policy": {"name": "static", "batch_size": 4}})
    assert sc.policy.name == "static"
    assert sc.policy.policy.batch_size == 4


def test_the_latest_version_is_the_default() -> None:
    for name, presets in STACKS.items():
        assert StackSection(name=name).preset() is presets[-1]


def test_unknown_stacks_and_versions_are_named() -> None:
    with pytest.raises(ConfigError, match=r"stack.name = 'vllm': must be one of"):
        Scenario.from_dict({"stack": {"name": "vllm"}})
    with pytest.raises(ConfigError, match=r"stack.version = '0.3': vllm-v1 presets exist for"):
        Scenario.from_dict({"stack": {"name": "vllm-v1", "version": "0.3"}})
    with pytest.raises(ConfigError, match=r"stack.version = '1.0': needs stack.name"):
        Scenario.from_dict({"stack": {"version": "1.0"}})
    with pytest.raises(ConfigError, match=r"stack.max_num_seqs: unknown field"):
        Scenario.from_dict({"stack": {"name": "sglang", "max_num_seqs": 8}})


def test_host_costs_go_under_the_scenarios_own_but_never_under_a_profile() -> None:
    preset = STACKS["vllm-v1"][-1]
    fake = type(preset)(preset.stack, preset.version, preset.policy, preset.kv,
                        {"step_s": 0.002, "request_s": 0.005})
    merged = apply_stack({"cost": {"overhead": {"request_s": 0.001}}}, fake)
    assert merged["cost"]["overhead"] == {"step_s": 0.002, "request_s": 0.001}
    assert "overhead" not in apply_stack({"cost": {"profile": "p.json"}}, fake)["cost"]
    assert "overhead" not in apply_stack({"cost": {"form": "linear"}}, fake)["cost"]
    # the prior's own knobs price the kernels; the host costs stay the stack's, as when an
    # empty section falls back to the prior
    own_knobs = apply_stack({"cost": {"form": "roofline", "compute_efficiency": 0.5}}, fake)
    assert own_knobs["cost"]["overhead"] == {"step_s": 0.002, "request_s": 0.005}


@pytest.mark.parametrize("stack", list(STACKS))
@pytest.mark.parametrize("path", SCENARIOS, ids=lambda p: p.stem)
def test_every_shipped_scenario_resolves_under_every_stack(path: Path, stack: str) -> None:
    raw = load_scenario(path)
    raw["stack"] = {"name": stack}
    for _, point in expand_sweep(raw):
        dep = resolve(point, str(path))
        assert dep.stack.startswith(stack)


@pytest.mark.parametrize(("stack", "folder"), [("vllm-v0", "stacks/vllm/"),
                                                ("vllm-v1", "stacks/vllm/"),
                                                ("sglang", "stacks/sglang/")])
def test_a_stack_prices_steps_with_its_own_kernel_tables(stack: str, folder: str) -> None:
    point = {"model": {"name": "llama-3.1-8b"}, "hardware": {"gpu": "h100-sxm"}}
    own = resolve({**point, "stack": {"name": stack}})
    generic = resolve(point)
    assert own.cost_source.startswith(folder + "h100-sxm__llama-3.1-8b__bf16__tp1.json")
    assert generic.cost_source.startswith("h100-sxm__llama-3.1-8b__bf16__tp1.json")
    assert "backend trtllm" in generic.cost_source
    assert f"backend {folder.split('/')[1]}" in own.cost_source


def test_trtllm_uses_the_generic_tables_which_are_its_own() -> None:
    point = {"model": {"name": "llama-3.1-8b"}, "hardware": {"gpu": "h200"}}
    dep = resolve({**point, "stack": {"name": "trtllm"}})
    assert dep.cost_source.startswith("h200__llama-3.1-8b__bf16__tp1.json")


def test_vllm_adds_its_per_layer_dispatch_before_the_first_token() -> None:
    # AIConfigurator 0.12.0 prices vLLM's per-request CPU dispatch at 0.8 ms per layer: V0;
    # V1's was fitted to 0 per layer on a published run's records, and flat to 5.46 ms on
    # its TTFTs for the 0.8 line beside every V1 release's API-server intake, 1.71 ms a
    # request fitted on a burst (simulator/stack_presets.py VLLM_V1_08_FRONT_END,
    # VLLM_V1_INTAKE)
    for model, layers in (("llama-3.1-8b", 32), ("llama-3.1-70b", 80)):
        dep = resolve({"model": {"name": model}, "hardware": {"gpu": "h200", "tp": 4},
                       "stack": {"name": "vllm-v0"}})
        assert dep.request_s == pytest.approx(0.8e-3 * layers)
        assert f"step {0.039 * layers:.4g} ms" in dep.cost_source  # fitted per layer
        v1 = resolve({"model": {"name": model}, "hardware": {"gpu": "h200", "tp": 4},
                      "stack": {"name": "vllm-v1"}})
        assert v1.request_s == 0.0
        assert f"step {0.039 * layers:.4g} ms" in v1.cost_source
        assert "intake 1.715 ms" in v1.cost_source  # flat: the same for both models
        # the 0.8 line's API server before a first token: flat, the same for both models
        for version in ("0.8", "0.8.4", "0.8.5"):
            v08 = resolve({"model": {"name": model}, "hardware": {"gpu": "h200", "tp": 4},
                           "stack": {"name": "vllm-v1", "version": version}})
            assert v08.request_s == pytest.approx(5.4551e-3)
            assert "intake 1.715 ms" in v08.cost_source
            assert f"step {0.039 * layers:.4g} ms" in v08.cost_source
    own = resolve({"stack": {"name": "vllm-v0"}, "cost": {"overhead": {"request_s": 0.002}}})
    assert own.request_s == pytest.approx(0.002)  # the scenario's own wins
    assert resolve({"stack": {"name": "trtllm"}}).request_s == 0.0
    assert "intake" not in resolve({"stack": {"name": "vllm-v0"}}).cost_source


def test_sglang_04_and_05_add_their_fitted_host_costs_per_layer() -> None:
    # fitted on each release's own light-load runs (simulator/stack_presets.py
    # SGLANG_04_HOST, SGLANG_05_HOST): 0.2964 / 0.4794 ms a layer before the first token,
    # 0.0253 / 0.0225 ms a layer a step; 32 layers: 9.4848 / 15.34 ms, 0.8096 / 0.72 ms
    # (0.4's refitted with its overlap scheduler in place, stop 49)
    for version, request_ms, step_ms in (("0.4", 9.4848, 0.8096), ("0.5", 15.3408, 0.72)):
        dep = resolve({"model": {"name": "llama-3.1-8b"},
                       "stack": {"name": "sglang", "version": version}})
        assert dep.request_s == pytest.approx(request_ms * 1e-3)
        assert f"step {step_ms:.4g} ms" in dep.cost_source
    assert resolve({"stack": {"name": "sglang"}}).request_s == pytest.approx(15.3408e-3)


def test_the_dashboard_form_shows_a_stacks_knobs_and_writes_the_stack() -> None:
    from dashboard.logic.scenario_form import apply_knobs, default_knobs, with_stack

    k = with_stack({}, replace(default_knobs(), stack="trtllm", gpu="h200"))
    assert (k.policy, k.max_num_seqs, k.max_num_batched_tokens) == ("continuous", 2048, 8192)
    own = with_stack({"policy": {"max_num_seqs": 48}}, replace(default_knobs(), stack="trtllm"))
    assert own.max_num_seqs == 48  # the scenario's own [policy] wins, as in a run
    point = apply_knobs({}, k)
    assert point["stack"] == {"name": "trtllm"}
    assert resolve(point).policy.admission == "no_evict"
    assert "stack" not in apply_knobs({}, default_knobs())  # none adds nothing


def test_the_dashboard_form_runs_the_stack_version_it_shows() -> None:
    from dashboard.logic.scenario_form import (
        apply_knobs,
        default_knobs,
        knobs_from_point,
        stack_versions,
        with_stack,
    )

    # newest first (a scenario without a version runs the first); a release between two
    # presets that the scenario names is offered as it is
    assert stack_versions("vllm-v0") == ["0.6", "0.5.4", "0.5"]
    assert stack_versions("trtllm", "0.13")[-1] == "0.13" and stack_versions("none") == []
    k = with_stack({}, replace(default_knobs(), stack="vllm-v0", stack_version="0.5",
                               model="llama-3.1-8b", gpu="h100-sxm"))
    # 0.5.0-0.5.3: whole prompts at Llama-3.1's 131,072 positions (0.6: 512-token chunks)
    assert k.max_num_batched_tokens == 131_072
    point = apply_knobs({}, k)
    assert point["stack"] == {"name": "vllm-v0", "version": "0.5"}
    assert resolve(point).cost.overhead.token_s == pytest.approx(228.4e-6)
    assert knobs_from_point(point).stack_version == "0.5"
    # the latest is written as no version (what a scenario without one runs)
    assert apply_knobs({}, replace(k, stack_version="0.6"))["stack"] == {"name": "vllm-v0"}
    # a release the stack has none for (left from another stack) shows the latest
    assert with_stack({}, replace(k, stack_version="0.0.1")).max_num_batched_tokens == 512
