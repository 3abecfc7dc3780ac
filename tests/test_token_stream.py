"""The API server's token stream (``[cost] overhead`` ``stream_s``; simulator/token_stream.py):
hand timelines, the run's closed form against step-by-step, and the closed loop's cap."""

from __future__ import annotations

import importlib
import json
import math
import sys
from pathlib import Path

import numpy as np
import pytest
from helpers import TokenCost, timeline
from test_burst_and_clients import _built

from simulator.cluster import ClusterSpec, simulate
from simulator.costs.host import FIT_TERMS, HostCost, Overhead, stream_token_s
from simulator.metrics import summarize, to_json_safe
from simulator.policies import ContinuousPolicy
from simulator.policies.state import Sequence
from simulator.scenario import apply_overrides
from simulator.slo import SLO
from simulator.token_stream import TokenStream, stream_summary

# 0.5 s a step plus 0.125 s a prompt token (test_burst_and_clients' hand timeline)
COST = TokenCost(step_s=0.5, prefill_token_s=0.125)


def _seqs(n: int) -> list[Sequence]:
    return [Sequence(request_id=i, arrival_s=0.0, prompt_tokens=4, output_tokens=3)
            for i in range(n)]


def test_a_step_hands_out_its_rows_then_its_prompts_one_token_at_a_time() -> None:
    stream = TokenStream(0.001)
    rows, prompt = _seqs(3), Sequence(request_id=9, arrival_s=0.0, prompt_tokens=4,
                                      output_tokens=1)
    rows[1].finish_s = 0.010
    prompt.first_token_s = prompt.finish_s = 0.010  # one output token: its first is its last
    # the server is free: row tokens at 11, 12, 13 ms, the prompt's first (and last) at 14
    stream.step(0.010, rows, 3, [(prompt, 4)], [rows[1], prompt])
    assert rows[1].finish_s == pytest.approx(0.012)
    assert prompt.first_token_s == pytest.approx(0.014) == prompt.finish_s
    assert stream.busy_s == pytest.approx(0.014)
    # a step ending at 12 ms waits for the server (free at 14): its two tokens at 15, 16
    rows[0].finish_s = 0.012
    stream.step(0.012, rows[:2], 2, [], [rows[0]])
    assert rows[0].finish_s == pytest.approx(0.015) and stream.busy_s == pytest.approx(0.016)
    # a step after the server has caught up: nothing waits
    rows[2].finish_s = 0.100
    stream.step(0.100, rows[2:], 1, [], [rows[2]])
    assert rows[2].finish_s == pytest.approx(0.101)


def test_a_run_is_the_steps_one_by_one() -> None:
    rng = np.random.default_rng(3)
    for _ in range(50):
        k, rows = int(rng.integers(1, 30)), int(rng.integers(1, 9))
        ends = np.cumsum(rng.uniform(0.001, 0.01, size=k)) + rng.uniform(0, 0.05)
        tokens = rng.integers(1, rows + 1, size=k)
        busy = float(rng.uniform(0, 0.2))
        token_s = float(rng.uniform(0.0001, 0.003))
        a, b = _seqs(rows), _seqs(rows)
        last = [int(rng.integers(0, k)) for _ in range(rows)]
        for seqs in (a, b):
            for s, j in zip(seqs, last, strict=True):
                s.finish_s = float(ends[j])
        one, many = TokenStream(token_s), TokenStream(token_s)
        one.busy_s = many.busy_s = busy
        for j in range(k):
            done = [s for s, at in zip(a, last, strict=True) if at == j]
            one.step(float(ends[j]), a, int(tokens[j]), [], done)
        many.run(ends, tokens, b, b)
        assert many.busy_s == pytest.approx(one.busy_s, abs=1e-12)
        assert [s.finish_s for s in b] == pytest.approx([s.finish_s for s in a], abs=1e-12)


@pytest.mark.parametrize("fast_forward", [True, False])
def test_the_burst_timeline_through_a_stream_of_a_quarter_second_a_token(
        fast_forward: bool) -> None:
    # Engine (test_burst_and_clients): 0-1.5 prefill r0, r1; 1.5-3 prefill r2, r3; 3-3.5
    # and 3.5-4 decode all four. Server, 0.25 s a token: r0's and r1's first tokens at
    # 1.75 and 2; r2's and r3's at 3.25 and 3.5; the first decode step's four at 3.75-4.5;
    # the last step's four (their last tokens) at 4.75, 5, 5.25, 5.5.
    built = _built({"arrival": "poisson", "rate": math.inf, "num_requests": 4})
    cost = HostCost(COST, Overhead(stream_s=0.25))
    spec = ClusterSpec(ContinuousPolicy(max_num_batched_tokens=8), cost, 100, 4)
    res = simulate(built.table, spec, fast_forward=fast_forward)
    assert timeline(res.requests) == [(0, 0.0, 1.75, 4.75), (1, 0.0, 2.0, 5.0),
                                      (2, 1.5, 3.25, 5.25), (3, 1.5, 3.5, 5.5)]
    assert res.steps["end_s"].max() == 4.0  # the engine's steps are the same
    s = to_json_safe(summarize(res.requests, res.steps, SLO(), kv_blocks_total=100))
    assert s["duration"] == 5.5 and s["output_throughput"] == pytest.approx(12 / 5.5)
    # the server handed out 12 tokens of 0.25 s in 5.5 s: busy 3 s of them
    assert stream_summary(res.requests, 0.25, s["duration"], 1) == {
        "stream_s": 0.25, "stream_utilization": pytest.approx(3 / 5.5)}


