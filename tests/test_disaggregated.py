"""Disaggregated prefill/decode by hand: the ideal-link limit, transfer times, the link queue.

Costs are TokenCost (t = step_s + prefill_token_s x prefill tokens + decode_seq_s x
decoding sequences), so every time below is a sum a person can redo.
"""

from __future__ import annotations

import math

import pytest
from helpers import TokenCost, table, timeline

from simulator.cluster import ClusterSpec, SimResult, simulate
from simulator.fleet.disagg_spec import DisaggSpec, PoolSpec
from simulator.policies import ContinuousPolicy
from simulator.specs.links import LINKS, LinkSpec

# a prefill of P tokens takes 0.01 + 0.001 P s; a decode step 0.01 s
COST = TokenCost(step_s=0.01, prefill_token_s=0.001)
POLICY = ContinuousPolicy()  # vLLM v0: a prefill-only step whenever a prompt can start
SLOW = LinkSpec("slow", bandwidth_gbps=1.0, latency_s=0.5)  # 1 GB/s, 0.5 s per transfer
BYTES_PER_TOKEN = 10_000_000  # 100 prompt tokens = 1e9 bytes = 1 s on SLOW


def _disagg(link: LinkSpec, prefill: int = 1, decode: int = 1, scope: str = "replica",
            tp: int = 1, decode_blocks: int = 1000, router: str = "round_robin",
            reserve: str = "before_transfer") -> ClusterSpec:
    pre = PoolSpec("h100-sxm", tp, prefill, POLICY, COST, 1000, router)
    dec = PoolSpec("h100-sxm", tp, decode, POLICY, COST, decode_blocks, router)
    spec = DisaggSpec(pre, dec, link, scope, BYTES_PER_TOKEN, reserve)
    return ClusterSpec(POLICY, COST, decode_blocks, num_replicas=prefill + decode,
                       disaggregated=spec, check_invariants=True)


def _run(rows: list[tuple[float, int, int]], spec: ClusterSpec) -> SimResult:
    return simulate(table(rows), spec)


def test_an_ideal_link_gives_the_aggregated_timeline_of_a_lone_request() -> None:
    # prefill 100 tokens: 0.01 + 0.1 = 0.11 s (first token); 4 decode steps of 0.01 s
    rows = [(0.0, 100, 5)]
    agg = _run(rows, ClusterSpec(POLICY, COST, 1000, check_invariants=True))
    dis = _run(rows, _disagg(LINKS["ideal"]))
    assert timeline(agg.requests) == [(0, 0.0, 0.11, 0.15)]
    assert timeline(dis.requests) == timeline(agg.requests)
    rec = dis.requests.iloc[0]
    assert (rec.prefill_replica, rec.replica) == (0, 1)  # prefilled on 0, decoded on 1
    assert rec.kv_transfer_s == 0.0 and rec.kv_bytes == 100 * BYTES_PER_TOKEN


def test_an_ideal_link_removes_prefill_interference_and_keeps_ttft() -> None:
    # A (prompt 100, output 10) at 0; B (prompt 1000, output 2) at 0.05.
    # Aggregated: A's prefill 0-0.11; B's prefill-only step 0.11-1.12 (0.01 + 1.0) stalls
    # A's decodes, which run 1.12-1.13 (with B's), then 7 more: A ends at 1.21.
    # Disaggregated, ideal link: the prefill pool is the aggregated prefill-only timeline
    # (A first token 0.11, B 1.12); A decodes 9 steps uninterrupted, 0.11 + 0.09 = 0.20.
    rows = [(0.0, 100, 10), (0.05, 1000, 2)]
    agg = _run(rows, ClusterSpec(POLICY, COST, 1000, check_invariants=True))
    dis = _run(rows, _disagg(LINKS["ideal"]))
    assert timeline(agg.requests) == [(0, 0.0, 0.11, 1.21), (1, 0.11, 1.12, 1.13)]
    assert timeline(dis.requests) == [(0, 0.0, 0.11, 0.2), (1, 0.11, 1.12, 1.13)]
    ttft = dis.requests["first_token_s"] - dis.requests["arrival_s"]
    assert ttft.tolist() == pytest.approx((agg.requests["first_token_s"]
                                           - agg.requests["arrival_s"]).tolist())


def test_a_slow_link_adds_latency_plus_bytes_over_bandwidth_to_ttft() -> None:
    # 100 tokens x 1e7 bytes = 1e9 bytes over 1 GB/s: 1 s, plus 0.5 s latency = 1.5 s
    dis = _run([(0.0, 100, 5)], _disagg(SLOW))
    hand = 0.5 + 100 * BYTES_PER_TOKEN / 1e9
    rec = dis.requests.iloc[0]
    assert rec.prefill_done_s == pytest.approx(0.11)
    assert rec.first_token_s == pytest.approx(0.11 + hand)
    assert rec.finish_s == pytest.approx(0.11 + hand + 4 * 0.01)
    assert rec.kv_transfer_s == pytest.approx(hand) and rec.kv_link_wait_s == 0.0


