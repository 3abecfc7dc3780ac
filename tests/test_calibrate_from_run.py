"""Host overhead (costs/host.py), the [cost] overhead hook, and black-box calibration from
measured runs (calibrate/from_run.py, ``servesim calibrate --from-run``). No torch."""

from __future__ import annotations

import argparse
import json
from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from helpers import TokenCost, table, timeline

from calibrate.run_records import read_runs
from calibrate.synthetic_run import token_times, write_run
from servesim.calibrate_from_run import add_from_run_arguments, from_run_command
from simulator.cluster import ClusterSpec, simulate
from simulator.costs import CostProfile, cost_model_from_config, load_profile, save_profile
from simulator.costs.host import HostCost, Overhead
from simulator.deployment import resolve
from simulator.errors import ConfigError
from simulator.fingerprint import this_machine
from simulator.policies import ContinuousPolicy, DynamicPolicy
from simulator.scenario import apply_overrides, expand_sweep, load_scenario
from simulator.shapes import StepShape, StepShapes
from simulator.specs import get_hardware, get_model

SCENARIO = "scenarios/validate-cpu.toml"
TINY = "cpu__tiny__fp32__tp1.json"
CONTINUOUS = "policy.name='continuous'"
# Injected into the synthetic runs: what the fit must find.
TRUE = {"time_scale": 1.1, "step_s": 1e-3, "token_s": 4e-4, "request_s": 5e-3}
INJECTED = [f"cost.profile='{TINY}'", "cost.time_scale=1.1", "cost.jitter_cv=0.05",
            "cost.overhead={request_s=0.005, token_s=0.0004, step_s=0.001}"]


def _host(**terms: float) -> HostCost:
    return HostCost(TokenCost(step_s=1.0), Overhead(**terms))


def test_host_cost_adds_what_is_computed_by_hand() -> None:
    # r0 at 0: 4 prompt, 3 out. Prefill step: 1 + step 0.1 + admit 0.2 + token 0.01 (its
    # first token) = 1.31; decode steps 1 + 0.1 + 0.01 (one row) = 1.11, the last + finish
    # 0.05. r1 at 10 alone: the same from 10.
    cost = _host(step_s=0.1, admit_s=0.2, finish_s=0.05, token_s=0.01)
    spec = ClusterSpec(ContinuousPolicy(), cost, kv_blocks=100, block_size=4)
    res = simulate(table([(0, 4, 3), (10, 4, 3)]), spec)
    assert timeline(res.requests) == [(0, 0, 1.31, 3.58), (1, 10, 11.31, 13.58)]


@pytest.mark.parametrize("fast_forward", [True, False])
def test_request_s_shifts_ttft_and_e2e_only(fast_forward: bool) -> None:
    cost = _host(step_s=0.1, token_s=0.01)
    rows = [(0, 4, 5), (20, 8, 3), (40, 4, 6)]  # light load: nobody waits for anybody
    plain = simulate(table(rows), ClusterSpec(ContinuousPolicy(), cost, 100, 4),
                     fast_forward=fast_forward).requests
    late = simulate(table(rows), ClusterSpec(ContinuousPolicy(), cost, 100, 4, request_s=0.5),
                    fast_forward=fast_forward).requests
    assert late["arrival_s"].tolist() == plain["arrival_s"].tolist()  # the client's clock
    np.testing.assert_allclose(late["first_token_s"], plain["first_token_s"] + 0.5)
    np.testing.assert_allclose(late["finish_s"], plain["finish_s"] + 0.5)
    np.testing.assert_allclose(late["finish_s"] - late["first_token_s"],
                               plain["finish_s"] - plain["first_token_s"])


def test_request_s_starts_a_dynamic_batch_wait_when_the_engine_sees_it() -> None:
    spec = ClusterSpec(DynamicPolicy(max_batch_size=4, max_wait_s=0.25), TokenCost(step_s=1.0),
                       100, 4, request_s=0.5)
    res = simulate(table([(0, 4, 2)]), spec)
    assert timeline(res.requests) == [(0, 0.75, 1.75, 2.75)]  # seen at 0.5, waits 0.25


