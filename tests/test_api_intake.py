"""The API server's intake (``[cost] overhead`` ``intake_s``; simulator/token_stream.py): a
burst reaches the engine one request at a time, and its tokens wait for the server."""

from __future__ import annotations

import math

import pytest
from helpers import TokenCost, timeline
from test_burst_and_clients import _built

from simulator.cluster import ClusterSpec, simulate
from simulator.costs.host import (
    DEFAULT_FIT_TERMS,
    FIT_TERMS,
    HostCost,
    Overhead,
    intake_request_s,
)
from simulator.metrics import summarize, to_json_safe
from simulator.policies import ContinuousPolicy
from simulator.slo import SLO
from simulator.token_stream import TokenStream

# 0.5 s a step plus 0.125 s a prompt token; prompts of 4 tokens, 3 output tokens
COST = TokenCost(step_s=0.5, prefill_token_s=0.125)


def _run(num: int, intake_s: float, fast_forward: bool = True):  # type: ignore[no-untyped-def]
    table = _built({"arrival": "poisson", "rate": math.inf, "num_requests": num}).table
    cost = HostCost(COST, Overhead(intake_s=intake_s))
    spec = ClusterSpec(ContinuousPolicy(max_num_batched_tokens=8192), cost, 100, 4)
    return simulate(table, spec, fast_forward=fast_forward)


@pytest.mark.parametrize("fast_forward", [True, False])
def test_a_burst_reaches_the_engine_one_at_a_time_and_its_tokens_wait(
        fast_forward: bool) -> None:
    # Four sent at 0; the server takes each in for 1 s: they reach the engine at 1, 2, 3, 4.
    # Engine (prefill first, test_burst_and_clients' policy): 1-2, 2-3, 3-4, 4-5 prefill
    # r0-r3 as each arrives; 5-5.5 and 5.5-6 decode all four. The server is busy taking
    # requests in until 4, so the first tokens emitted at 2 and 3 reach r0 and r1 at 4.
    res = _run(4, 1.0, fast_forward)
    assert timeline(res.requests) == [(0, 1.0, 4.0, 6.0), (1, 2.0, 4.0, 6.0),
                                      (2, 3.0, 4.0, 6.0), (3, 4.0, 5.0, 6.0)]
    assert res.requests["arrival_s"].tolist() == [0.0] * 4  # TTFT counts from the send
    s = to_json_safe(summarize(res.requests, res.steps, SLO(), kv_blocks_total=100))
    assert s["mean_ttft_ms"] == pytest.approx((4 + 4 + 4 + 5) / 4 * 1000)


def test_one_request_pays_the_intake_once() -> None:
    # taken in 0-0.25, prefilled 0.25-1.25 (0.5 + 4 x 0.125), two decode steps to 2.25
    res = _run(1, 0.25)
    assert timeline(res.requests) == [(0, 0.25, 1.25, 2.25)]
    # without the intake the same request: 0-1, done at 2
    assert timeline(_run(1, 0.0).requests) == [(0, 0.0, 1.0, 2.0)]


def test_the_server_queue_takes_requests_and_tokens_in_turn() -> None:
    server = TokenStream(0.0, 0.5)
    assert [server.take(0.0), server.take(0.0), server.take(2.0)] == [0.5, 1.0, 2.5]
    # tokens cost nothing but wait their turn: a step ending at 2.2 hands out at 2.5
    assert server.busy_s == 2.5
    assert TokenStream(0.001).take(3.0) == 3.0  # no intake cost: at once
    with pytest.raises(ValueError, match="both 0"):
        TokenStream(0.0, 0.0)
    with pytest.raises(ValueError, match="intake_s=-1"):
        TokenStream(0.001, -1.0)


def test_intake_s_is_a_host_term_a_scenario_sets_and_a_fit_is_asked_for() -> None:
    assert intake_request_s(HostCost(COST, Overhead(intake_s=2e-3))) == 2e-3
    assert intake_request_s(COST) == 0.0  # type: ignore[arg-type]  # no host overhead
    # calibrate --from-run fits it when named (tests/test_calibrate_server_queue.py), never by
    # default: a run at one load cannot tell it from request_s
    assert "intake_s" in FIT_TERMS and "intake_s" not in DEFAULT_FIT_TERMS
    assert Overhead.from_mapping({"intake_s": 1e-3}, "cost.overhead").intake_s == 1e-3


@pytest.mark.parametrize("fast_forward", [True, False])
def test_a_closed_loops_next_requests_queue_at_the_server_too(fast_forward: bool) -> None:
    # Two clients, no think time; the server takes each request in for 0.25 s. Round one:
    # sent at 0, taken in at 0.25 and 0.5; prefill r0 0.25-1.25, r1 1.25-2.25 (prefill
    # first); decode both 2.25-2.75, 2.75-3.25. Round two, sent at 3.25: taken in at 3.5 and
    # 3.75; prefill r2 3.5-4.5, r3 4.5-5.5; decode both to 6.5. No token waits: the server
    # is done taking requests in before each is emitted.
    table = _built({"arrival": "closed", "concurrency": 2, "num_requests": 4}).table
    cost = HostCost(COST, Overhead(intake_s=0.25))
    spec = ClusterSpec(ContinuousPolicy(max_num_batched_tokens=8192), cost, 100, 4)
    res = simulate(table, spec, fast_forward=fast_forward)
    assert timeline(res.requests) == [(0, 0.25, 1.25, 3.25), (1, 1.25, 2.25, 3.25),
                                      (2, 3.5, 4.5, 6.5), (3, 4.5, 5.5, 6.5)]
    assert res.requests.sort_values("request_id")["arrival_s"].tolist() == [0, 0, 3.25, 3.25]


def test_each_replica_has_its_own_server() -> None:
    # Two replicas, round robin: r0 and r2 to the first, r1 and r3 to the second; each
    # server takes its two in 0-1 and 1-2, so each engine prefills one 1-2 and the other
    # 2-3, then decodes both 3-3.5 and 3.5-4 (one server for all four: 1, 2, 3, 4)
    table = _built({"arrival": "poisson", "rate": math.inf, "num_requests": 4}).table
    cost = HostCost(COST, Overhead(intake_s=1.0))
    spec = ClusterSpec(ContinuousPolicy(max_num_batched_tokens=8192), cost, 100, 4,
                       num_replicas=2)
    res = simulate(table, spec)
    assert timeline(res.requests) == [(0, 1.0, 2.0, 4.0), (1, 1.0, 2.0, 4.0),
                                      (2, 2.0, 3.0, 4.0), (3, 2.0, 3.0, 4.0)]
    assert res.requests.sort_values("request_id")["replica"].tolist() == [0, 1, 0, 1]
