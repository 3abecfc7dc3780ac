"""The speed paths under a router that reads the replicas' prefix caches (prefix_affinity).

A decode run opens its later steps' KV blocks as it ends, evicting cached-free blocks
then; stepping opens each at its step's start. A router that reads a replica's cache at an
arrival inside such a run would find prefixes stepping had evicted, so behind
``prefix_affinity`` no run goes on past an arrival (simulator/replica.py ``exact_reads``).
Against replicas told nothing ahead, one SimPy event per step: the same records and step
logs, over random requests sharing system prompts in small pools (evictions galore),
continuous policies, 2-3 replicas, fast-forward on and off, arrivals known ahead or not, and a
time grid where arrivals tie with step ends.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_speed_paths_replica import COSTS, GRID_COST, _arrivals_unknown, _same

from simulator.cluster import ClusterSpec, SimResult, simulate
from simulator.policies import ContinuousPolicy
from simulator.workload.prefixes import from_lists

# (arrival_s, own prompt tokens, output tokens, shared prefix (segment, tokens) or None)
Row = tuple[float, int, int, tuple[int, int] | None]
shared = st.one_of(st.none(), st.tuples(st.integers(0, 1), st.integers(4, 24)))
requests = st.lists(st.tuples(st.floats(0, 2), st.integers(1, 16), st.integers(1, 80), shared),
                    min_size=1, max_size=25)
# prefix caching runs under continuous batching only
policies = st.builds(ContinuousPolicy, max_num_seqs=st.integers(1, 6),
                     max_num_batched_tokens=st.integers(8, 64), chunked_prefill=st.booleans(),
                     padded_prefill=st.booleans(), long_prompt_alone=st.booleans(),
                     num_scheduler_steps=st.sampled_from([1, 1, 3]),
                     preemption=st.sampled_from(["newest", "fewest_outputs"]),
                     admission=st.sampled_from(["greedy", "no_evict", "conservative"]))
grid_requests = st.lists(st.tuples(st.integers(0, 40).map(lambda i: i * 0.125),
                                   st.integers(1, 30), st.integers(1, 30), shared),
                         min_size=1, max_size=25)


def _simulate(rows: list[Row], spec: ClusterSpec, fast_forward: bool,
              known: bool) -> SimResult:
    rows = sorted(rows, key=lambda r: r[0])
    segments, start, stop = from_lists([[seg] if seg else [] for *_, seg in rows])
    t = pd.DataFrame({"request_id": np.arange(len(rows)),
                      "arrival_s": [r[0] for r in rows],
                      "prompt_tokens": [own + (seg[1] if seg else 0) for _, own, _, seg in rows],
                      "output_tokens": [r[2] for r in rows],
                      "segments_start": start, "segments_stop": stop})
    if known:
        return simulate(t, spec, segments=segments, fast_forward=fast_forward)
    with pytest.MonkeyPatch.context() as mp:
        _arrivals_unknown(mp)
        return simulate(t, spec, segments=segments, fast_forward=fast_forward)


def _spec(policy, cost, kv_blocks: int, replicas: int) -> ClusterSpec:  # type: ignore[no-untyped-def]
    return ClusterSpec(policy, cost, kv_blocks=kv_blocks, block_size=4, num_replicas=replicas,
                       router="prefix_affinity", prefix_caching=True, check_invariants=True)


@settings(max_examples=120, deadline=None)
@given(rows=requests, policy=policies, kv_blocks=st.integers(8, 24),
       replicas=st.integers(2, 3), cost=st.sampled_from(["linear", "roofline", "host"]),
       fast_forward=st.booleans(), known=st.booleans())
@pytest.mark.pure_python
def test_prefix_affinity_routes_as_one_event_per_step(  # type: ignore[no-untyped-def]
    rows, policy, kv_blocks, replicas, cost, fast_forward, known
) -> None:
    spec = _spec(policy, COSTS[cost], kv_blocks, replicas)
    _same(_simulate(rows, spec, fast_forward, known), _simulate(rows, spec, False, False))


@settings(max_examples=60, deadline=None)
@given(rows=grid_requests, policy=policies, kv_blocks=st.integers(8, 24),
       fast_forward=st.booleans())
def test_prefix_affinity_resolves_ties_with_step_ends_the_same_way(  # type: ignore[no-untyped-def]
    rows, policy, kv_blocks, fast_forward
) -> None:
    spec = _spec(policy, GRID_COST, kv_blocks, 2)
    _same(_simulate(rows, spec, fast_forward, True), _simulate(rows, spec, False, False))
