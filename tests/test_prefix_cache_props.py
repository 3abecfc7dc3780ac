"""Property tests of prefix caching: KV conservation, refcounts and request accounting hold
on random small workloads that share prefixes, under eviction and preemption."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pandas as pd
from helpers import TokenCost
from hypothesis import given, settings
from hypothesis import strategies as st

from simulator.cluster import ClusterSpec, simulate
from simulator.policies import ContinuousPolicy
from simulator.workload.prefixes import PrefixSegments, from_lists

COST = TokenCost(step_s=0.003, prefill_token_s=1e-4, decode_seq_s=2e-4)

# (arrival_s, own prompt tokens, output tokens, shared prefix: segment id and tokens or None)
requests = st.lists(
    st.tuples(st.floats(0, 2), st.integers(1, 30), st.integers(1, 20),
              st.one_of(st.none(), st.tuples(st.integers(0, 2), st.integers(1, 24)))),
    min_size=1, max_size=25)
policies = st.builds(ContinuousPolicy, max_num_seqs=st.integers(1, 6),
                     max_num_batched_tokens=st.integers(16, 80), chunked_prefill=st.booleans(),
                     preemption=st.sampled_from(["newest", "fewest_outputs"]))


def _table(rows: list) -> tuple[pd.DataFrame, PrefixSegments]:  # type: ignore[type-arg]
    rows = sorted(rows, key=lambda r: r[0])
    segs = [[(seg[0], seg[1])] if seg else [] for *_, seg in rows]
    segments, start, stop = from_lists(segs)
    table = pd.DataFrame({
        "request_id": np.arange(len(rows)),
        "arrival_s": [r[0] for r in rows],
        "prompt_tokens": [r[1] + (r[3][1] if r[3] else 0) for r in rows],
        "output_tokens": [r[2] for r in rows],
        "segments_start": start, "segments_stop": stop,
    })
    return table, segments


@settings(max_examples=150, deadline=None)
@given(rows=requests, policy=policies, kv_blocks=st.integers(8, 40), replicas=st.integers(1, 2),
       fast=st.booleans(), window=st.sampled_from([0, 0, 2]))
def test_invariants_with_sharing(rows, policy, kv_blocks, replicas, fast, window) -> None:  # type: ignore[no-untyped-def]
    table, segments = _table(rows)
    spec = ClusterSpec(policy, COST, kv_blocks=kv_blocks, block_size=4, num_replicas=replicas,
                       router="least_outstanding", check_invariants=True, prefix_caching=True,
                       window_blocks=window)
    res = simulate(table, spec, segments=segments, fast_forward=fast)  # kv.check() each step
    recs = res.requests
    assert len(recs) == len(rows)
    assert set(recs["status"]) <= {"finished", "rejected"}
    done = recs[recs["status"] == "finished"]
    assert (done["scheduled_s"] < done["first_token_s"]).all()
    cached = done["cached_tokens"].to_numpy()
    assert (cached % 4 == 0).all() and (cached <= done["prompt_tokens"].to_numpy() - 1).all()
    assert (res.steps["kv_blocks_used"] <= kv_blocks).all()
    assert (res.steps.groupby("replica")["kv_blocks_used"].last() == 0).all()
    stats = res.prefix_stats
    assert stats is not None and stats.hit_tokens == int(recs["cached_tokens"].sum())
    assert stats.saved_tokens >= stats.hit_tokens


@settings(max_examples=60, deadline=None)
@given(rows=requests, policy=policies)
def test_nothing_shared_and_nothing_preempted_changes_nothing(rows, policy) -> None:  # type: ignore[no-untyped-def]
    table, _ = _table([(a, p, o, None) for a, p, o, _ in rows])
    spec = ClusterSpec(policy, COST, kv_blocks=1000, block_size=4)
    plain = simulate(table, spec)
    cached = simulate(table, replace(spec, prefix_caching=True), segments=None)
    assert plain.requests.equals(cached.requests.drop(columns="cached_tokens"))
    assert plain.steps.equals(cached.steps)


@settings(max_examples=100, deadline=None)
@given(rows=requests, policy=policies, k=st.integers(1, 4), alpha=st.floats(0, 1),
       kv_blocks=st.integers(12, 40), replicas=st.integers(1, 2))
def test_invariants_with_sharing_and_speculative_steps(rows, policy, k, alpha, kv_blocks,  # type: ignore[no-untyped-def]
                                                       replicas) -> None:
    """Prefix sharing and speculative steps together: a verify's lookahead blocks given back
    never free a shared block, hits stay whole blocks, and every request is accounted for."""
    from simulator.speculative_acceptance import Acceptance

    table, segments = _table(rows)
    spec = ClusterSpec(replace(policy, num_speculative_tokens=k), COST, kv_blocks=kv_blocks,
                       block_size=4, num_replicas=replicas, router="least_outstanding",
                       check_invariants=True, prefix_caching=True,
                       speculative=Acceptance(alpha=alpha, seed=0))
    res = simulate(table, spec, segments=segments)  # kv.check() and the core's checks each step
    recs = res.requests
    assert len(recs) == len(rows) and set(recs["status"]) <= {"finished", "rejected"}
    done = recs[recs["status"] == "finished"]
    assert (done["cached_tokens"].to_numpy() % 4 == 0).all()
    assert (res.steps.groupby("replica")["kv_blocks_used"].last() == 0).all()
    stats = res.spec_stats
    assert stats is not None
    for s, (n, e) in enumerate(zip(stats.row_steps, stats.emitted, strict=True)):
        assert n <= e <= n * (s + 1)  # a row emits 1 .. 1 + s tokens
        if alpha == 1.0:
            assert e == n * (s + 1)  # every draft accepted
