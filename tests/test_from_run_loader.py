"""``servesim calibrate --from-run`` reads every input through the one loader of measured
runs (simulator/measured/): servesim folders with or without per-token times, folders
written by ``servesim serve --records-out``, client files; and refuses folders that hold no
measurement. No torch."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from calibrate.run_records import read_runs
from calibrate.synthetic_run import write_run
from servesim.calibrate_from_run import add_from_run_arguments, from_run_command
from simulator.costs import load_profile
from simulator.errors import ConfigError
from simulator.fingerprint import this_machine
from simulator.results_manifest import ENGINE, seal_results
from simulator.runner import run_point, write_results
from simulator.scenario import apply_overrides, expand_sweep, load_scenario

SCENARIO = "scenarios/validate-cpu.toml"
TINY = "cpu__tiny__fp32__tp1.json"
# the deployment the runs are served with; the fit replays it
DEPLOYMENT = ["policy.name='continuous'", f"cost.profile='{TINY}'", "workload.num_requests=40"]
EPOCH = 1796129791.0  # GuideLLM's send times are epoch seconds


def _points(*sets: str) -> list:
    return expand_sweep(apply_overrides(load_scenario(SCENARIO), [*DEPLOYMENT, *sets]))


def _run(folder: Path, *sets: str, time_scale: float = 1.5) -> Path:
    """The simulator's own run of the deployment with every step ``time_scale`` x slower
    (no jitter, no host overhead), written as an engine run folder, then stripped of
    tokens.parquet: what a fit must find is ``time_scale``, from TTFT and E2E alone."""
    write_run(_points(*sets, f"cost.time_scale={time_scale}", "cost.jitter_cv=0"), folder)
    (folder / "tokens.parquet").unlink()
    return folder


def _fit(tmp_path: Path, measured: Path, *sets: str) -> float:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out")
    add_from_run_arguments(parser)
    out = tmp_path / "fitted.json"
    args = parser.parse_args(["--from-run", str(measured), "--scenario", SCENARIO,
                              *[a for s in [*DEPLOYMENT, *sets] for a in ("--set", s)],
                              "--fit", "time_scale", "--out", str(out)])
    assert from_run_command(args, argv=["calibrate"]) == 0
    return load_profile(out).time_scale


def test_a_folder_without_token_times_fits(tmp_path: Path) -> None:
    folder = _run(tmp_path / "run", "workload.rate=3.0")
    [run] = read_runs(folder)
    rec = pd.read_parquet(folder / "requests.parquet").sort_values("arrival_s").iloc[0]
    # TPOT = (E2E - TTFT) / (output - 1), from the records alone
    assert run.tpot_s[0] == pytest.approx((rec.finish_s - rec.first_token_s)
                                          / (rec.output_tokens - 1), rel=1e-12)
    assert run.ttft_s[0] == pytest.approx(rec.first_token_s - rec.arrival_s, rel=1e-12)
    # the base profile has time_scale 1: the fit must find the 1.5 the run was made with
    assert _fit(tmp_path, folder, "workload.rate=3.0") == pytest.approx(1.5, rel=0.01)


def test_a_served_folder_fits_and_names_its_machine(tmp_path: Path) -> None:
    """As ``servesim serve --records-out`` writes it: kind engine, requests from clients,
    the machine in the manifest only (its summary names none)."""
    folder = _run(tmp_path / "served", "workload.rate=3.0")
    machine = {**this_machine("cpu", 1), "device": "The Serving CPU"}
    files = [folder / f for f in ("summary.json", "requests.parquet", "steps.parquet")]
    seal_results(folder, ENGINE, files, machine=machine, scenario="servesim serve", points=1,
                 requests_from="clients")
    [run] = read_runs(folder)
    assert run.fingerprint == machine and run.per_request
    assert _fit(tmp_path, folder, "workload.rate=3.0") == pytest.approx(1.5, rel=0.01)
    prof = load_profile(tmp_path / "fitted.json")
    assert prof.provenance["fingerprint"] == machine


def test_a_folder_of_several_points_gives_one_run_per_point(tmp_path: Path) -> None:
    folder = _run(tmp_path / "run", "workload.rate=[2.0, 4.0]")
    runs = read_runs(folder)
    assert [r.point for r in runs] == [0, 1]
    assert [r.name for r in runs] == [f"{folder} point 0", f"{folder} point 1"]
    assert [r.policy for r in runs] == ["continuous", "continuous"]
    assert [len(r.requests) for r in runs] == [40, 40]


def _simulated(folder: Path) -> Path:
    """A folder ``servesim run`` wrote."""
    [(labels, point)] = _points("workload.rate=3.0")
    write_results([run_point(labels, point)], folder)
    return folder


def _validation_folder(folder: Path) -> Path:
    """A folder ``servesim validate`` wrote before manifests (its comparison.json says so)."""
    folder.mkdir()
    (folder / "summary.json").write_text("[{}]")
    pd.DataFrame({"point": [0]}).to_parquet(folder / "requests.parquet")
    (folder / "comparison.json").write_text("{}")
    return folder


@pytest.mark.parametrize(("make", "named"), [
    (lambda d: _simulated(d / "sim"),
     "holds simulated results (`servesim run`), kind 'simulated' (its manifest.json says so)"),
    (lambda d: _validation_folder(d / "val"),
     "holds a validation report (`servesim validate`), kind 'validation' (no manifest; "
     "inferred from its comparison.json)"),
])
def test_folders_without_a_measurement_are_refused(tmp_path: Path, make, named: str) -> None:
    folder = make(tmp_path)
    with pytest.raises(ConfigError, match="not a measurement") as e:
        read_runs(folder)
    assert named in str(e.value) and str(folder) in str(e.value)


def _guidellm(records: pd.DataFrame, path: Path) -> Path:
    """The requests of ``records`` as GuideLLM 0.8 writes them (benchmarks.json)."""
    rows = []
    for r in records.itertuples():
        start = EPOCH + r.arrival_s
        rows.append({"request_start_time": start, "prompt_tokens": int(r.prompt_tokens),
                     "output_tokens": int(r.output_tokens),
                     "time_to_first_token_ms": (r.first_token_s - r.arrival_s) * 1000,
                     "info": {"timings": {"request_start": start,
                                          "last_token_iteration": EPOCH + r.finish_s}}})
    doc = {"metadata": {"guidellm_version": "0.8.1"},
           "benchmarks": [{"requests": {"successful": rows, "errored": [], "incomplete": []}}]}
    path.write_text(json.dumps(doc))
    return path


def test_a_guidellm_file_and_a_folder_give_the_same_targets(tmp_path: Path) -> None:
    folder = _run(tmp_path / "run", "workload.rate=3.0")
    records = pd.read_parquet(folder / "requests.parquet")
    [f] = read_runs(folder)
    [g] = read_runs(_guidellm(records[records["status"] == "finished"], tmp_path / "b.json"))
    assert len(f.requests) == len(g.requests) == 40 and f.per_request and g.per_request
    cols = ["prompt_tokens", "output_tokens"]
    assert g.requests[cols].equals(f.requests[cols])
    # GuideLLM's clock starts at its first send; epoch seconds near 1.8e9 hold ~0.24 us
    arrival = f.requests["arrival_s"].to_numpy()
    np.testing.assert_allclose(g.requests["arrival_s"], arrival - arrival[0], atol=1e-6, rtol=0)
    for name in ("ttft_s", "tpot_s", "e2e_s"):
        np.testing.assert_allclose(getattr(g, name), getattr(f, name), atol=1e-6, rtol=0)


def test_a_vllm_bench_file_says_its_rate_and_the_arrivals_assumed(tmp_path: Path) -> None:
    """What the dashboard's Validation page takes from the loader instead of re-reading."""
    from simulator.measured import load_measured

    data = {"input_lens": [10, 20], "output_lens": [3, 2], "ttfts": [0.1, 0.2],
            "itls": [[0.01, 0.03], [0.02]], "errors": ["", ""], "request_rate": 4.0,
            "duration": 2.0}
    path = tmp_path / "bench.json"
    path.write_text(json.dumps(data))
    run = load_measured(path)
    assert run.offered_rate == 4.0 and run.figures == {"duration": 2.0}
    assert run.assumed_arrivals.startswith("no send times: arrivals drawn at request_rate 4/s")
    assert run.assumed_arrivals in run.notes and not run.arrivals_known
    [target] = read_runs(path)
    assert target.e2e_s.tolist() == pytest.approx([0.14, 0.22])  # TTFT + the sum of ITLs
    assert target.tpot_s.tolist() == pytest.approx([0.02, 0.02])
    path.write_text(json.dumps({**data, "request_rate": "inf"}))
    assert load_measured(path).offered_rate is None  # a burst: no rate to replay at


