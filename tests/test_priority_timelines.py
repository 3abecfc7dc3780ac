"""Priority scheduling: hand timelines of queue jumping and of preemption by class.

Every step costs 1 s (``UNIT``), so each time below is a count of steps; the FCFS run of
the same requests is asserted beside each, so the difference is the policy's.
"""

from __future__ import annotations

import pandas as pd
import pytest
from helpers import TokenCost, table, timeline

from simulator.cluster import ClusterSpec, simulate
from simulator.policies import ContinuousPolicy

UNIT = TokenCost(step_s=1.0)


def classed(rows: list[tuple[float, int, int, int]]) -> pd.DataFrame:
    """A request table from (arrival_s, prompt, output, priority_class) rows."""
    out = table([r[:3] for r in rows])
    return out.assign(priority_class=[r[3] for r in rows])


def run(rows: list[tuple[float, int, int, int]], scheduling: str, kv_blocks: int,
        fast_forward: bool, **knobs: int) -> pd.DataFrame:
    policy = ContinuousPolicy(scheduling=scheduling, **knobs)  # type: ignore[arg-type]
    spec = ClusterSpec(policy, UNIT, kv_blocks=kv_blocks, block_size=2, check_invariants=True)
    return simulate(classed(rows), spec, fast_forward=fast_forward).requests


@pytest.mark.parametrize("fast_forward", [True, False])
def test_an_urgent_request_jumps_the_queue(fast_forward: bool) -> None:
    # One request runs at a time. r0 (class 0; 2 prompt, 3 out) runs 0-3: prefill 0-1,
    # decodes 1-2, 2-3. r1 (class 1) arrives at 0.1, r2 (class 0) at 0.2: priority
    # serves r2 next (3-5), r1 last (5-7); FCFS serves them in arrival order. r0 is as
    # urgent as r2, so it is never evicted.
    rows = [(0.0, 2, 3, 0), (0.1, 2, 2, 1), (0.2, 2, 2, 0)]
    prio = run(rows, "priority", 100, fast_forward, max_num_seqs=1)
    fcfs = run(rows, "fcfs", 100, fast_forward, max_num_seqs=1)
    assert timeline(prio) == [(0, 0, 1, 3), (1, 5, 6, 7), (2, 3, 4, 5)]
    assert timeline(fcfs) == [(0, 0, 1, 3), (1, 3, 4, 5), (2, 5, 6, 7)]
    assert prio["preemptions"].sum() == 0


@pytest.mark.parametrize("fast_forward", [True, False])
def test_an_urgent_arrival_evicts_a_batch_request_when_the_cache_is_full(
        fast_forward: bool) -> None:
    # 4 KV blocks of 2 tokens. r0 (class 1; 6 prompt, 2 out) prefills 0-1 into 3 blocks
    # and emits token 1 at 1. r1 (class 0; 4 prompt, 1 out) arrives at 0.5 and needs 2
    # blocks; 1 is free.
    # priority: at 1 r1 evicts r0 (recompute), prefills 1-2 and is done at 2; r0 then
    #   recomputes its 6 + 1 tokens 2-3 (4 blocks), emitting token 2 at 3.
    # fcfs: r1 waits; r0 decodes 1-2 (its 4th block) and is done at 2; r1 runs 2-3.
    rows = [(0.0, 6, 2, 1), (0.5, 4, 1, 0)]
    prio = run(rows, "priority", 4, fast_forward)
    fcfs = run(rows, "fcfs", 4, fast_forward)
    assert timeline(prio) == [(0, 0, 1, 3), (1, 1, 2, 2)]
    assert prio["preemptions"].tolist() == [1, 0]
    assert timeline(fcfs) == [(0, 0, 1, 2), (1, 2, 3, 3)]
    assert fcfs["preemptions"].tolist() == [0, 0]


@pytest.mark.parametrize("fast_forward", [True, False])
def test_no_evict_admission_makes_the_urgent_request_wait_instead(fast_forward: bool) -> None:
    # The same two requests under TensorRT-LLM's no-evict rule: r0 (6 + 2 tokens: 4
    # blocks) reserves the whole cache at 0, so r1 waits for it to finish at 2 and runs
    # 2-3, as FCFS runs them; nobody is evicted
    rows = [(0.0, 6, 2, 1), (0.5, 4, 1, 0)]
    prio = run(rows, "priority", 4, fast_forward, admission="no_evict")  # type: ignore[arg-type]
    assert timeline(prio) == [(0, 0, 1, 2), (1, 2, 3, 3)]
    assert prio["preemptions"].tolist() == [0, 0]


def test_the_eviction_in_the_step_log() -> None:
    # the same run: r0's prefill (6), r1's (4), r0's recompute of 6 + 1 tokens (7). KV
    # after each step: r0's 3 blocks; none (r1 done, r0 evicted); none (r0 done). The
    # queue after step 2 holds r0, evicted before the step.
    rows = [(0.0, 6, 2, 1), (0.5, 4, 1, 0)]
    spec = ClusterSpec(ContinuousPolicy(scheduling="priority"), UNIT, kv_blocks=4,
                       block_size=2, check_invariants=True)
    steps = simulate(classed(rows), spec).steps
    assert steps["num_prefill_tokens"].tolist() == [6, 4, 7]  # r0, r1, r0's recompute
    assert steps["kv_blocks_used"].tolist() == [3, 0, 0]
    assert steps["queue_len"].tolist() == [1, 1, 0]


@pytest.mark.parametrize("fast_forward", [True, False])
def test_a_full_cache_evicts_the_least_urgent_not_the_newest(fast_forward: bool) -> None:
    # 4 blocks of 2 tokens; r0 (class 1) at 0 and r1 (class 0) at 0.5, each 2 prompt + 4
    # out. r0 prefills 0-1 (token 1), r1 1-2 (token 1; r0 stalls); both decode 2-3 and
    # 3-4 (2 blocks each, none free). At 4 both need a 3rd block:
    # priority (vLLM v1: the victim is the max (priority, arrival)): r0 is evicted, r1
    #   decodes 4-5 (done), r0 recomputes 2 + 3 tokens 5-6 (token 4, done at 6);
    # fcfs (newest): r1 is evicted, r0 is done at 5, r1 recomputes 5-6.
    rows = [(0.0, 2, 4, 1), (0.5, 2, 4, 0)]
    prio = run(rows, "priority", 4, fast_forward)
    fcfs = run(rows, "fcfs", 4, fast_forward)
    assert timeline(prio) == [(0, 0, 1, 6), (1, 1, 2, 5)]
    assert prio["preemptions"].tolist() == [1, 0]
    assert timeline(fcfs) == [(0, 0, 1, 5), (1, 1, 2, 6)]
    assert fcfs["preemptions"].tolist() == [0, 1]


@pytest.mark.parametrize("fast_forward", [True, False])
def test_requests_of_one_class_are_served_as_fcfs(fast_forward: bool) -> None:
    # With every request in one class, priority scheduling is FCFS exactly.
    rows = [(0.0, 2, 4, 3), (0.0, 2, 4, 3), (0.3, 4, 2, 3), (0.9, 2, 3, 3)]
    prio = run(rows, "priority", 5, fast_forward, max_num_seqs=2)
    fcfs = run(rows, "fcfs", 5, fast_forward, max_num_seqs=2)
    pd.testing.assert_frame_equal(prio, fcfs)
