"""The typed scenario (issue 11 item 3): each reproduced wrong-type bug, exactly, and the
properties of the object (frozen, defaults in one place, policies from one registry)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path

import pytest

from servesim.cli import main
from simulator.capacity.candidates import build_candidates
from simulator.deployment import resolve
from simulator.errors import ConfigError
from simulator.policies import POLICIES, ContinuousPolicy, StaticPolicy, make_policy
from simulator.scenario_types import Scenario

BASE = """
[model]
name = "llama-3.1-8b"
[policy]
name = "{policy}"
{policy_extra}
[workload]
arrival = "poisson"
rate = 5.0
num_requests = 10
prompt = {{ dist = "fixed", tokens = 32 }}
output = {{ dist = "fixed", tokens = 4 }}
[cost]
form = "roofline"
{extra}
"""


def _file(tmp_path: Path, policy: str = "continuous", policy_extra: str = "",
          extra: str = "") -> Path:
    path = tmp_path / "s.toml"
    path.write_text(BASE.format(policy=policy, policy_extra=policy_extra, extra=extra))
    return path


@pytest.mark.parametrize(("policy", "policy_extra", "extra", "message"), [
    ("continuous", 'chunked_prefill = "false"', "",
     "policy.chunked_prefill = 'false': must be true or false; write it without quotes"),
    ("continuous", "", '[run]\nfast_forward = "false"',
     "run.fast_forward = 'false': must be true or false"),
    ("continuous", "", "[run]\nhorizon_s = true", "run.horizon_s = true: must be a number > 0 (s)"),
    ("static", "batch_size = 8.7", "", "policy.batch_size = 8.7: must be an integer"),
    ("static", "batch_size = 8.0", "", "policy.batch_size = 8.0: must be an integer"),
    ("continuous", "max_num_seqs = 64.5", "", "policy.max_num_seqs = 64.5: must be an integer"),
    ("continuous", 'max_num_seqs = "256"', "",
     "policy.max_num_seqs = '256': must be an integer >= 1 (requests); write it without quotes"),
    ("continuous", "", '[kv]\nblock_size = "16"',
     "kv.block_size = '16': must be an integer >= 1 (tokens per block)"),
    # a word that is no number unquoted: the quotes are not the slip, so no hint
    ("continuous", 'max_num_seqs = "many"', "",
     "policy.max_num_seqs = 'many': must be an integer >= 1 (requests)\n"),
    ("continuous", 'chunked_prefill = "yes"', "",
     "policy.chunked_prefill = 'yes': must be true or false\n"),

    ("continuous", "", "[cluster]\nreplicas = 1.0", "cluster.replicas = 1.0: must be an integer"),
])
def test_reproduced_wrong_types_exit_2_naming_file_and_field(  # type: ignore[no-untyped-def]
        tmp_path: Path, capsys, policy: str, policy_extra: str, extra: str, message: str) -> None:
    path = _file(tmp_path, policy, policy_extra, extra)
    assert main(["run", str(path), "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"servesim: error: {path}: {message}"), err


def test_model_name_5_exits_2(tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    path = _file(tmp_path)
    path.write_text(path.read_text().replace('name = "llama-3.1-8b"', "name = 5"))
    assert main(["run", str(path), "--out", str(tmp_path / "o")]) == 2
    assert "model.name = 5: must be a string" in capsys.readouterr().err


@pytest.mark.parametrize(("value", "shown"), [("no", "'no'"), ('"false"', "'false'"),
                                              ("0", "0")])
def test_set_fast_forward_as_a_word_is_refused(tmp_path: Path, capsys, value: str,  # type: ignore[no-untyped-def]
                                               shown: str) -> None:
    args = ["run", str(_file(tmp_path)), "--out", str(tmp_path / "o")]
    assert main([*args, "--set", f"run.fast_forward={value}"]) == 2
    assert f"run.fast_forward = {shown}: must be true or false" in capsys.readouterr().err
    assert main([*args, "--set", "run.fast_forward=false", "--json"]) == 0  # a TOML boolean


def test_serve_set_abc_exits_2_without_a_traceback(capsys) -> None:  # type: ignore[no-untyped-def]
    assert main(["serve", "--set", "max_num_seqs=abc"]) == 2
    err = capsys.readouterr().err
    assert "policy.max_num_seqs = 'abc': must be an integer" in err and "Traceback" not in err


def test_make_policy_refuses_wrong_types() -> None:
    with pytest.raises(ConfigError, match=r"policy.chunked_prefill = 'false'"):
        make_policy("continuous", chunked_prefill="false")
    with pytest.raises(ConfigError, match=r"policy.batch_size = 8.7"):
        make_policy("static", batch_size=8.7)


def test_values_of_the_right_type_are_used_as_given() -> None:
    dep = resolve({"policy": {"name": "continuous", "chunked_prefill": True,
                              "max_num_seqs": 64},
                   "run": {"fast_forward": False, "horizon_s": 3}})
    assert dep.policy == ContinuousPolicy(max_num_seqs=64, chunked_prefill=True)
    assert dep.fast_forward is False
    assert dep.horizon_s == 3.0 and isinstance(dep.horizon_s, float)
    static = resolve({"policy": {"name": "static", "batch_size": 8}})
    assert static.policy == StaticPolicy(batch_size=8)


def test_defaults_live_in_the_schema() -> None:
    sc = Scenario.from_dict({})
    assert sc == Scenario()
    assert (sc.model.name, sc.model.weight_dtype, sc.model.kv_dtype_used) == (
        "llama-3.1-8b", "bf16", "bf16")
    assert (sc.hardware.gpu, sc.hardware.tp) == ("h100-sxm", 1)
    assert sc.policy.name == "continuous" and sc.policy.policy == ContinuousPolicy()
    assert (sc.run.fast_forward, sc.run.check_invariants, sc.run.horizon_s) == (True, False, None)
    assert (sc.cluster.replicas, sc.cluster.router, sc.seed, sc.slo) == (1, "round_robin", 0, None)
    assert Scenario.from_dict({"model": {"weight_dtype": "fp8"}}).model.kv_dtype_used == "fp8"


def test_the_scenario_is_frozen() -> None:
    sc = Scenario.from_dict({"policy": {"name": "static", "batch_size": 4}})
    with pytest.raises(dataclasses.FrozenInstanceError):
        sc.seed = 3  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        sc.run.fast_forward = False  # type: ignore[misc]
    with pytest.raises(TypeError):
        sc.policy.knobs["batch_size"] = 9  # type: ignore[index]
    with pytest.raises(TypeError):
        sc.cost["form"] = "linear"  # type: ignore[index]


def test_policy_subtable_overrides_the_shared_knob() -> None:
    sc = Scenario.from_dict({"policy": {"name": "chunked", "max_num_batched_tokens": 16384,
                                        "chunked": {"max_num_batched_tokens": 2048}}})
    assert sc.policy.policy == ContinuousPolicy(max_num_batched_tokens=2048,
                                                chunked_prefill=True)
    with pytest.raises(ConfigError, match=r"policy.static.batch_size = '8'"):
        Scenario.from_dict({"policy": {"static": {"batch_size": "8"}}})
    with pytest.raises(ConfigError, match=r"policy.static.max_num_seqs: not a knob"):
        Scenario.from_dict({"policy": {"static": {"max_num_seqs": 8}}})


def test_a_new_policy_touches_one_place(monkeypatch: pytest.MonkeyPatch) -> None:
    @dataclass(frozen=True, slots=True)
    class Window:
        width: int = 4

    monkeypatch.setitem(POLICIES, "window", (Window, {}))
    sc = Scenario.from_dict({"policy": {"name": "window", "width": 2}})
    assert sc.policy.policy == Window(2)
    with pytest.raises(ConfigError, match=r"policy.width = 2.5: must be an integer"):
        Scenario.from_dict({"policy": {"name": "window", "width": 2.5}})


def test_check_invariants_reaches_the_cluster() -> None:
    assert resolve({}).check_invariants is False
    dep = resolve({"run": {"check_invariants": True}})
    assert dep.check_invariants is True
    assert dep.cluster().check_invariants is True
    assert resolve({}).cluster().check_invariants is False
    with pytest.raises(ConfigError, match=r"run.check_invariants = 'yes'"):
        resolve({"run": {"check_invariants": "yes"}})


def test_a_plan_candidate_of_the_wrong_type_is_an_error_not_infeasible() -> None:
    with pytest.raises(ConfigError, match=r"policy.max_num_seqs = '256'"):
        build_candidates({"policy": {"name": "continuous", "max_num_seqs": "256"},
                          "workload": {"rate": 2.0}})


def test_errors_name_the_source_file() -> None:
    with pytest.raises(ConfigError, match=r"^my.toml: seed = -1: must be an integer >= 0"):
        Scenario.from_dict({"seed": -1}, "my.toml")
