"""``servesim plan --disaggregated``: the disaggregated candidates' table and verdict.

The sizing is ``simulator.capacity.disagg_plan``; this module runs it after the
aggregated plan and formats its rows beside the aggregated answer (docs/fleet.md).
"""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from simulator.capacity.disagg_plan import DisaggCandidate, plan_disaggregated
from simulator.capacity.prices import PriceTable
from simulator.capacity.results import PlanResult
from simulator.capacity.search import step_log_for
from simulator.runner import run_point
from simulator.slo import SLO


def run_disaggregated(candidates: list[Any], section: dict[str, Any] | None,
                      result: PlanResult, slo: SLO, prices: PriceTable
                      ) -> list[DisaggCandidate]:
    """Size a disaggregated twin of every candidate at the plan's target and sample size,
    against its aggregated candidate's own targets where the plan had a record margin."""
    step_log = step_log_for(slo, cluster_check=True)

    def judge(point: dict[str, Any]) -> dict[str, Any]:
        point.setdefault("run", {}).setdefault("step_log", step_log)
        return run_point({}, point).summary

    own = {r.name: SLO.from_dict(r.slo_planned) for r in result.ranked
           if r.slo_planned is not None}  # --record-margin: each twin its candidate's targets
    return plan_disaggregated(candidates, section, result.target_rps, slo,
                              result.requests_per_point, judge, prices, own=own)


def disagg_json(rows: list[DisaggCandidate]) -> list[dict[str, Any]]:
    """The rows for plan.json."""
    return [asdict(r) for r in rows]


def disagg_text(rows: list[DisaggCandidate], result: PlanResult) -> str:
    """The table of disaggregated candidates and how the cheapest compares."""
    lines = ["", "disaggregated (prefill:decode pools sized at the target rate):",
             f"{'candidate':<48} {'P:D':>6} {'GPUs':>5} {'$/hour':>8} {'P99 TTFT':>9} "
             f"{'P99 TPOT':>9} {'P99 ITL':>8} {'points':>6}  status"]
    for r in rows:
        pd = "-" if r.prefill_replicas is None else f"{r.prefill_replicas}:{r.decode_replicas}"
        usd = "-" if r.usd_per_hour is None else f"{r.usd_per_hour:.2f}"
        ttft, tpot, itl = (r.at_target.get(k) for k in ("p99_ttft_ms", "p99_tpot_ms",
                                                          "p99_itl_ms"))
        status = "meets SLO" if r.status == "meets_slo" else f"misses SLO: {r.reason}"
        lines.append(f"{r.name:<48} {pd:>6} {r.num_gpus or '-':>5} {usd:>8} "
                     f"{_ms(ttft):>9} {_ms(tpot):>9} {_ms(itl):>8} {r.points:>6}  {status}")
    meeting = [r for r in rows if r.status == "meets_slo" and r.usd_per_hour is not None]
    best = min(meeting, key=lambda r: r.usd_per_hour or 0.0, default=None)
    agg = result.best
    if best is None:
        lines.append("disaggregated best: none meets the SLO")
    else:
        versus = "" if agg is None or agg.usd_per_hour is None else (
            f" vs aggregated {agg.name}: {agg.num_gpus} GPU(s), ${agg.usd_per_hour:.2f}/hour")
        lines.append(f"disaggregated best: {best.name}, {best.prefill_replicas} prefill + "
                     f"{best.decode_replicas} decode = {best.num_gpus} GPU(s), "
                     f"${best.usd_per_hour:.2f}/hour{versus}")
    return "\n".join(lines)


def _ms(value: Any) -> str:
    return "-" if value is None else f"{float(value):.0f}"
