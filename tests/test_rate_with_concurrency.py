"""An open loop capped at C requests in flight (``workload.max_concurrency``), as vLLM
``bench serve --request-rate R --max-concurrency C`` sends.

Timelines are checked by hand against a cost of ``step_s + prefill_token_s * P``.
"""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pytest
from helpers import TokenCost, timeline

from simulator.cluster import ClusterSpec, simulate
from simulator.errors import ConfigError
from simulator.measured.vllm_bench import bench_arrivals
from simulator.policies import ContinuousPolicy
from simulator.workload.build import build_requests
from simulator.workload.config import WorkloadConfig

FIXED = {"prompt": {"dist": "fixed", "tokens": 4}, "output": {"dist": "fixed", "tokens": 1}}


def _run(workload: dict, cost: TokenCost, request_s: float = 0.0):  # type: ignore[no-untyped-def]
    cfg = WorkloadConfig.from_dict({**FIXED, **workload})
    built = build_requests(cfg, np.random.default_rng(0), None)
    spec = ClusterSpec(ContinuousPolicy(), cost, 1000, 4, request_s=request_s,
                       check_invariants=True)
    return built, simulate(built.table, spec, max_concurrency=built.max_concurrency)


def _max_in_flight(records: pd.DataFrame) -> int:
    """Most requests between send (arrival_s) and finish at once; ends before starts."""
    events = sorted([(t, 1) for t in records["arrival_s"]]
                    + [(t, -1) for t in records["finish_s"]], key=lambda e: (e[0], e[1]))
    level = top = 0
    for _, step in events:
        level += step
        top = max(top, level)
    return top


def test_cap_one_sends_each_request_when_the_last_ends() -> None:
    # rate 10/s constant: due at 0, 0.1, 0.2, 0.3. One 1-token request takes one 0.25 s
    # step (prefill gives its only token), so with one slot the sends are 0, 0.25, 0.5, 0.75
    built, res = _run({"arrival": "constant", "rate": 10.0, "num_requests": 4,
                       "max_concurrency": 1}, TokenCost(step_s=0.25))
    assert built.table["arrival_s"].tolist() == pytest.approx([0.0, 0.1, 0.2, 0.3])
    assert res.requests.sort_values("request_id")["arrival_s"].tolist() == [
        0.0, 0.25, 0.5, 0.75]
    assert timeline(res.requests) == [(0, 0.0, 0.25, 0.25), (1, 0.25, 0.5, 0.5),
                                      (2, 0.5, 0.75, 0.75), (3, 0.75, 1.0, 1.0)]
    ttft = res.requests["first_token_s"] - res.requests["arrival_s"]
    assert ttft.round(9).tolist() == [0.25] * 4  # from the send: no client wait inside


def test_a_free_slot_sends_on_time_a_full_one_at_the_release() -> None:
    # cap 2, due at 0, 0.1, 0.2, 0.3; 0.25 s a step. r0 sent 0, runs 0-0.25. r1 sent on time
    # at 0.1 (a slot is free), waits for the engine: 0.25-0.5. r2 due 0.2 waits for r0's
    # slot: sent 0.25. A request released by a finish reaches the engine just after the step
    # starting at that instant was formed (as a closed-loop client's next request with no
    # think time), so r2 runs 0.5-0.75; r3 due 0.3 takes r1's slot at 0.5 and runs 0.75-1.
    _, res = _run({"arrival": "constant", "rate": 10.0, "num_requests": 4,
                   "max_concurrency": 2}, TokenCost(step_s=0.25))
    sent = res.requests.sort_values("request_id")["arrival_s"].round(9).tolist()
    assert sent == [0.0, 0.1, 0.25, 0.5]
    assert timeline(res.requests) == [(0, 0.0, 0.25, 0.25), (1, 0.25, 0.5, 0.5),
                                      (2, 0.5, 0.75, 0.75), (3, 0.75, 1.0, 1.0)]