def test_fast_forward_is_exact_with_request_s() -> None:
    rng = np.random.default_rng(3)
    rows = [(float(t), int(p), int(o)) for t, p, o in zip(np.cumsum(rng.exponential(0.3, 40)),
                                                          rng.integers(4, 40, 40),
                                                          rng.integers(2, 30, 40), strict=True)]
    spec = ClusterSpec(ContinuousPolicy(max_num_seqs=8), _host(step_s=0.01, token_s=0.002),
                       200, 4, request_s=0.05)
    fast, slow = (simulate(table(rows), spec, fast_forward=f) for f in (True, False))
    pd.testing.assert_frame_equal(fast.requests, slow.requests)
    pd.testing.assert_frame_equal(fast.steps, slow.steps)


def test_step_time_and_step_times_agree() -> None:
    rng = np.random.default_rng(0)
    shapes = [StepShape(int(p), float(p * p / 2), int(d), int(d * 100), int(a), int(f))
              for p, d, a, f in rng.integers(0, 9, (50, 4))]
    cost = _host(step_s=1e-3, admit_s=2e-3, finish_s=3e-4, token_s=4e-5, seq_s=5e-6)
    one = [cost.step_time(s) for s in shapes]
    np.testing.assert_allclose(cost.step_times(StepShapes.from_shapes(shapes)), one, rtol=1e-12)


def _hook(section: dict) -> tuple:
    return cost_model_from_config(section, get_model("tiny"), get_hardware("cpu"), 1, "fp32",
                                  "bf16")


@pytest.mark.parametrize("section", [{"profile": TINY, "jitter_cv": 0},
                                     {"form": "linear", "step_s": 0.01}, {}])
def test_scenario_overhead_on_every_form(section: dict) -> None:
    cost, used = _hook({**section, "overhead": {"step_s": 2e-4, "request_s": 0.005}})
    assert isinstance(cost, HostCost) and cost.request_s == 0.005
    assert used.endswith("+ host overhead step 0.2 ms, request 5 ms")
    base, _ = _hook(section)
    shape = StepShape(num_decode_seqs=2, decode_context_tokens=200)
    assert cost.step_time(shape) == pytest.approx(base.step_time(shape) + 2e-4)


@pytest.mark.parametrize(("overhead", "named"), [
    ({"bogus": 1.0}, "cost.overhead.bogus is not a host cost"),
    ({"step_s": -1.0}, "cost.overhead.step_s=-1.0"),
    ({"admit_s": "x"}, "cost.overhead.admit_s='x'"),
    (0.001, "cost.overhead=0.001 must be a table"),
])
def test_bad_overhead_names_the_field(overhead: object, named: str) -> None:
    with pytest.raises(ConfigError, match=named):
        _hook({"profile": TINY, "overhead": overhead})


def test_profile_overhead_and_time_scale_round_trip_and_scenario_keys_win(tmp_path: Path
                                                                          ) -> None:
    base = load_profile(Path("simulator/profiles") / TINY)
    assert "overhead" not in base.to_dict() and "time_scale" not in base.to_dict()
    path = tmp_path / "cal.json"
    save_profile(replace(base, time_scale=1.1, overhead={"step_s": 1e-3, "request_s": 2e-3}),
                 path)
    assert load_profile(path).overhead == {"step_s": 1e-3, "request_s": 2e-3}
    cost, used = _hook({"profile": str(path), "overhead": {"request_s": 0}, "jitter_cv": 0})
    assert cost.overhead == Overhead(step_s=1e-3) and "x fitted time_scale 1.1" in used
    shape = StepShape(num_decode_seqs=1, decode_context_tokens=100)
    plain = base.build_fitted().step_time(shape)
    assert cost.step_time(shape) == pytest.approx(plain * 1.1 + 1e-3)
    with pytest.raises(ConfigError, match="overhead.seq_s"):
        CostProfile(**{**base.to_dict(), "overhead": {"seq_s": -1}})


