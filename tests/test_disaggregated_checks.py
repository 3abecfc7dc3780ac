"""Disaggregated serving: invariants over a busy run, scenario keys, and config errors."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import simpy
from helpers import TokenCost

from simulator.cluster import ClusterSpec
from simulator.driver import Driver
from simulator.errors import CapacityError, ConfigError
from simulator.fleet.disagg_kv import LendingBlockManager
from simulator.fleet.disagg_spec import DisaggSpec, PoolSpec
from simulator.policies import ContinuousPolicy
from simulator.runner import run_point
from simulator.scenario import load_scenario
from simulator.scenario_types import Scenario
from simulator.served_requests import read_arrivals
from simulator.specs.links import LinkSpec

COST = TokenCost(step_s=0.01, prefill_token_s=0.0001, decode_seq_s=0.001)


def _busy_table(n: int, seed: int) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    return pd.DataFrame({
        "request_id": np.arange(n, dtype=np.int64),
        "arrival_s": np.cumsum(rng.exponential(0.02, n)),
        "prompt_tokens": rng.integers(1, 300, n),
        "output_tokens": rng.integers(1, 60, n),
    })


@pytest.mark.parametrize("reserve", ["before_transfer", "before_prefill", "on_arrival"])
@pytest.mark.parametrize("chunked", [False, True])
def test_every_request_finishes_and_both_sides_free_their_kv(chunked: bool,
                                                             reserve: str) -> None:
    # Decode KV of 40 blocks (640 tokens) for prompts up to 300 + outputs up to 60: arrivals
    # queue for blocks and running requests are preempted; the link is slow enough to queue.
    # Every decode-reservation rule ends with nothing held or lent on either side.
    policy = ContinuousPolicy(chunked_prefill=chunked, max_num_batched_tokens=512)
    pre = PoolSpec("h100-sxm", 1, 2, policy, COST, 60, "least_outstanding")
    dec = PoolSpec("h100-sxm", 1, 2, policy, COST, 40, "round_robin")
    link = LinkSpec("t", bandwidth_gbps=1.0, latency_s=0.001)
    spec = ClusterSpec(policy, COST, 40, num_replicas=4, check_invariants=True,
                       disaggregated=DisaggSpec(pre, dec, link, "pool", 100_000, reserve))
    table = _busy_table(300, seed=1)
    env = simpy.Environment()
    arrivals = read_arrivals(table)
    driver = Driver(env, spec, arrivals.seqs, arrivals.closed, arrivals.think_s, True,
                    True)
    env.run()
    records = driver.records.table()
    assert len(records) == 300 and (records["status"] == "finished").all()
    assert driver.num_done == 300
    assert sum(r.state.num_outstanding for r in driver.replicas) == 0
    for r in driver.replicas:
        assert r.state.kv.used == 0
        if isinstance(r.state.kv, LendingBlockManager):
            assert r.state.kv.lent == 0
    preempted = int(records["preemptions"].sum())
    assert preempted > 0  # the decode side did run out of blocks
    # every request with more than one output token crossed the link once
    transfers = driver.fleet.transfers  # type: ignore[union-attr]
    assert sorted(transfers.request_id) == sorted(
        table.loc[table["output_tokens"] > 1, "request_id"].tolist())
    assert sum(transfers.num_bytes) == 100_000 * int(
        table.loc[table["output_tokens"] > 1, "prompt_tokens"].sum())


SCENARIO = "scenarios/disaggregated-h100.toml"


def test_the_shipped_scenario_reports_pools_link_and_transfers() -> None:
    point = load_scenario(SCENARIO)
    point["workload"] = {**point["workload"], "num_requests": 200}
    s = run_point({}, point).summary
    assert (s["prefill_replicas"], s["decode_replicas"], s["num_gpus"]) == (2, 2, 4)
    res = run_point({}, point).result
    req = res.requests
    moved = req.loc[req["kv_bytes"] > 0]
    # Llama-3.1-8B bf16: 2 (K, V) x 32 layers x 8 KV heads x 128 x 2 bytes = 131,072 B/token
    assert s["kv_bytes_moved"] == 131_072 * int(moved["prompt_tokens"].sum())
    assert s["kv_transfers"] == len(moved) == int((req["output_tokens"] > 1).sum())
    total_ms = 1000.0 * moved["kv_transfer_s"]
    assert s["kv_transfer_ms_mean"] == pytest.approx(float(total_ms.mean()))
    # on NDR (50 GB/s) with no wait, a transfer is 5 us + bytes / 50e9
    alone = moved.loc[moved["kv_link_wait_s"] == 0.0].iloc[0]
    assert alone.kv_transfer_s == pytest.approx(5e-6 + alone.kv_bytes / 50e9)
    assert 0 < s["link_utilisation"] < 1 and 0 < s["prefill_utilisation"] <= 1


def _point(**disagg: object) -> dict:
    return {"policy": {"name": "chunked"}, "disaggregated": disagg,
            "workload": {"num_requests": 5}}


@pytest.mark.parametrize(("point", "names"), [
    (_point(link="fibre"), "disaggregated.link = 'fibre'"),
    (_point(prefill_replicas=0), "disaggregated.prefill_replicas = 0"),
    (_point(decode_gpu="tpu"), "disaggregated.decode_gpu = 'tpu'"),
    (_point(decode_policy={"max_num_seqs": 0}), "disaggregated.decode_policy.max_num_seqs"),
    (_point(prefill_policy={"speed": 2}), "disaggregated.prefill_policy.speed"),
    (_point(link_scope="rack"), "disaggregated.link_scope = 'rack'"),
    (_point(prefill_router="least_outstanding_tokens"), "disaggregated.prefill_router"),
])
def test_a_bad_section_names_the_field(point: dict, names: str) -> None:
    with pytest.raises(ConfigError, match=names.replace(".", r"\.").replace("(", r"\(")):
        Scenario.from_dict(point)


@pytest.mark.parametrize(("extra", "names"), [
    ({"policy": {"name": "static"}}, "policy.name = 'static'"),
    ({"cluster": {"replicas": 4}}, "cluster.replicas"),
    ({"kv": {"prefix_caching": True}}, "kv.prefix_caching"),
    ({"admission": {"max_queue": 4}}, r"\[admission\]"),
])
def test_what_the_pools_cannot_run_is_refused_by_name(extra: dict, names: str) -> None:
    point = {**_point(), **extra}
    with pytest.raises(ConfigError, match=names):
        run_point({}, point)


def test_a_pool_that_cannot_hold_the_model_names_its_gpu() -> None:
    point = {**_point(decode_gpu="rtx4090"), "model": {"name": "llama-3.1-70b"},
             "hardware": {"gpu": "h100-sxm", "tp": 4}}
    with pytest.raises(CapacityError, match="disaggregated.decode_gpu"):
        run_point({}, point)
