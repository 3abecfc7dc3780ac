"""Preemption rules on hand-checkable timelines, and properties of every knob (issue 12).

10 ms per step, KV blocks of 4 tokens; a decode computing position p opens a block when
``p % 4 == 0``.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from helpers import TokenCost, table, timeline

from simulator.cluster import ClusterSpec, simulate
from simulator.kvcache import BlockManager
from simulator.policies import Batch, ContinuousPolicy, ServerState, complete
from simulator.policies.admission import retract_estimate
from simulator.policies.state import Sequence
from simulator.policies.token_ratio import NEW_TOKEN_RATIO_DECAY

STEP = TokenCost(step_s=0.01)
# r0: 8-token prompt (2 blocks), r1: 4 (1 block); 4 blocks in all, 1 free after the prefill.
ROWS = [(0, 8, 4), (0, 4, 6)]


def run(policy: ContinuousPolicy, rows: list[tuple[float, int, int]], kv_blocks: int,
        fast_forward: bool = True):  # noqa: ANN201
    spec = ClusterSpec(policy, STEP, kv_blocks=kv_blocks, block_size=4, check_invariants=True)
    return simulate(table(rows), spec, fast_forward=fast_forward)


@pytest.mark.parametrize("fast_forward", [True, False])
def test_newest_preempts_the_last_admitted(fast_forward: bool) -> None:
    # .01-.02: r0 opens block 3 (position 8, the last free one); r1 needs one for position
    # 4: r1 (newest) is preempted and goes to the head. r0 decodes to token 4 at .04 and
    # frees its blocks; .04-.05 r1 recomputes 4 + 1 tokens (token 2), then tokens 3..6
    # at .06-.09.
    res = run(ContinuousPolicy(), ROWS, 4, fast_forward)
    assert timeline(res.requests) == [(0, 0.0, 0.01, 0.04), (1, 0.0, 0.01, 0.09)]
    assert res.requests["preemptions"].tolist() == [0, 1]


@pytest.mark.parametrize("fast_forward", [True, False])
def test_fewest_outputs_retracts_the_longest_prompt_among_equals(fast_forward: bool) -> None:
    # Same step: both have 1 output; SGLang retracts the longer prompt, r0, although it
    # was scheduled already (its 3 blocks go back; r1 takes one). r0 (8 + 1 = 9 tokens,
    # 3 blocks) cannot come back while r1 holds 2 of 4; r1 decodes tokens 2..6 at
    # .02-.06 and ends; .06-.07 r0 recomputes (token 2), tokens 3, 4 at .08, .09.
    res = run(ContinuousPolicy(preemption="fewest_outputs"), ROWS, 4, fast_forward)
    assert timeline(res.requests) == [(0, 0.0, 0.01, 0.09), (1, 0.0, 0.01, 0.06)]
    assert res.requests["preemptions"].tolist() == [1, 0]
    assert res.steps["num_prefill_tokens"].tolist() == [12, 0, 0, 0, 0, 0, 9, 0, 0]


def test_fewest_outputs_sends_the_retracted_to_the_tail() -> None:
    # As above with max_num_seqs 2 and r2 (4 + 1) arriving at .005: it waits for a seat.
    # At .01-.02 r0 is retracted behind r2: .02-.03 r2 prefills and ends (r1 stalls);
    # r1 decodes tokens 3..6 at .04-.07; r0 recomputes at .07-.08, ends at .10.
    rows = [(0, 8, 4), (0, 4, 6), (0.005, 4, 1)]
    res = run(ContinuousPolicy(preemption="fewest_outputs", max_num_seqs=2), rows, 4)
    assert timeline(res.requests) == [(0, 0.0, 0.01, 0.1), (1, 0.0, 0.01, 0.07),
                                      (2, 0.02, 0.03, 0.03)]
    # newest: r1 is preempted to the head, so it is recomputed with r2 behind it at .04
    res = run(ContinuousPolicy(max_num_seqs=2), rows, 4)
    assert timeline(res.requests) == [(0, 0.0, 0.01, 0.04), (1, 0.0, 0.01, 0.09),
                                      (2, 0.04, 0.05, 0.05)]


def test_retraction_resets_the_ratio_from_what_still_runs() -> None:
    # SGLang: (decoded + 20 x running) / (max_new_tokens + 1), at most 1.
    running = [Sequence(0, 0.0, 4, 100, generated_base=30), Sequence(1, 0.0, 4, 100)]
    assert retract_estimate(running) == pytest.approx((30 + 40) / 201)
    assert retract_estimate([Sequence(2, 0.0, 4, 10, generated_base=5)]) == 1.0


KNOBS = [
    {"admission": "greedy"}, {"admission": "no_evict"}, {"admission": "conservative"},
    {"preemption": "fewest_outputs"}, {"kv_watermark": 0.05},
    {"num_scheduler_steps": 4}, {"max_model_len": 200}, {"padded_prefill": True},
    {"admission": "conservative", "preemption": "fewest_outputs"},
    {"num_scheduler_steps": 3, "kv_watermark": 0.01, "padded_prefill": True},
]


def random_rows(seed: int, n: int = 40) -> list[tuple[float, int, int]]:
    """``n`` Poisson arrivals at 20 req/s with prompts 1..160 and outputs 1..80 tokens."""
    rng = np.random.default_rng(seed)
    arrivals = np.cumsum(rng.exponential(0.05, n))
    return [(float(a), int(p), int(o)) for a, p, o in
            zip(arrivals, rng.integers(1, 161, n), rng.integers(1, 81, n), strict=True)]


@pytest.mark.parametrize(("knobs", "chunked"), list(itertools.product(KNOBS, [False, True])))
def test_invariants_hold_with_every_knob(knobs: dict, chunked: bool) -> None:
    for seed in range(3):
        policy = ContinuousPolicy(max_num_batched_tokens=256, chunked_prefill=chunked, **knobs)
        res = run(policy, random_rows(seed), 40)
        status = res.requests["status"]
        assert status.isin(["finished", "rejected"]).all()
        if knobs.get("admission") == "no_evict":
            assert res.requests["preemptions"].sum() == 0


@pytest.mark.parametrize("seed", range(8))
def test_no_evict_never_preempts_on_random_workloads(seed: int) -> None:
    rng = np.random.default_rng(100 + seed)
    kv_blocks = int(rng.integers(30, 120))
    for chunked in (False, True):
        policy = ContinuousPolicy(admission="no_evict", chunked_prefill=chunked,
                                  max_num_batched_tokens=512)
        res = run(policy, random_rows(seed, 60), kv_blocks)
        assert res.requests["preemptions"].sum() == 0
        assert (res.requests["status"] == "finished").sum() > 0


def test_a_retraction_sets_the_ratio_and_decode_steps_decay_it() -> None:
    # 4 blocks of 16 tokens; r0 (32 + 32) and r1 (16 + 48) prefill (greedy: 3 blocks).
    # At the next step both open a block, 1 is free: SGLang retracts r0 (longer prompt).
    # The ratio becomes (1 + 20 x 1) / (48 + 1) = 3/7 over r1; that step preempted, so it
    # does not decay the ratio; the next decode step takes one decay off.
    state = ServerState(kv=BlockManager(4, 16))
    r0, r1 = Sequence(0, 0.0, 32, 32), Sequence(1, 0.0, 16, 48)
    assert state.arrive(r0) and state.arrive(r1)
    batch = ContinuousPolicy().schedule(state, 0.0)
    assert isinstance(batch, Batch) and [s for s, _ in batch.prefill] == [r0, r1]
    complete(state, batch, 0.0, 0.01)
    sglang = ContinuousPolicy(admission="conservative", preemption="fewest_outputs")
    batch = sglang.schedule(state, 0.01)
    assert isinstance(batch, Batch)
    assert batch.preempted == [r0] and batch.decode == [r1] and list(state.waiting) == [r0]
    assert state.token_ratio.value(state.decode_steps) == pytest.approx(3 / 7)
    complete(state, batch, 0.01, 0.02)
    assert state.decode_steps == 0
    batch = sglang.schedule(state, 0.02)  # r0 (32 + 1 to recompute) does not fit: decode
    assert isinstance(batch, Batch) and batch.decode == [r1] and not batch.prefill
    complete(state, batch, 0.02, 0.03)
    assert state.decode_steps == 1
    assert state.token_ratio.value(1) == pytest.approx(3 / 7 - NEW_TOKEN_RATIO_DECAY)