def test_calibrate_reads_a_bench_file_at_the_seed_it_is_given(tmp_path: Path) -> None:
    """``calibrate --from-run F --bench-seed 42``: the file's send times rebuilt from seed
    42, which its duration fits (the second request, sent at seed 42's first gap at 1
    req/s, 0.469 s, ends 0.1 s before it); seed 0's first gap, 0.796 s, would end it 0.23 s
    after the duration, so at the default the arrivals are drawn."""
    from simulator.workload.arrivals import vllm_bench_sends

    sends = vllm_bench_sends(1.0, 2, seed=42)
    data = {"input_lens": [10, 20], "output_lens": [3, 2], "ttfts": [0.1, 0.2],
            "itls": [[0.01, 0.03], [0.02]], "errors": ["", ""], "request_rate": 1.0,
            "duration": float(sends[1] + 0.22 + 0.1)}
    path = tmp_path / "bench.json"
    path.write_text(json.dumps(data))
    args = _from_run_args("--from-run", str(path), "--bench-seed", "42")
    assert args.bench_seed == 42
    [target] = read_runs(path, args.bench_seed)
    assert target.requests["arrival_s"].tolist() == pytest.approx(sends.tolist())
    [drawn] = read_runs(path)
    assert drawn.requests["arrival_s"].tolist() != pytest.approx(sends.tolist())
    assert drawn.requests["arrival_s"].tolist() != pytest.approx(
        vllm_bench_sends(1.0, 2).tolist())


def _from_run_args(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    add_from_run_arguments(parser)
    return parser.parse_args(list(argv))
