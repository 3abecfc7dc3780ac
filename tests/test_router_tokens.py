"""least_outstanding_tokens: the count each replica keeps, and the routing it gives, by hand."""

from __future__ import annotations

import numpy as np
import pandas as pd
import simpy
from helpers import TokenCost, table, timeline

from simulator.cluster import ClusterSpec, simulate
from simulator.fleet.tokens import TokenReplica
from simulator.kvcache import BlockManager
from simulator.policies import ContinuousPolicy, Sequence, StaticPolicy

UNIT = TokenCost(step_s=1.0)  # every step takes 1 s


def _replica(env: simpy.Environment, done: list[Sequence]) -> TokenReplica:
    return TokenReplica(env, 0, ContinuousPolicy(), UNIT, BlockManager(100, 16),
                        on_done=done.append)


def test_the_count_falls_as_tokens_reach_the_client() -> None:
    # one request, prompt 100 + output 3 = 103 tokens; steps of 1 s: the prefill 0-1 emits
    # token 1 (103 - 101 = 2 left), decodes 1-2 and 2-3 emit one each (1, then 0).
    env = simpy.Environment()
    done: list[Sequence] = []
    r = _replica(env, done)
    r.submit(Sequence(0, 0.0, 100, 3))
    seen = []
    for t in (0.5, 1.5, 2.5, 3.5):
        env.run(until=t)
        seen.append(r.tokens_now())
    assert seen == [103, 2, 1, 0]
    assert len(done) == 1


def test_a_fast_forwarded_run_counts_the_steps_that_ended() -> None:
    # prompt 4, output 10: prefill 0-1 (9 left), then 9 decode steps fast-forwarded as one
    # run 1-10; at t = 4.5 steps ending at 2, 3, 4 are done: 9 - 3 = 6 left.
    env = simpy.Environment()
    r = _replica(env, [])
    r.submit(Sequence(0, 0.0, 4, 10))
    env.run(until=4.5)
    assert r.tokens_left == 9  # the run is applied when it ends
    assert r.tokens_now() == 6
    env.run(until=11)
    assert r.tokens_now() == r.tokens_left == 0


def test_a_padded_batch_counts_only_its_live_rows() -> None:
    # static batch of 2: r0 4+3, r1 4+1 (12 tokens). The prefill 0-1 emits both first
    # tokens (5 + 5 off: 2 left, r1 done); the decode run 1-3 serves r0 alone: 1, then 0.
    env = simpy.Environment()
    r = TokenReplica(env, 0, StaticPolicy(batch_size=2), UNIT, BlockManager(100, 16),
                     on_done=lambda seq: None)
    r.submit(Sequence(0, 0.0, 4, 3))
    r.submit(Sequence(1, 0.0, 4, 1))
    seen = []
    for t in (0.5, 1.5, 2.5, 3.5):
        env.run(until=t)
        seen.append(r.tokens_now())
    assert seen == [12, 2, 1, 0]


def test_a_refused_request_takes_its_tokens_off() -> None:
    env = simpy.Environment()
    done: list[Sequence] = []
    r = TokenReplica(env, 0, ContinuousPolicy(), UNIT, BlockManager(2, 16), on_done=done.append)
    r.submit(Sequence(0, 0.0, 100, 3))  # needs 7 blocks of 16; the replica has 2
    assert done[0].reason and r.tokens_left == 0


def test_tokens_route_away_from_a_long_prompt_where_requests_would_not() -> None:
    # A (100+10) -> replica 0; B (4+10) at 0 -> replica 1 (110 vs 0 tokens); C (4+2) at 0.5
    # sees 110 vs 14 -> replica 1. least_outstanding sees 1 vs 1 and sends C to replica 0.
    rows = [(0.0, 100, 10), (0.0, 4, 10), (0.5, 4, 2)]
    spec = ClusterSpec(ContinuousPolicy(), UNIT, kv_blocks=100, num_replicas=2,
                       router="least_outstanding_tokens")
    assert simulate(table(rows), spec).requests["replica"].tolist() == [0, 1, 1]
    spec = ClusterSpec(ContinuousPolicy(), UNIT, kv_blocks=100, num_replicas=2,
                       router="least_outstanding")
    assert simulate(table(rows), spec).requests["replica"].tolist() == [0, 1, 0]


def test_tokens_routing_is_the_same_with_and_without_fast_forward() -> None:
    rng = np.random.default_rng(3)
    n = 300
    t = pd.DataFrame({"request_id": np.arange(n), "arrival_s": np.cumsum(rng.exponential(0.05, n)),
                      "prompt_tokens": rng.integers(1, 400, n),
                      "output_tokens": rng.integers(1, 60, n)})
    cost = TokenCost(0.01, 1e-4, 2e-3)
    spec = ClusterSpec(ContinuousPolicy(max_num_seqs=8), cost, kv_blocks=200, num_replicas=3,
                       router="least_outstanding_tokens")
    fast = simulate(t, spec, fast_forward=True).requests
    slow = simulate(t, spec, fast_forward=False).requests
    assert fast["replica"].tolist() == slow["replica"].tolist()
    assert timeline(fast) == timeline(slow)
    assert set(fast["replica"]) == {0, 1, 2}


def test_a_replica_reading_caches_counts_each_decode_step_once() -> None:
    # As the first case, with exact_reads and no next arrival known (a closed loop behind
    # prefix_affinity, with an autoscaler on KV): each decode is its own step, and the
    # count falls by one token per step, not two (0 at 2.5 and -1 at 3.5 before stop 63)
    env = simpy.Environment()
    done: list[Sequence] = []
    r = TokenReplica(env, 0, ContinuousPolicy(), UNIT, BlockManager(100, 16),
                     on_done=done.append, exact_reads=True)
    r.submit(Sequence(0, 0.0, 100, 3))
    seen = []
    for t in (0.5, 1.5, 2.5, 3.5):
        env.run(until=t)
        seen.append((r.tokens_now(), r.tokens_left))
    assert seen == [(103, 103), (2, 2), (1, 1), (0, 0)]
    assert len(done) == 1
