"""Property tests: priority scheduling keeps the simulator's invariants with mixed classes
(every request accounted for, rejected ones included; KV conserved; queue in class order)."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pandas as pd
from helpers import TokenCost, assert_accounted
from hypothesis import given, settings
from hypothesis import strategies as st

from simulator.cluster import ClusterSpec, simulate
from simulator.policies import ContinuousPolicy, ServerState
from simulator.policies.priority import PriorityWaiting, ordered, urgency
from simulator.policies.state import Sequence

COST = TokenCost(step_s=0.003, prefill_token_s=1e-4, decode_seq_s=2e-4)

requests = st.lists(
    st.tuples(st.floats(0, 2), st.integers(1, 40), st.integers(1, 30), st.integers(0, 2)),
    min_size=1, max_size=25,
)
policies = st.builds(
    ContinuousPolicy, max_num_seqs=st.integers(1, 6), max_num_batched_tokens=st.integers(8, 64),
    chunked_prefill=st.booleans(), mixed_chunks=st.booleans(), scheduling=st.just("priority"),
    num_scheduler_steps=st.sampled_from([1, 1, 3]), max_model_len=st.sampled_from([0, 0, 50]),
    admission=st.sampled_from(["greedy", "greedy", "no_evict"]),
)


def _table(rows: list[tuple[float, int, int, int]]) -> pd.DataFrame:
    rows = sorted(rows)
    return pd.DataFrame({
        "request_id": np.arange(len(rows)),
        "arrival_s": [r[0] for r in rows],
        "prompt_tokens": [r[1] for r in rows],
        "output_tokens": [r[2] for r in rows],
        "priority_class": [r[3] for r in rows],
    })


@settings(max_examples=150, deadline=None)
@given(rows=requests, policy=policies, kv_blocks=st.integers(4, 40),
       replicas=st.integers(1, 3), fast_forward=st.booleans())
def test_invariants_with_mixed_classes(rows, policy, kv_blocks, replicas,  # type: ignore[no-untyped-def]
                                       fast_forward) -> None:
    spec = ClusterSpec(policy, COST, kv_blocks=kv_blocks, block_size=4, num_replicas=replicas,
                       router="least_outstanding")
    res = simulate(_table(rows), replace(spec, check_invariants=True), fast_forward=fast_forward)
    # every request accounted for, times ordered, KV conserved
    assert_accounted(res, len(rows), kv_blocks)


@settings(max_examples=200, deadline=None)
@given(keys=st.lists(st.tuples(st.integers(0, 3), st.floats(0, 5)), max_size=30),
       ops=st.lists(st.booleans(), max_size=30))
def test_the_priority_queue_stays_sorted(keys, ops) -> None:  # type: ignore[no-untyped-def]
    # arrivals (append) and preemptions (appendleft) in any order; the head is popped
    # whenever ops says so: the queue reads in (class, arrival, id) order throughout.
    from simulator.kvcache import BlockManager

    state = ServerState(kv=BlockManager(num_blocks=8, block_size=4))
    ordered(state)
    assert type(state.waiting) is PriorityWaiting
    seqs = [Sequence(i, a, 4, 4) for i, (_, a) in enumerate(keys)]
    for seq, (k, _) in zip(seqs, keys, strict=True):
        seq.priority = k
    for i, seq in enumerate(seqs):
        (state.waiting.appendleft if i % 3 == 2 else state.waiting.append)(seq)
        if i < len(ops) and ops[i]:
            head = state.waiting.popleft()
            assert all(urgency(head) <= urgency(s) for s in state.waiting)
        order = [urgency(s) for s in state.waiting]
        assert order == sorted(order)