@pytest.mark.parametrize("fast_forward", [True, False])
def test_a_closed_loop_is_capped_at_one_token_per_stream_s(fast_forward: bool) -> None:
    # 8 clients in lockstep, 1-token prompts, 20 output tokens, steps of 1 ms + 0.1 ms a
    # decode row: alone, a round is a 1 ms prefill and 19 decode steps of 1.8 ms, 160
    # tokens in 35.2 ms (4,545 a second); a server of 1 ms a token hands out 1,000
    table = _built({"arrival": "closed", "concurrency": 8, "num_requests": 400,
                    "prompt": {"dist": "fixed", "tokens": 1},
                    "output": {"dist": "fixed", "tokens": 20}}).table
    engine = TokenCost(step_s=0.001, decode_seq_s=0.0001)
    spec = ClusterSpec(ContinuousPolicy(), engine, 1000, 16)
    res = simulate(table, spec, fast_forward=fast_forward)
    alone = to_json_safe(summarize(res.requests, res.steps, SLO(), kv_blocks_total=1000))
    spec = ClusterSpec(ContinuousPolicy(), HostCost(engine, Overhead(stream_s=0.001)), 1000, 16)
    res = simulate(table, spec, fast_forward=fast_forward)
    capped = to_json_safe(summarize(res.requests, res.steps, SLO(), kv_blocks_total=1000))
    assert alone["output_throughput"] == pytest.approx(160 / 0.0352)
    assert capped["output_throughput"] == pytest.approx(1000, rel=0.01)
    assert (res.requests["status"] == "finished").sum() == 400


def test_stream_s_is_a_host_term_a_scenario_sets_and_a_fit_is_asked_for() -> None:
    assert stream_token_s(HostCost(COST, Overhead(stream_s=7.5e-5))) == 7.5e-5
    assert stream_token_s(COST) == 0.0  # type: ignore[arg-type]  # no host overhead
    assert "stream_s" in FIT_TERMS  # calibrate --from-run fits it when named
    raw = apply_overrides({"cost": {}}, ["cost.overhead.stream_s=7.5e-5"])
    assert Overhead.from_mapping(raw["cost"]["overhead"], "cost.overhead").stream_s == 7.5e-5
    with pytest.raises(ValueError, match="stream_s and intake_s are both 0"):
        TokenStream(0.0)
    with pytest.raises(ValueError, match="stream_s=-0.001"):
        TokenStream(-0.001)


def _published() -> tuple[object, object]:
    root = Path(__file__).resolve().parents[1]
    sys.path.insert(0, str(root))
    return (importlib.import_module("benchmarks.published_cases"),
            importlib.import_module("benchmarks.published"))


def test_nim_cases_replay_nims_server_and_others_none() -> None:
    pc, _ = _published()
    cases = {c.id: c for c in pc.load_cases()}  # type: ignore[attr-defined]
    nim = cases["nim1.8.0-h100-sxm-llama-3.1-8b-fp8-tp1-200-200-c250"]
    point, notes = pc.scenario_point(nim, max_prompts=1000, use_stack=True,  # type: ignore[attr-defined]
                                     burst_rate=math.inf)
    assert point["cost"]["overhead"]["stream_s"] == pytest.approx(1 / 13348)  # 74.9 us
    assert any("74.9 us" in n for n in notes)
    course = cases["nim1.0-dli-h100-sxm-llama-3-8b-fp16-tp2-200-200-c250"]  # a 16-bit engine
    point, _ = pc.scenario_point(course, max_prompts=1000, use_stack=True,  # type: ignore[attr-defined]
                                 burst_rate=math.inf)
    assert point["cost"]["overhead"]["stream_s"] == pytest.approx(1 / 13348)
    assert point["cost"]["decode_scale"] == 1.14  # the case's own cost setting is kept
    other = next(c for c in cases.values()
                 if c.stack == "trtllm" and not c.stack_version.startswith("nim"))
    point, _ = pc.scenario_point(other, max_prompts=1000, use_stack=True,  # type: ignore[attr-defined]
                                 burst_rate=math.inf)
    assert "stream_s" not in point.get("cost", {}).get("overhead", {})