def test_two_transfers_on_one_link_queue_first_come_first_served() -> None:
    # Both prefill in one step (0.01 + 0.2 = 0.21); the first transfer holds the link
    # 0.21-1.71, the second waits 1.5 s and crosses 1.71-3.21.
    dis = _run([(0.0, 100, 3), (0.0, 100, 3)], _disagg(SLOW))
    req = dis.requests.sort_values("request_id")
    assert req["first_token_s"].tolist() == pytest.approx([1.71, 3.21])
    assert req["kv_link_wait_s"].tolist() == pytest.approx([0.0, 1.5])
    assert req["kv_transfer_s"].tolist() == pytest.approx([1.5, 3.0])
    assert dis.transfers is not None and dis.transfers.link_busy_s == pytest.approx([3.0])


def test_a_link_per_prefill_replica_does_not_queue_but_a_pool_link_does() -> None:
    # Round robin: one request per prefill replica, each prefill 0-0.11.
    rows = [(0.0, 100, 3), (0.0, 100, 3)]
    own = _run(rows, _disagg(SLOW, prefill=2, scope="replica")).requests
    shared = _run(rows, _disagg(SLOW, prefill=2, scope="pool")).requests
    assert own["first_token_s"].tolist() == pytest.approx([1.61, 1.61])
    assert sorted(shared["first_token_s"].tolist()) == pytest.approx([1.61, 3.11])


def test_tensor_parallel_pools_send_one_shard_per_gpu_link() -> None:
    # tp 2 on both sides: 2 links in parallel, 1e9 bytes in 0.5 s, plus 0.5 s latency
    rec = _run([(0.0, 100, 2)], _disagg(SLOW, tp=2)).requests.iloc[0]
    assert rec.kv_transfer_s == pytest.approx(1.0)


def test_a_one_token_output_ends_at_its_prefill() -> None:
    rec = _run([(0.0, 100, 1)], _disagg(SLOW)).requests.iloc[0]
    assert (rec.first_token_s, rec.finish_s, rec.replica) == (0.11, 0.11, 0)
    assert math.isnan(rec.kv_transfer_s) and rec.kv_bytes == 0


def test_without_a_reservation_an_arrival_waits_for_decode_blocks() -> None:
    # Decode replica: 10 blocks of 16 tokens. Each request (prompt 100, output 40) needs
    # blocks_for(140) = 9 blocks at the end, so only one decodes at a time. Both prefill
    # in one step (0-0.21) and cross the ideal link at once ("on_arrival": nothing is
    # reserved); B waits at the decode queue for A's blocks: A decodes 0.21-0.60
    # (39 steps), B 0.60-0.99, with its first token out at 0.21.
    dis = _run([(0.0, 100, 40), (0.0, 100, 40)],
               _disagg(LINKS["ideal"], decode_blocks=10, reserve="on_arrival"))
    req = dis.requests.sort_values("request_id")
    assert req["first_token_s"].tolist() == pytest.approx([0.21, 0.21])
    assert req["finish_s"].tolist() == pytest.approx([0.60, 0.99])
    assert req["kv_reserve_wait_s"].tolist() == [0.0, 0.0]


def test_the_kv_is_sent_once_decode_blocks_are_reserved() -> None:
    # The same two requests, "before_transfer" (vLLM's P/D connectors): A reserves
    # blocks_for(100) = 7 of the 10 at its prefill's end (0.21); B needs 7 more and only
    # 3 are free, so its KV stays on the prefill replica until A leaves at 0.60, crosses
    # then (ideal link): B's first token at 0.60, 39 steps to 0.99; it waited 0.39 s.
    dis = _run([(0.0, 100, 40), (0.0, 100, 40)], _disagg(LINKS["ideal"], decode_blocks=10))
    req = dis.requests.sort_values("request_id")
    assert req["first_token_s"].tolist() == pytest.approx([0.21, 0.60])
    assert req["finish_s"].tolist() == pytest.approx([0.60, 0.99])
    assert req["kv_reserve_wait_s"].tolist() == pytest.approx([0.0, 0.39])
    assert req["prefill_done_s"].tolist() == pytest.approx([0.21, 0.21])