def _args(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out")
    add_from_run_arguments(parser)
    return parser.parse_args(list(argv))


def _synthetic(folder: Path, rates: str = "[3.0, 6.0]") -> None:
    raw = apply_overrides(load_scenario(SCENARIO), [CONTINUOUS, f"workload.rate={rates}",
                                                    *INJECTED])
    write_run(expand_sweep(raw), folder)


def test_fit_recovers_injected_host_costs(tmp_path: Path, capsys) -> None:
    """Two loads (~25% and ~50% of capacity), 150 requests each, 5% step jitter. Spread over
    workload seeds 1, 2, 3, 11: time_scale within 4%, token_s 16%, request_s + admit_s 13%
    (request_s alone 40%: at these loads admit_s and request_s differ only through the
    queue), the decode step's fixed part (time_scale x decode_step_s + step_s) 0.5% (step_s
    alone 40%: with time_scale it is one intercept); held-out means within 5%. The fit says
    which terms these runs cannot tell apart (calibrate/fit_spread.py): step_s is loose
    beside time_scale, admit_s beside request_s."""
    _synthetic(tmp_path / "run")
    out = tmp_path / "fitted.json"
    args = _args("--from-run", str(tmp_path / "run"), "--scenario", SCENARIO, "--set",
                 CONTINUOUS, "--set", "workload.rate=[3.0, 6.0]", "--out", str(out))
    assert from_run_command(args, argv=["calibrate", "--from-run"]) == 0
    prof = load_profile(out)
    host, ts = Overhead(**prof.overhead), prof.time_scale
    assert ts == pytest.approx(TRUE["time_scale"], rel=0.05)
    assert host.token_s == pytest.approx(TRUE["token_s"], rel=0.2)
    assert host.request_s + host.admit_s == pytest.approx(TRUE["request_s"], rel=0.15)
    fixed = prof.coefficients["decode_step_s"]
    assert ts * fixed + host.step_s == pytest.approx(1.1 * fixed + TRUE["step_s"], rel=0.03)
    record = prof.fit["from_run"]
    assert record["heldout"] == "leave-one-run-out" and len(record["heldout_error"]) == 2
    for errs in record["heldout_error"].values():
        assert abs(errs["ttft_mean"]) < 0.05 and abs(errs["tpot_mean"]) < 0.05
    spread = record["term_spread"]
    assert spread["step_s"]["partner"] == "time_scale" and spread["step_s"]["shared"] > 0.9
    assert spread["admit_s"]["partner"] == "request_s" and spread["admit_s"]["shared"] > 0.9
    low, high = spread["token_s"]["leave_one_out"]
    assert low <= host.token_s * 1.2 and high >= host.token_s * 0.8 and low <= high
    printed = capsys.readouterr().out
    assert "step_s" in printed and "<- loose" in printed and "(loose: " in printed
    with capsys.disabled():  # what docs/calibration.md quotes (pytest -s shows it)
        print("\n" + "\n".join(line for line in printed.splitlines()
                               if "shared" in line or "no run tried" in line))
    [(_, point)] = expand_sweep(apply_overrides(load_scenario(SCENARIO), [
        CONTINUOUS, "workload.rate=3.0", f"cost.profile='{out}'"]))
    dep = resolve(point)
    assert dep.request_s == host.request_s and "+ host overhead" in dep.cost_source
    # a simulated run says no machine: the fitted profile claims none (not the base's)
    assert "fingerprint" not in prof.provenance and "fingerprint_note" in prof.provenance


def test_the_fitted_profile_holds_where_the_runs_were_served(tmp_path: Path) -> None:
    _synthetic(tmp_path / "run", rates="3.0")
    summaries = json.loads((tmp_path / "run" / "summary.json").read_text())
    machine = {**this_machine("cpu", 1), "device": "Some Other CPU"}
    summaries[0]["fingerprint"] = machine
    (tmp_path / "run" / "summary.json").write_text(json.dumps(summaries))
    out = tmp_path / "fitted.json"
    args = _args("--from-run", str(tmp_path / "run"), "--scenario", SCENARIO, "--set",
                 CONTINUOUS, "--set", "workload.rate=3.0", "--fit", "time_scale,request_s",
                 "--out", str(out))
    assert from_run_command(args, argv=["calibrate", "--from-run"]) == 0
    assert load_profile(out).provenance["fingerprint"] == machine


def _bench(path: Path, **settings: object) -> Path:
    """A vLLM bench result from a simulated burst of 12 requests (one failed, dropped)."""
    rng = np.random.default_rng(1)
    reqs = table([(0.0, int(p), int(o)) for p, o in zip(rng.integers(16, 200, 12),
                                                          rng.integers(4, 30, 12), strict=True)])
    profile = load_profile(Path("simulator/profiles") / TINY)
    cost = HostCost(profile.build_fitted(), Overhead(token_s=4e-4, request_s=5e-3))
    res = simulate(reqs, ClusterSpec(ContinuousPolicy(max_num_seqs=8), cost, 4000, 16,
                                     request_s=5e-3))
    times = token_times(res.requests, res.steps).groupby("request_id")["time_s"].apply(list)
    data = {"input_lens": [*reqs["prompt_tokens"], 50], "output_lens": [*reqs["output_tokens"], 0],
            "ttfts": [t[0] for t in times] + [0.0],
            "itls": [np.diff(t).tolist() for t in times] + [[]],
            "errors": [""] * 12 + ["boom"], "request_rate": float("inf"), **settings}
    path.write_text(json.dumps(data))
    return path


def test_vllm_bench_burst_is_fitted_request_by_request(tmp_path: Path) -> None:
    path = _bench(tmp_path / "bench.json")
    [run] = read_runs(path)
    assert run.per_request and len(run.requests) == 12 and (run.requests["arrival_s"] == 0).all()
    out = tmp_path / "fitted.json"
    args = _args("--from-run", str(path), "--scenario", SCENARIO, "--set", CONTINUOUS,
                 "--set", f"cost.profile='{TINY}'", "--fit", "token_s,request_s", "--out",
                 str(out))
    assert from_run_command(args) == 0
    host = Overhead(**load_profile(out).overhead)
    assert host.token_s == pytest.approx(4e-4, rel=0.02)
    assert host.request_s == pytest.approx(5e-3, rel=0.02)


def test_vllm_bench_without_send_times_fits_distributions(tmp_path: Path) -> None:
    [closed] = read_runs(_bench(tmp_path / "c.json", max_concurrency=4))
    assert not closed.per_request and closed.requests["client_id"].tolist()[:5] == [0, 1, 2, 3, 0]
    [paced] = read_runs(_bench(tmp_path / "p.json", request_rate=2.0))
    assert not paced.per_request and paced.requests["arrival_s"].is_monotonic_increasing
    assert any("fitted on distributions" in n for n in paced.notes)


@pytest.mark.parametrize(("make", "message"), [
    (lambda d: d, "a folder without summary.json and requests.parquet"),
    (lambda d: d / "nowhere", "no such file or folder"),
    (lambda d: _simulated(d), "holds simulated results (`servesim run`), kind 'simulated'"),
    (lambda d: _bench(d / "b.json", ttfts=None), "field 'ttfts' is missing or not a list"),
])
def test_unreadable_runs_are_named(tmp_path: Path, make, message: str, capsys) -> None:
    path = make(tmp_path)
    args = _args("--from-run", str(path), "--scenario", SCENARIO, "--set", CONTINUOUS,
                 "--out", str(tmp_path / "x.json"))
    assert from_run_command(args) == 2
    err = capsys.readouterr().err
    assert err.startswith("servesim: error: ") and message in err and str(path) in err


def test_bad_command_lines(tmp_path: Path, capsys) -> None:
    _synthetic(tmp_path / "run", rates="3.0")
    common = ["--from-run", str(tmp_path / "run"), "--out", str(tmp_path / "x.json")]
    assert from_run_command(_args(*common)) == 2
    assert "--from-run needs --scenario" in capsys.readouterr().err
    assert from_run_command(_args(*common, "--scenario", SCENARIO)) == 2  # a 9-point sweep
    assert "choose one deployment with --set" in capsys.readouterr().err
    assert from_run_command(_args(*common, "--scenario", SCENARIO, "--set", CONTINUOUS,
                                  "--fit", "time_scale,bogus_s")) == 2
    assert "--fit: ['bogus_s']" in capsys.readouterr().err


def _simulated(folder: Path) -> Path:
    """A folder ``servesim run`` wrote: simulated, not measured."""
    from simulator.runner import run_point, write_results

    [(labels, point)] = expand_sweep(apply_overrides(load_scenario(SCENARIO), [
        CONTINUOUS, "workload.rate=3.0", "workload.num_requests=5"]))
    write_results([run_point(labels, point)], folder / "sim")
    return folder / "sim"
