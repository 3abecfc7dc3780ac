"""The autoscaler's figures in the summary (contract 5), and their lines in the text report.

Keys, present only when ``[autoscale]`` is on (docs/fleet.md, docs/metrics.md):

- ``replica_seconds`` = sum over replicas of (billing end - billing start), each replica
  billed from its start (t = 0 for the first ones, cold start included) until it leaves
  after draining, or until the end of the run (``fleet_end_s``: the last request done, or
  the horizon with requests left);
- ``mean_replicas`` = replica_seconds / fleet_end_s; ``peak_replicas``: most billed at once;
- ``cost_usd`` = replica_seconds / 3600 * tp * ``usd_per_gpu_hour``;
- ``replica_timeline``: ``[time_s, billed, serving]`` after each change.
"""

from __future__ import annotations

from typing import Any

from simulator.fleet.members import FleetUsage

FLEET_KEYS = ("fleet_end_s", "replica_seconds", "mean_replicas", "peak_replicas",
              "replicas_started", "usd_per_gpu_hour", "cost_usd", "replica_timeline")


def gpu_price(gpu: str, given: float | None) -> float | None:
    """$/GPU-hour: ``given``, else the shipped price table's (None when it has none)."""
    if given is not None:
        return given
    from simulator.capacity.prices import load_prices  # capacity sits beside, not below

    return load_prices().price(gpu)


def fleet_summary(usage: FleetUsage, tp: int, usd_per_gpu_hour: float | None) -> dict[str, Any]:
    """The summary keys of an autoscaled run (see the module docstring)."""
    cost = (None if usd_per_gpu_hour is None
            else usage.replica_seconds / 3600.0 * tp * usd_per_gpu_hour)
    return {
        "fleet_end_s": usage.end_s,
        "replica_seconds": usage.replica_seconds,
        "mean_replicas": usage.mean_replicas,
        "peak_replicas": usage.peak_replicas,
        "replicas_started": usage.replicas_started,
        "usd_per_gpu_hour": usd_per_gpu_hour,
        "cost_usd": cost,
        "replica_timeline": [list(p) for p in usage.timeline],
    }


def fleet_lines(summary: dict[str, Any], where: str, max_points: int = 12) -> list[str]:
    """Text lines for one point: the autoscaler's figures and a short replica timeline."""
    if "replica_seconds" not in summary:
        return []
    cost = summary.get("cost_usd")
    price = summary.get("usd_per_gpu_hour")
    money = "no price for this GPU" if cost is None else (
        f"cost ${cost:,.2f} at ${price:g}/GPU-hour")
    out = [f"fleet: {where}: {summary['replica_seconds']:,.1f} replica-seconds over "
           f"{summary['fleet_end_s']:,.1f} s, mean {summary['mean_replicas']:.2f} replicas, "
           f"peak {summary['peak_replicas']}, {summary['replicas_started']} started; {money}"]
    timeline = summary.get("replica_timeline") or []
    shown = timeline if len(timeline) <= max_points else [
        *timeline[: max_points - 1], timeline[-1]]
    points = ", ".join(f"{t:g}s:{billed}" + (f"({serving})" if serving != billed else "")
                       for t, billed, serving in shown)
    more = "" if len(shown) == len(timeline) else f" ... ({len(timeline)} changes)"
    out.append(f"fleet: {where}: replicas billed (serving) over time: {points}{more}")
    return out
