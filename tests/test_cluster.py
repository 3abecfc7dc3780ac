"""Routers, closed loops and horizons: hand-checkable multi-replica timelines."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from helpers import TokenCost, table, timeline

from simulator.cluster import ClusterSpec, simulate
from simulator.errors import CapacityError, ConfigError
from simulator.kv_config import KVCacheConfig
from simulator.kvcache import BlockManager
from simulator.policies import ContinuousPolicy, StaticPolicy
from simulator.router import make_router

UNIT = TokenCost(step_s=1.0)


def test_round_robin_alternates_replicas() -> None:
    spec = ClusterSpec(ContinuousPolicy(), UNIT, kv_blocks=100, num_replicas=2)
    res = simulate(table([(0, 4, 1)] * 4), spec)
    assert res.requests["replica"].tolist() == [0, 1, 0, 1]


def test_least_outstanding_avoids_the_busy_replica() -> None:
    # r0 (10 steps) goes to replica 0; r1 at 0.5 sees outstanding (1, 0) -> replica 1,
    # done at 1.5; r2 at 1.75 sees (1, 0) again -> replica 1 (round robin would say 0).
    spec = ClusterSpec(ContinuousPolicy(), UNIT, kv_blocks=100, num_replicas=2,
                       router="least_outstanding")
    res = simulate(table([(0, 4, 10), (0.5, 4, 1), (1.75, 4, 1)]), spec)
    assert res.requests["replica"].tolist() == [0, 1, 1]


def test_unknown_router_lists_the_known_ones() -> None:
    with pytest.raises(ConfigError, match="least_outstanding"):
        make_router("random")


def test_closed_loop_client_waits_and_thinks() -> None:
    # one client, think 0.5 s: r0 sent at 0 (1 step of 1 s, done at 1); r1 sent at 1.5,
    # done at 2.5; r2 sent at 3.0, done at 4.0.
    t = pd.DataFrame({"request_id": [0, 1, 2], "arrival_s": np.nan, "prompt_tokens": 4,
                      "output_tokens": 1, "client_id": 0, "think_s": [0.0, 0.5, 0.5]})
    res = simulate(t, ClusterSpec(ContinuousPolicy(), UNIT, kv_blocks=100))
    assert res.requests["arrival_s"].tolist() == [0.0, 1.5, 3.0]
    assert timeline(res.requests) == [(0, 0.0, 1.0, 1.0), (1, 1.5, 2.5, 2.5), (2, 3.0, 4.0, 4.0)]


def test_closed_loop_concurrency_bounds_outstanding_requests() -> None:
    n, clients = 40, 3
    t = pd.DataFrame({"request_id": range(n), "arrival_s": np.nan, "prompt_tokens": 8,
                      "output_tokens": 5, "client_id": [i % clients for i in range(n)],
                      "think_s": 0.0})
    res = simulate(t, ClusterSpec(ContinuousPolicy(), TokenCost(0.01, 1e-3, 1e-3), 100))
    assert (res.steps["num_running"] + res.steps["queue_len"]).max() <= clients
    assert (res.requests["status"] == "finished").all()


def test_horizon_leaves_requests_in_flight_and_counts_them() -> None:
    # 1 s per step; r0 needs 5 steps, r1 arrives at 1, r2 at 10 (after the horizon).
    spec = ClusterSpec(StaticPolicy(batch_size=1), UNIT, kv_blocks=100)
    res = simulate(table([(0, 4, 5), (1, 4, 2), (10, 4, 1)]), spec, horizon_s=3.5)
    assert res.requests["status"].tolist() == ["in_flight", "in_flight"]  # r2 never arrived


def test_kv_capacity_from_memory_and_a_clear_error_when_weights_do_not_fit() -> None:
    cfg = KVCacheConfig(block_size=16, gpu_memory_utilization=0.9, reserve_gb=2.0)
    # 80e9 * 0.9 = 72e9 usable; - 16e9 weights - 2e9 reserve = 54e9; / (128 KiB * 16 tokens)
    blocks = cfg.capacity_blocks(memory_bytes=80e9, tp=1, weight_bytes=16e9,
                                 kv_bytes_per_token=131072)
    assert blocks == int(54e9 // (131072 * 16))
    with pytest.raises(CapacityError, match=r"weights 141.0 GB \+ reserve 2.0 GB > usable 21.6 GB"):
        cfg.capacity_blocks(memory_bytes=24e9, tp=1, weight_bytes=141e9, kv_bytes_per_token=1)


def test_kv_capacity_as_a_share_of_the_free_memory() -> None:
    # TensorRT-LLM's rule: 0.9 of what the weights and reserve leave free, not 0.9 of the
    # whole memory less them. 80e9 - 16e9 - 2e9 = 62e9 free; x 0.9 = 55.8e9 (the vLLM
    # rule above: 54e9). Near full memory the two part: 80e9 - 72e9 - 2e9 = 6e9 free, 5.4e9
    # of cache by TensorRT-LLM's rule, where vLLM's keeps 72e9 - 72e9 - 2e9 < 0: none.
    free = KVCacheConfig(block_size=16, gpu_memory_utilization=0.9, reserve_gb=2.0,
                         memory_share="free")
    per_block = 131072 * 16
    assert free.capacity_blocks(memory_bytes=80e9, tp=1, weight_bytes=16e9,
                                kv_bytes_per_token=131072) == int(55.8e9 // per_block)
    assert free.capacity_blocks(memory_bytes=80e9, tp=1, weight_bytes=72e9,
                                kv_bytes_per_token=131072) == int(5.4e9 // per_block) == 2574
    total = KVCacheConfig(block_size=16, gpu_memory_utilization=0.9, reserve_gb=2.0)
    # 80e9 B = 74.51 GiB, each GPU's total as CUDA would report it
    with pytest.raises(CapacityError, match=r"usable 72.0 GB \(0.9 x 1 GPU\(s\) x 80.0 GB, "
                                            r"74.51 GiB each as CUDA reports it\)"):
        total.capacity_blocks(memory_bytes=80e9, tp=1, weight_bytes=72e9,
                              kv_bytes_per_token=131072)
    with pytest.raises(CapacityError, match=r"usable 80.0 GB \(1 GPU\(s\) x 80.0 GB, 74.51"):
        free.capacity_blocks(memory_bytes=80e9, tp=1, weight_bytes=79e9,
                             kv_bytes_per_token=131072)
    with pytest.raises(ConfigError, match="memory_share"):
        KVCacheConfig(memory_share="used")


def test_block_manager_pairs_queries_and_commands() -> None:
    kv = BlockManager(num_blocks=4, block_size=16)
    assert kv.can_allocate(1, 33)  # 3 blocks
    kv.allocate(1, 33)
    assert kv.num_free == 1 and not kv.can_allocate(2, 17)
    kv.allocate(1, 48)  # still 3 blocks
    assert kv.used == 3
    kv.free(1)
    assert kv.num_free == 4
    kv.check()


def test_atomic_write_keeps_the_old_file_when_the_write_fails(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from simulator.atomic import atomic_write

    target = tmp_path / "summary.json"
    atomic_write(target, lambda p: p.write_text("old"))

    def half_write(p):  # type: ignore[no-untyped-def]
        p.write_text("half")
        raise OSError("disk full")

    with pytest.raises(OSError, match="disk full"):
        atomic_write(target, half_write)
    assert target.read_text() == "old"
    assert [p.name for p in tmp_path.iterdir()] == ["summary.json"]  # no temporary left