def test_sglang_reserves_decode_blocks_before_the_prefill() -> None:
    # "before_prefill" (SGLang's DecodePreallocQueue): A reserves at 0 and prefills alone
    # (0.01 + 0.1 = 0.11), decodes 39 steps to 0.50; B's reservation waits until A
    # leaves (0.50), then B prefills 0.50-0.61 and decodes to 1.00. B's wait, from its
    # arrival, is 0.50 s, and it is queueing time (scheduled at 0.50).
    dis = _run([(0.0, 100, 40), (0.0, 100, 40)],
               _disagg(LINKS["ideal"], decode_blocks=10, reserve="before_prefill"))
    req = dis.requests.sort_values("request_id")
    assert req["first_token_s"].tolist() == pytest.approx([0.11, 0.61])
    assert req["finish_s"].tolist() == pytest.approx([0.50, 1.00])
    assert req["kv_reserve_wait_s"].tolist() == pytest.approx([0.0, 0.50])
    assert req["scheduled_s"].tolist() == pytest.approx([0.0, 0.50])


def test_reservations_are_granted_in_order_and_never_overcommit() -> None:
    # Eight requests on 2 decode replicas of 10 blocks through one prefill replica; with
    # invariants checked every step (check_invariants), each of the three modes serves
    # every request, and no decode replica holds more than one at a time (9 blocks each).
    rows = [(0.01 * i, 100, 40) for i in range(8)]
    for mode in ("before_transfer", "before_prefill", "on_arrival"):
        dis = _run(rows, _disagg(LINKS["ideal"], decode=2, decode_blocks=10, reserve=mode))
        req = dis.requests.sort_values("first_token_s")
        assert (req["status"] == "finished").all(), mode
        for _, one in req.groupby("replica"):
            spans = one[["first_token_s", "finish_s"]].to_numpy()
            # one at a time per decode replica: each starts decoding after the last ended
            assert all(spans[i + 1][1] - spans[i][1] >= 0.39 - 1e-9
                       for i in range(len(spans) - 1)), mode




@pytest.mark.parametrize("reserve", ["before_transfer", "before_prefill", "on_arrival"])
def test_a_request_the_decode_replica_cannot_hold_is_refused_there(reserve: str) -> None:
    # blocks_for(100 + 200) = 19 > the decode replica's 10: nothing is reserved for it, it
    # is prefilled (the prefill pool has 1000 blocks), sent, and refused on arrival, naming
    # the KV cache; the request after it (100 + 40: 9 blocks) is served
    dis = _run([(0.0, 100, 200), (0.0, 100, 40)],
               _disagg(LINKS["ideal"], decode_blocks=10, reserve=reserve))
    req = dis.requests.sort_values("request_id")
    assert req["status"].tolist() == ["rejected", "finished"]
    assert "KV" in req["reason"].iloc[0] and "10" in req["reason"].iloc[0]


def test_text_report_without_a_full_step_log_reads_n_a(tmp_path, capsys) -> None:
    """Found by benchmarks/cli_fuzz.py: with `run.step_log` "summary" or "none" the pools'
    busy shares are unknown (None in the JSON-safe summary), and the text report crashed
    formatting them. It says "n/a"; the JSON keeps null."""
    import json
    from pathlib import Path

    from servesim.cli import main

    scenario = Path(__file__).resolve().parents[1] / "scenarios" / "disaggregated-h100.toml"
    for log in ("summary", "none"):
        capsys.readouterr()
        assert main(["run", str(scenario), "--out", str(tmp_path / log), "--set",
                     f"run.step_log='{log}'", "--set", "workload.num_requests=40",
                     "--set", "policy.name='chunked'"]) == 0
        out = capsys.readouterr().out
        assert "(2 GPUs) busy n/a, decode 2 replica(s) (2 GPUs) busy n/a" in out
        summary = json.loads((tmp_path / log / "summary.json").read_text())[0]
        assert summary["prefill_utilisation"] is None and summary["kv_transfers"] == 40


def test_disagg_lines_without_transfers_read_n_a() -> None:
    from simulator.fleet.disagg_summary import disagg_lines
    from simulator.metrics import to_json_safe

    nan = math.nan
    summary = to_json_safe({
        "prefill_replicas": 1, "decode_replicas": 1, "prefill_gpus": 1, "decode_gpus": 1,
        "link": "ideal", "kv_transfers": 0, "kv_bytes_moved": 0,
        "kv_transfer_ms_mean": nan, "kv_transfer_ms_p99": nan, "kv_link_wait_ms_p99": nan,
        "kv_reserve_wait_ms_mean": nan, "kv_reserve_wait_ms_p99": nan,
        "link_utilisation": 0.0, "prefill_utilisation": 0.5, "decode_utilisation": nan})
    pools, link = disagg_lines(summary, "x")
    assert pools.endswith("busy 50.0%, decode 1 replica(s) (1 GPUs) busy n/a")
    assert ("0 KV transfers over ideal, 0.00 GB; transfer (wait included) mean n/a, p99 "
            "n/a; link wait p99 n/a; link busy 0.0%; wait for decode KV mean n/a, p99 n/a"
            ) in link
