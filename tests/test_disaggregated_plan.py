"""``plan --disaggregated``: the pool search by hand, with a judge whose answer is known."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from servesim.cli import main
from simulator.capacity.disagg_plan import size_pools, smallest
from simulator.capacity.prices import PriceTable
from simulator.slo import SLO


def test_smallest_gallops_then_bisects() -> None:
    tried: list[int] = []

    def ok(n: int) -> bool:
        tried.append(n)
        return n >= 5

    assert smallest(ok, 16) == 5
    assert tried == [1, 2, 4, 8, 6, 5]  # 8 passes, 4 fails: bisect (4, 8] -> 6, 5
    assert smallest(lambda n: n >= 20, 16) is None
    assert smallest(lambda n: True, 16) == 1


def _judge(need_p: int, need_d: int, seen: list[tuple[int, int, tuple[str, ...]]]) -> Any:
    """A point meets its TTFT targets with >= need_p prefill replicas, its TPOT targets
    with >= need_d decode replicas."""
    def judge(point: dict[str, Any]) -> dict[str, Any]:
        sec, slo = point["disaggregated"], point["slo"]
        p, d = sec["prefill_replicas"], sec["decode_replicas"]
        targets = tuple(sorted(k for k in slo if k.endswith("_ms")))
        seen.append((p, d, targets))
        checks = {"ttft": {"met": p >= need_p}}
        if "tpot_ms" in slo:
            checks["tpot"] = {"met": d >= need_d}
        return {"slo": checks, "num_rejected": 0, "num_in_flight": 0, "decode_replicas": d,
                "prefill_gpus": p * 2, "decode_gpus": d * 2, "prefill_gpu_type": "h100-sxm",
                "decode_gpu_type": "h200", "p99_ttft_ms": 100.0, "p99_tpot_ms": 20.0}
    return judge


def test_pools_are_sized_one_after_the_other_and_priced_per_gpu() -> None:
    seen: list[tuple[int, int, tuple[str, ...]]] = []
    slo = SLO.from_dict({"ttft_ms": 500, "tpot_ms": 50})
    prices = PriceTable({"h100-sxm": 3.0, "h200": 4.0}, date="today", source="test")
    out = size_pools("x", {"policy": {"name": "chunked"}}, 10.0, slo, 100,
                     _judge(3, 2, seen), prices)
    # prefill: TTFT only, with 2 decode replicas: 1 x, 2 x, 4 ok, then 3 ok -> 3
    assert seen[:4] == [(1, 2, ("ttft_ms",)), (2, 2, ("ttft_ms",)), (4, 2, ("ttft_ms",)),
                        (3, 2, ("ttft_ms",))]
    # decode with 3 prefill replicas, the whole SLO: 1 x, 2 ok -> 2 (its run is the answer)
    assert seen[4:] == [(3, 1, ("tpot_ms", "ttft_ms")), (3, 2, ("tpot_ms", "ttft_ms"))]
    assert (out.prefill_replicas, out.decode_replicas, out.status) == (3, 2, "meets_slo")
    assert out.num_gpus == 3 * 2 + 2 * 2 and out.points == 6
    assert out.usd_per_hour == 6 * 3.0 + 4 * 4.0


def test_a_pool_that_never_meets_its_target_is_reported() -> None:
    slo = SLO.from_dict({"ttft_ms": 500, "tpot_ms": 50})
    prices = PriceTable({}, date="today", source="test")
    out = size_pools("x", {}, 10.0, slo, 100, _judge(99, 1, []), prices, max_replicas=4)
    assert out.status == "misses_slo" and "4 prefill replicas" in out.reason


TINY = """name = "tiny-disagg"
seed = 0
[model]
name = "tiny"
weight_dtype = "fp32"
[hardware]
gpu = "cpu"
[policy]
name = "chunked"
[workload]
arrival = "poisson"
rate = 2.0
num_requests = 60
prompt = { dist = "fixed", tokens = 64 }
output = { dist = "fixed", tokens = 8 }
[cost]
form = "roofline"
[slo]
ttft_ms = 60000
tpot_ms = 60000
"""


def test_cli_plan_adds_disaggregated_rows(tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    # targets of a minute: the smallest pools, one prefill and one decode replica, meet
    # them at once (2 points: prefill 1 on TTFT, then decode 1 on the whole SLO)
    scenario = tmp_path / "tiny.toml"
    scenario.write_text(TINY)
    args = ["plan", str(scenario), "--out", str(tmp_path / "o"), "--workers", "1",
            "--min-requests", "60", "--min-tail", "1", "--prices", "cpu=1.5", "--no-cache"]
    assert main([*args, "--json"]) == 0
    assert json.loads(capsys.readouterr().out).get("disaggregated") is None  # not asked
    assert main([*args, "--json", "--disaggregated"]) == 0
    rows = json.loads(capsys.readouterr().out)["disaggregated"]
    assert len(rows) == 1
    row = rows[0]
    assert (row["prefill_replicas"], row["decode_replicas"], row["status"]) == (1, 1, "meets_slo")
    assert row["num_gpus"] == 2 and row["usd_per_hour"] == 2 * 1.5 and row["points"] == 2
    assert row["at_target"]["link"] == "infiniband-ndr"  # the default link
    assert main([*args, "--disaggregated"]) == 0
    text = capsys.readouterr().out
    assert "disaggregated best: cpu x1 fp32 chunked, disaggregated, 1 prefill + 1 decode" in text


def test_a_twin_is_sized_against_its_candidates_own_targets() -> None:
    # plan --record-margin: the aggregated candidate was sized against tighter targets than
    # the SLO given; its disaggregated twin gets the same ones (the judge sees them)
    from simulator.capacity.candidates import Candidate
    from simulator.capacity.disagg_plan import plan_disaggregated

    given = SLO.from_dict({"ttft_ms": 500, "tpot_ms": 50})
    tighter = SLO.from_dict({"ttft_ms": 418, "tpot_ms": 44})
    cands = [Candidate(n, {}, {"policy": {"name": "chunked"}}, "h100-sxm", 1)
             for n in ("a", "b")]
    targets: dict[str, list[dict[str, Any]]] = {"a": [], "b": []}

    def judge(point: dict[str, Any]) -> dict[str, Any]:
        targets[point["policy"]["name"]].append(point["slo"])
        return {"slo": {"ttft": {"met": True}, "tpot": {"met": True}}, "num_rejected": 0,
                "num_in_flight": 0, "decode_replicas": 1}

    for c in cands:  # tell the twins apart through their points
        c.point["policy"]["name"] = c.name
    prices = PriceTable({}, date="today", source="test")
    out = plan_disaggregated(cands, None, 10.0, given, 100, judge, prices, own={"a": tighter})
    assert [r.status for r in out] == ["meets_slo", "meets_slo"]
    assert {t["ttft_ms"] for t in targets["a"]} == {418} and targets["a"][-1]["tpot_ms"] == 44
    assert {t["ttft_ms"] for t in targets["b"]} == {500}  # no margin of its own: as given