@pytest.mark.parametrize("cap", [1, 3, 7])
def test_the_cap_is_never_exceeded_and_sends_keep_due_order(cap: int) -> None:
    workload = {"arrival": "poisson", "rate": 50.0, "num_requests": 60, "max_concurrency": cap,
                "prompt": {"dist": "uniform", "low": 2, "high": 40},
                "output": {"dist": "uniform", "low": 1, "high": 12}}
    cfg = WorkloadConfig.from_dict(workload)
    built = build_requests(cfg, np.random.default_rng(3), None)
    spec = ClusterSpec(ContinuousPolicy(), TokenCost(step_s=0.02, prefill_token_s=0.001),
                       1000, 4, check_invariants=True)
    res = simulate(built.table, spec, max_concurrency=cap)
    rec = res.requests.sort_values("request_id").reset_index(drop=True)
    assert (rec["status"] == "finished").all()
    assert _max_in_flight(rec) == cap  # reached (50 req/s outruns the server) and kept
    due = built.table.sort_values("request_id")["arrival_s"].to_numpy()
    assert (rec["arrival_s"].to_numpy() >= due).all()  # never sent before it is due
    assert rec["arrival_s"].is_monotonic_increasing  # first due, first sent


def test_request_s_counts_in_flight_from_the_send() -> None:
    # request_s 0.05: a request occupies its slot from the send (API server time included),
    # so with cap 1 each send follows the previous finish: 0, 0.3, 0.6
    _, res = _run({"arrival": "constant", "rate": 10.0, "num_requests": 3,
                   "max_concurrency": 1}, TokenCost(step_s=0.25), request_s=0.05)
    rec = res.requests.sort_values("request_id")
    assert rec["arrival_s"].round(9).tolist() == [0.0, 0.3, 0.6]
    assert rec["finish_s"].round(9).tolist() == [0.3, 0.6, 0.9]


def test_rate_inf_with_a_cap_is_the_closed_loop_of_that_many_clients() -> None:
    cost = TokenCost(step_s=0.5, prefill_token_s=0.125)
    lengths = {"prompt": {"dist": "fixed", "tokens": 4}, "output": {"dist": "fixed", "tokens": 3}}
    capped = {"arrival": "poisson", "rate": math.inf, "num_requests": 7, "max_concurrency": 3,
              **lengths}
    closed = {"arrival": "closed", "concurrency": 3, "num_requests": 7,
              "client_start": "together", **lengths}
    _, a = _run(capped, cost)
    _, b = _run(closed, cost)
    assert timeline(a.requests) == timeline(b.requests)
    pd.testing.assert_series_equal(a.requests.sort_values("request_id")["arrival_s"],
                                   b.requests.sort_values("request_id")["arrival_s"])
    assert _max_in_flight(a.requests) == 3


def test_a_cap_as_large_as_the_run_changes_nothing() -> None:
    cost = TokenCost(step_s=0.02, prefill_token_s=0.001)
    workload = {"arrival": "poisson", "rate": 20.0, "num_requests": 30}
    _, free = _run(workload, cost, request_s=0.01)
    _, capped = _run({**workload, "max_concurrency": 30}, cost, request_s=0.01)
    pd.testing.assert_frame_equal(free.requests, capped.requests)


@pytest.mark.parametrize(("extra", "words"), [
    ({"max_concurrency": 0}, ">= 1"),
    ({"max_concurrency": 2.0}, "whole number"),
    ({"arrival": "closed", "concurrency": 2, "max_concurrency": 2}, "only for an open loop"),
])
def test_bad_caps_are_refused(extra: dict, words: str) -> None:
    with pytest.raises(ConfigError, match="workload.max_concurrency") as err:
        WorkloadConfig.from_dict({"arrival": "poisson", "rate": 1.0, **extra})
    assert words in str(err.value)


def test_vllm_bench_at_a_finite_rate_replays_with_the_cap() -> None:
    data = json.loads('{"request_rate": 4.0, "max_concurrency": 8, "burstiness": 1.0}')
    times, clients, known, how = bench_arrivals(5, data)
    assert clients is None and not known and len(times) == 5
    assert "max_concurrency = 8" in how and "not modelled" not in how