def test_nims_250_clients_stay_under_the_servers_rate() -> None:
    # NIM 1.8.0's Llama-3.1-8B fp8 200/200 at 250 clients: 12,965 tok/s published; without
    # the server the replay read 19,322 (+49%), with it at most 13,348 (1 / stream_s)
    pc, published = _published()
    case = next(c for c in pc.load_cases()  # type: ignore[attr-defined]
                if c.id == "nim1.8.0-h100-sxm-llama-3.1-8b-fp8-tp1-200-200-c250")
    row = published.run_case(case, max_prompts=1000, burst_rate=math.inf)  # type: ignore[attr-defined]
    sim = row["metrics"]["output_throughput"]["simulated"]
    assert 12000 < sim <= 13348
    row = published.run_case(case, max_prompts=1000, burst_rate=math.inf,  # type: ignore[attr-defined]
                              overrides=["cost.overhead.stream_s=0"])
    assert row["metrics"]["output_throughput"]["simulated"] > 18000


def test_nim_stream_check_bands_the_course_rows_by_rate(tmp_path: Path) -> None:
    _published()
    check = importlib.import_module("benchmarks.nim_stream_check")

    def row(rid: str, tok_s: float, p95: tuple[float, float]) -> dict[str, object]:
        return {"id": rid, "metrics": {
            "output_throughput": {"published": tok_s, "simulated": tok_s},
            "p95_itl_ms": {"published": p95[0], "simulated": p95[1]},
            "mean_tpot_ms": {"published": 10.0, "simulated": 10.0}}}

    base = "nim1.0-dli-h100-sxm-llama-3-8b-fp8-tp2-"
    run = tmp_path / "run.json"
    run.write_text(json.dumps({"rows": [
        row(base + "200-200-c250", 11885.0, (34.0, 10.0)),  # kept: 3.4 published, 1.0 replayed
        row(base + "200-200-c25", 4000.0, (10.0, 10.0)),  # fewer than 50 clients
        row(base + "2000-200-c250", 4445.0, (67.0, 63.0)),  # a 2,000-token prompt
        row("nim1.0-dli-a100-80gb-llama-3-8b-fp16-tp2-200-200-c250", 6235.0, (17.0, 9.0)),
    ]}))
    assert check.rows(run) == [(11885.0, 3.4, 1.0, base + "200-200-c250")]


def test_a_run_reports_how_busy_the_server_was() -> None:
    from simulator.runner import run_point  # noqa: PLC0415

    point = {"name": "stream", "model": {"name": "llama-3.1-8b"},
             "hardware": {"gpu": "h100-sxm"}, "policy": {"name": "continuous"},
             "cost": {"overhead": {"stream_s": 1e-3}},
             "workload": {"arrival": "closed", "concurrency": 64, "num_requests": 640,
                          "prompt": {"dist": "fixed", "tokens": 100},
                          "output": {"dist": "fixed", "tokens": 50}}}
    s = run_point({}, point).summary
    # 64 clients would take ~64 tokens a step of well under 64 ms: the server's 1,000
    # tokens a second caps the run, busy nearly all of it
    assert s["stream_s"] == 1e-3 and s["stream_utilization"] == pytest.approx(1.0, abs=0.02)
    assert s["output_throughput"] == pytest.approx(1000, rel=0.02)
    point["cost"] = {}
    assert "stream_utilization" not in run_point({}, point).summary


def test_a_capped_open_loop_sends_the_next_request_when_the_last_token_arrives() -> None:
    # One slot, two requests due at 0, 0.25 s a token at the server. r0: prefill 0-1 (first
    # token out at 1.25), decodes 1-1.5 and 1.5-2 (its last out at 2.25); r1 is sent then,
    # not at 2: prefill 2.25-3.25 (out at 3.5), decodes to 4.25 (last out at 4.5)
    built = _built({"arrival": "poisson", "rate": math.inf, "num_requests": 2})
    cost = HostCost(COST, Overhead(stream_s=0.25))
    spec = ClusterSpec(ContinuousPolicy(), cost, 100, 4)
    res = simulate(built.table, spec, max_concurrency=1)
    assert timeline(res.requests) == [(0, 0.0, 1.25, 2.25), (1, 2.25, 3.5, 4.5)]


@pytest.mark.parametrize(("output", "finish"), [(3, 3.5), (5, 4.0)])
def test_a_multi_step_chunk_hands_out_the_tokens_it_emitted(output: int, finish: float) -> None:
    # One request, 4 scheduler steps a chunk: prefill 0-1 (first token out at 1.25), then a
    # chunk of four 0.5 s passes, 1-3, whose tokens all come at 3: the 2 left of 3 outputs
    # are out at 3.5, the 4 left of 5 at 4 (the chunk runs its four passes either way)
    built = _built({"arrival": "poisson", "rate": math.inf, "num_requests": 1,
                    "output": {"dist": "fixed", "tokens": output}})
    cost = HostCost(COST, Overhead(stream_s=0.25))
    res = simulate(built.table, ClusterSpec(ContinuousPolicy(num_scheduler_steps=4), cost, 100, 4))
    assert timeline(res.requests) == [(0, 0.0, 1.25, finish)]
