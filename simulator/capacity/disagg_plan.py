"""Disaggregated candidates for a plan: the smallest prefill and decode pools for the SLO.

``servesim plan --disaggregated`` sizes, beside each aggregated candidate, the same GPU
split into a prefill and a decode pool (``[disaggregated]``'s link, tp and pool GPUs when
the scenario has the section; docs/fleet.md). Every point runs the whole target rate.

The two pools are sized one after the other, because in this model TTFT depends only on
the prefill pool and the link (a request's first token is out when its KV has crossed),
and TPOT and ITL only on the decode pool:

1. ``P`` = the fewest prefill replicas whose run meets the SLO's TTFT (and mean-queue)
   targets, with ``D0 = 2`` decode replicas (any count gives the same TTFT);
2. ``D`` = the fewest decode replicas whose run with ``P`` meets the whole SLO.

Each is a galloping search (1, 2, 4, ... up to ``max_replicas``, then bisection between
the last fail and the first pass), so a pool of n replicas takes about 2 log2 n points.
It assumes, as the aggregated search does for rates, that more replicas never make a
target worse.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from simulator.capacity.prices import PriceTable
from simulator.metrics_slo import slo_met
from simulator.slo import SLO

Judge = Callable[[dict[str, Any]], dict[str, Any]]  # a point -> its summary


@dataclass(slots=True)
class DisaggCandidate:
    """One disaggregated deployment sized for the target (or the reason it is not)."""

    name: str  # "h100-sxm x1 chunked, disaggregated"
    prefill_replicas: int | None = None
    decode_replicas: int | None = None
    num_gpus: int | None = None
    usd_per_hour: float | None = None
    status: str = "misses_slo"  # "meets_slo" | "misses_slo"
    reason: str = ""
    points: int = 0  # simulations run
    at_target: dict[str, Any] = field(default_factory=dict)  # the answer's figures


def size_pools(name: str, point: dict[str, Any], target_rps: float, slo: SLO,
               num_requests: int, judge: Judge, prices: PriceTable,
               max_replicas: int = 16) -> DisaggCandidate:
    """Size the pools of ``point`` (a scenario point with ``[disaggregated]``) for
    ``target_rps`` within ``slo`` (module docstring); ``judge`` simulates a point."""
    out = DisaggCandidate(name)
    ttft = SLO.from_dict({k: v for k, v in slo.as_dict().items()
                          if k.startswith("ttft") or k in ("percentile", "mean_queue_ms")})

    def run(p: int, d: int, target: SLO) -> dict[str, Any]:
        out.points += 1
        return judge(_at(point, target_rps, num_requests, p, d, target))

    def met(summary: dict[str, Any]) -> bool:
        return slo_met(summary.get("slo") or {}, int(summary.get("num_rejected") or 0),
                       int(summary.get("num_in_flight") or 0)) is True

    prefill = 1
    if ttft.targets_ms or ttft.mean_queue_ms is not None:
        found = smallest(lambda p: met(run(p, 2, ttft)), max_replicas)
        if found is None:
            out.reason = f"TTFT target missed with {max_replicas} prefill replicas"
            return out
        prefill = found
    last: dict[str, Any] = {}

    def whole(d: int) -> bool:
        nonlocal last
        last = run(prefill, d, slo)
        return met(last)

    decode = smallest(whole, max_replicas)
    if decode is None:
        out.reason = f"SLO missed with {prefill} prefill and {max_replicas} decode replicas"
        return out
    summary = run(prefill, decode, slo) if int(last.get("decode_replicas") or 0) != decode \
        else last
    out.prefill_replicas, out.decode_replicas = prefill, decode
    out.num_gpus = int(summary.get("prefill_gpus") or 0) + int(summary.get("decode_gpus") or 0)
    out.status = "meets_slo"
    out.at_target = {k: summary.get(k) for k in (
        "p99_ttft_ms", "p99_tpot_ms", "p99_itl_ms", "output_throughput", "kv_transfer_ms_p99",
        "prefill_utilisation", "decode_utilisation", "link")}
    gpus = (summary.get("prefill_gpu_type"), summary.get("decode_gpu_type"))
    out.usd_per_hour = _usd(prices, gpus, summary)
    return out


def smallest(ok: Callable[[int], bool], most: int) -> int | None:
    """The smallest n in [1, most] with ``ok(n)``, galloping then bisecting (``ok`` is
    taken to be monotone); None when ``ok(most)`` fails too."""
    lo, n = 0, 1  # ok(lo) failed (0: nothing tried)
    while True:
        if ok(n):
            break
        if n >= most:
            return None
        lo, n = n, min(2 * n, most)
    hi = n
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if ok(mid):
            hi = mid
        else:
            lo = mid
    return hi


def _at(point: dict[str, Any], rate: float, num_requests: int, prefill: int, decode: int,
        slo: SLO) -> dict[str, Any]:
    out = copy.deepcopy(point)
    workload = out.setdefault("workload", {})
    workload["rate"] = float(rate)
    workload["num_requests"] = max(int(num_requests), int(workload.get("num_requests") or 0))
    section = out.setdefault("disaggregated", {})
    section.update(enabled=True, prefill_replicas=prefill, decode_replicas=decode)
    out["slo"] = slo.as_dict()
    out.pop("cluster", None)
    return out


def _usd(prices: PriceTable, gpus: tuple[Any, Any], summary: dict[str, Any]) -> float | None:
    """$/hour of both pools at the table's GPU prices (None when a GPU has no price)."""
    total = 0.0
    for gpu, count in zip(gpus, (summary.get("prefill_gpus"), summary.get("decode_gpus")),
                          strict=True):
        price = prices.price(str(gpu))
        if price is None or count is None:
            return None
        total += price * int(count)
    return total


def plan_disaggregated(candidates: list[Any], section: dict[str, Any] | None,
                       target_rps: float, slo: SLO, num_requests: int, judge: Judge,
                       prices: PriceTable, max_replicas: int = 16,
                       own: Mapping[str, SLO] | None = None) -> list[DisaggCandidate]:
    """A disaggregated candidate beside each runnable aggregated one (``Candidate`` of
    capacity/candidates.py): its point with ``[disaggregated]`` = ``section`` (the
    scenario's, or the defaults: both pools on the candidate's GPU and tp, InfiniBand
    NDR); a point the section cannot run is kept with the reason. ``own``: an aggregated
    candidate's own targets by its name (a plan's record margin, capacity/margin.py), which
    its twin is sized against in place of ``slo``."""
    from simulator.errors import CapacityError, ConfigError  # errors: as plan.py reports

    out = []
    for c in candidates:
        name = f"{c.name}, disaggregated"
        if c.infeasible is not None:
            out.append(DisaggCandidate(name, reason=c.infeasible))
            continue
        point = {**copy.deepcopy(c.point), "disaggregated": dict(section or {})}
        try:
            out.append(size_pools(name, point, target_rps, (own or {}).get(c.name, slo),
                                  num_requests, judge, prices, max_replicas))
        except (ConfigError, CapacityError) as e:
            out.append(DisaggCandidate(name, reason=str(e)))
    return out