def test_the_engine_replay_sends_on_the_same_rule() -> None:
    # engine/serving.py's arrivals, without a model: cap 1, due at 0, 0.1, 0.2, 0.3
    from engine.serving import _Arrivals
    from simulator.served_requests import read_arrivals

    table = pd.DataFrame({"request_id": np.arange(4), "arrival_s": [0.0, 0.1, 0.2, 0.3],
                          "prompt_tokens": 4, "output_tokens": 1})
    arrivals = _Arrivals(read_arrivals(table), max_concurrency=1)
    sent = []
    for end in (0.25, 0.5, 0.75, 1.0):
        [seq] = arrivals.pop_due(end - 0.25)
        sent.append(seq.arrival_s)
        assert arrivals.next_due() == math.inf  # the slot is taken: next send after a finish
        seq.finish_s = end
        arrivals.done(seq, end)
        # the freed slot is held until the replay has decided its next step, as the
        # simulator's driver sends through an event after the step's end
        assert arrivals.next_due() == math.inf
        arrivals.release_held()
    assert sent == [0.0, 0.25, 0.5, 0.75] and arrivals.unsent == 0
    with pytest.raises(ValueError, match="only for an open loop"):
        _Arrivals(read_arrivals(table.assign(arrival_s=np.nan, client_id=0)), 1)


def test_validate_replays_a_paced_capped_bench_file_with_the_cap(tmp_path, capsys) -> None:  # type: ignore[no-untyped-def]
    from servesim.cli import main

    scenario = tmp_path / "s.toml"
    scenario.write_text('name = "cap"\nseed = 3\n[model]\nname = "tiny"\nweight_dtype = "fp32"\n'
                        '[hardware]\ngpu = "cpu"\n[policy]\nname = "continuous"\n'
                        '[workload]\narrival = "poisson"\nrate = 9.0\nnum_requests = 50\n')
    bench = tmp_path / "b.json"  # 1000 req/s: all four due within a few ms; one slot
    bench.write_text(json.dumps({
        "input_lens": [40, 50, 60, 70], "output_lens": [4, 5, 6, 3], "ttfts": [0.02] * 4,
        "itls": [[0.01] * 3, [0.01] * 4, [0.01] * 5, [0.01] * 2], "errors": [""] * 4,
        "request_rate": 1000.0, "max_concurrency": 1}))
    out = tmp_path / "out"
    assert main(["validate", str(scenario), "--measured", str(bench), "--out", str(out),
                 "--json"]) == 0
    capsys.readouterr()
    sim = pd.read_parquet(out / "simulated" / "requests.parquet").sort_values("arrival_s")
    assert len(sim) == 4 and _max_in_flight(sim) == 1
    assert (sim["arrival_s"].to_numpy()[1:] == sim["finish_s"].to_numpy()[:-1]).all()


def test_calibrate_from_run_replays_a_capped_bench_file_with_the_cap(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from dataclasses import replace as dc_replace

    from calibrate.from_run import Calibration, Target, replay
    from calibrate.run_records import read_runs
    from simulator.cluster import ClusterSpec
    from simulator.policies import ContinuousPolicy

    bench = tmp_path / "b.json"  # 1000 req/s, one slot: each send waits for the last finish
    bench.write_text(json.dumps({
        "input_lens": [40, 50, 60, 70], "output_lens": [4, 5, 6, 3], "ttfts": [0.02] * 4,
        "itls": [[0.01] * 3, [0.01] * 4, [0.01] * 5, [0.01] * 2], "errors": [""] * 4,
        "request_rate": 1000.0, "max_concurrency": 1}))
    (run,) = read_runs(bench)
    assert run.max_concurrency == 1
    spec = ClusterSpec(ContinuousPolicy(), TokenCost(step_s=0.25), kv_blocks=1000, block_size=16)
    capped = replay(Target(run, spec), Calibration())
    free = replay(Target(dc_replace(run, max_concurrency=None), spec), Calibration())
    # one at a time, every request's TTFT is one 0.25 s step; uncapped, they share steps
    assert np.allclose(capped.ttft_s, 0.25)
    assert not np.allclose(free.ttft_s, 0.25)
