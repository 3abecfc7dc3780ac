"""policy.overlap_schedule: the next step is formed while this one runs (SGLang 0.4 on).

Every step costs 10 ms (``TokenCost(step_s=0.01)``), room for everything in the KV cache,
the continuous policy (a prefill-only step whenever a waiting prompt fits)."""

from __future__ import annotations

import pytest
from helpers import TokenCost, table, timeline

from simulator.cluster import ClusterSpec, simulate
from simulator.deployment import resolve
from simulator.policies.continuous import ContinuousPolicy


def run(rows: list[tuple[float, int, int]], overlap: bool, fast_forward: bool = True):  # noqa: ANN201
    spec = ClusterSpec(ContinuousPolicy(overlap_schedule=overlap), TokenCost(step_s=0.01),
                       kv_blocks=1_000, block_size=4, check_invariants=True)
    return simulate(table(rows), spec, fast_forward=fast_forward)


@pytest.mark.parametrize("fast_forward", [True, False])
def test_a_request_arriving_during_a_step_starts_one_step_later(fast_forward: bool) -> None:
    # r0 (4, 6) at 0: prefill .00-.01, then decodes. r1 (4, 2) arrives at .015, during
    # the step .01-.02. Without overlap r1 is prefilled .02-.03 (first token .03; r0
    # pauses a step) and decodes .03-.04. With overlap the step .02-.03 was formed at
    # .01, before r1 came: r0 decodes in it, r1 is prefilled .03-.04 (first token .04) and
    # decodes .04-.05. r0: tokens at .01, .02, .03 (or .04 after r1's prefill) ...
    rows = [(0.0, 4, 6), (0.015, 4, 2)]
    plain = timeline(run(rows, False, fast_forward).requests)
    over = timeline(run(rows, True, fast_forward).requests)
    assert plain == [(0, 0.0, 0.01, 0.07), (1, 0.02, 0.03, 0.04)]
    assert over == [(0, 0.0, 0.01, 0.07), (1, 0.03, 0.04, 0.05)]


def test_an_idle_engine_sees_a_request_at_once() -> None:
    # nothing in flight: r0 at 0 and r1 at .05 (after r0 ended at .02) start on arrival
    rows = [(0.0, 4, 2), (0.05, 4, 2)]
    assert timeline(run(rows, True).requests) == timeline(run(rows, False).requests) == [
        (0, 0.0, 0.01, 0.02), (1, 0.05, 0.06, 0.07)]


def test_with_nothing_else_to_run_a_held_request_starts_at_the_next_decision() -> None:
    # r1 arrives at .015, during r0's last step (.01-.02): at .02 nothing else runs, so
    # the engine, idle, takes r1 at once, as without overlap
    rows = [(0.0, 4, 2), (0.015, 4, 2)]
    assert timeline(run(rows, True).requests) == [(0, 0.0, 0.01, 0.02), (1, 0.02, 0.03, 0.04)]


def test_sglang_0_4_on_0_3_off() -> None:
    got = {v: resolve({"stack": {"name": "sglang", "version": v}}).policy.overlap_schedule
           for v in ("0.2", "0.3", "0.4", "0.5")}
    assert got == {"0.2": False, "0.3": False, "0.4": True, "0.5": True}
    off = resolve({"stack": {"name": "sglang"}, "policy": {"overlap_schedule": False}})
    assert off.policy.overlap_schedule is False  # a scenario's own setting wins


def test_vllm_v1_async_scheduling_from_0_14() -> None:
    got = {v: resolve({"stack": {"name": "vllm-v1", "version": v}}).policy.overlap_schedule
           for v in ("0.8.5", "0.9", "0.13", "0.14", "0.20")}
    assert got == {"0.8.5": False, "0.9": False, "0.13": False, "0.14": True, "0.20": True}


def test_no_overlap_while_speculating() -> None:
    # a replica that speculates decides every step as without the knob (vLLM 0.14 keeps
    # async scheduling off for draft-model speculation): the same records either way,
    # though requests arrive while steps run (Poisson at 20 req/s); without speculation
    # the knob does change them
    from simulator.runner import run_point

    def records(overlap: bool, speculate: bool) -> list[tuple[float, ...]]:
        point = {"name": "x", "model": {"name": "llama-3.1-8b"},
                 "hardware": {"gpu": "h100-sxm"},
                 "policy": {"name": "chunked", "overlap_schedule": overlap},
                 "workload": {"arrival": "poisson", "rate": 20.0, "num_requests": 40,
                              "prompt": {"dist": "fixed", "tokens": 64},
                              "output": {"dist": "fixed", "tokens": 32}}}
        if speculate:
            point["speculative"] = {"num_tokens": 2, "acceptance": 0.7, "draft_layers": 2}
        r = run_point({}, point).result.requests.sort_values("request_id")
        return list(zip(r["first_token_s"].round(12), r["finish_s"].round(12), strict=True))

    assert records(True, True) == records(False, True)
    assert records(True, False) != records(False, False)
