"""The capacity page's logic: inputs -> ``simulator.capacity.plan`` -> table and verdict.

No streamlit here. ``run_plan`` builds the candidates from a shipped scenario's workload
and the page's lists, and plans with a small, stated sample (``settings_for``): every
point simulates ``requests_per_point`` requests, so the P99 rests on only
``requests_per_point / 100`` requests beyond it (the CLI's rule gives 10,000 and 100).
``MemoryPointCache`` keeps finished points in a dict the page holds for the process, so
new prices re-run nothing, a new target rate re-runs the cluster checks and at most the
rest of a rate search that had stopped once its replica count was certain (its points
never depend on the target), and moving a control back costs nothing.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import pandas as pd

from dashboard.logic.scenario_form import load_shipped, shipped_scenarios
from simulator.capacity import (
    CandidateResult,
    PlanResult,
    PriceTable,
    SearchSettings,
    build_candidates,
    plan,
)
from simulator.point_cache import PointCache
from simulator.slo import SLO

DEFAULT_SCENARIO = "capacity"
DEFAULT_GPUS = ("a100-80gb", "h100-sxm", "h200")  # l40s needs ~40 replicas: slow to check
DEFAULT_POLICIES = ("continuous", "chunked")
DEFAULT_REQUESTS = 500  # per point: the default plan answers in about 5 s on 2 cores
CLUSTER_FACTOR = 10  # a cluster check simulates at most this many x requests_per_point
MAX_STORED_POINTS = 50_000
STATUS_TEXT = {"meets_slo": "meets SLO", "misses_slo": "misses SLO", "infeasible": "infeasible"}


class MemoryPointCache(PointCache):
    """A ``PointCache`` over a caller-owned dict (key -> summary), with a progress hook.

    ``on_point(done)`` is called after every point, simulated or read back.
    """

    def __init__(self, store: dict[str, dict[str, Any]],
                 on_point: Callable[[int], None] | None = None) -> None:
        super().__init__(None)
        self.store = store
        self.on_point = on_point
        self.done = 0  # points simulated or read back so far

    def _tick(self) -> None:
        self.done += 1
        if self.on_point is not None:
            self.on_point(self.done)

    def load(self, key: str) -> dict[str, Any] | None:
        """The stored summary, or None."""
        hit = self.store.get(key)
        if hit is not None:
            self._tick()
        return hit

    def save(self, key: str, point: dict[str, Any], summary: dict[str, Any],
             tables: dict[str, pd.DataFrame] | None = None) -> None:
        """Keep ``summary`` (the oldest entry goes once the store is full)."""
        if len(self.store) >= MAX_STORED_POINTS:
            self.store.pop(next(iter(self.store)))
        self.store[key] = summary
        self._tick()


def plannable_scenarios() -> list[str]:
    """Shipped scenarios with open-loop traffic (a plan sizes for a request rate)."""
    return [name for name in shipped_scenarios()
            if load_shipped(name).get("workload", {}).get("arrival") != "closed"]


def parse_prices(texts: Mapping[str, str]) -> dict[str, float]:
    """Price fields (GPU -> text) as numbers; ValueError naming the GPU and the bad text."""
    out = {}
    for gpu, text in texts.items():
        try:
            value = float(text)
        except ValueError:
            raise ValueError(f"price for {gpu}: {text.strip()!r} is not a number "
                             "(US$ per GPU-hour)") from None
        if not math.isfinite(value) or value < 0:
            raise ValueError(f"price for {gpu}: {text.strip()!r} must be a number >= 0")
        out[gpu] = value
    return out


def settings_for(requests_per_point: int) -> SearchSettings:
    """Search settings with exactly ``requests_per_point`` per point (no tail rule)."""
    return SearchSettings(min_requests=requests_per_point, min_tail=1,
                          max_cluster_requests=CLUSTER_FACTOR * requests_per_point)


def plan_scenario(raw: Mapping[str, Any], model: str) -> dict[str, Any]:
    """The scenario with ``model`` and without its own request count (the page sets it)."""
    out = copy.deepcopy(dict(raw))
    out["model"] = {**out.get("model", {}), "name": model}
    out.get("workload", {}).pop("num_requests", None)
    return out


def default_rate(raw: Mapping[str, Any]) -> float:
    """The scenario's target rate: ``workload.rate``, the highest of a list, or 10 req/s."""
    rate = raw.get("workload", {}).get("rate")
    if isinstance(rate, list):
        rate = max(rate, default=None)
    return float(rate) if isinstance(rate, int | float) and rate > 0 else 10.0


def run_plan(raw: Mapping[str, Any], axes: Mapping[str, Sequence[Any]], target_rps: float,
             slo: Mapping[str, float], prices: Mapping[str, float], requests_per_point: int,
             store: dict[str, dict[str, Any]],
             on_point: Callable[[int], None] | None = None,
             record_margin: float | None = None) -> PlanResult:
    """Plan ``raw``'s workload over the candidate ``axes`` (gpus, tp, policies, dtypes);
    ``record_margin`` as ``servesim plan --record-margin`` takes it (None: the targets as
    given).

    Raises ValueError (``ConfigError``) for bad input, naming it.
    """
    for axis in ("gpus", "tp", "policies"):
        if not axes.get(axis):
            raise ValueError(f"choose at least one of {axis}")
    candidates = build_candidates(dict(raw), {k: list(v) for k, v in axes.items() if v})
    table = PriceTable(dict(prices), "", "")
    return plan(candidates, target_rps, SLO.from_dict(dict(slo)), prices=table,
                settings=settings_for(requests_per_point),
                cache=MemoryPointCache(store, on_point), record_margin=record_margin)


def expected_points(num_candidates: int, settings: SearchSettings) -> int:
    """A rough count of points a plan simulates, for a progress bar (probe, scan, bisection
    and a cluster check or two per candidate)."""
    return max(1, num_candidates * (settings.max_iterations + 3))


def note(r: CandidateResult) -> str:
    """Why a candidate is not the answer: its reason (which says the miss the search saw),
    and by how much its worst target was missed, or ""."""
    m = r.miss
    over = (f"{m['key']} +{(m['factor'] - 1) * 100:.0f}% over its target"
            if m is not None and m["target"] else "")
    return "; ".join(p for p in (r.reason, over) if p)


def plan_table(result: PlanResult) -> pd.DataFrame:
    """The ranked candidates, one row each (units in the column names)."""
    rows = []
    for rank, r in enumerate(result.ranked, start=1):
        rows.append({
            "rank": rank, "candidate": r.name, "status": STATUS_TEXT[r.status],
            "max_rate_per_replica_rps": r.max_rate_rps, "replicas": r.replicas,
            "gpus": r.num_gpus, "usd_per_hour": r.usd_per_hour,
            "usd_per_m_output_tokens": r.usd_per_million_output_tokens,
            "p99_ttft_ms": r.at_target.get("p99_ttft_ms"),
            "p99_tpot_ms": r.at_target.get("p99_tpot_ms"),
            **_planned(r, result),
            "on_pareto_front": r.name in result.pareto, "note": note(r),
        })
    return pd.DataFrame(rows)


def _planned(r: CandidateResult, result: PlanResult) -> dict[str, float | None]:
    """With a record margin: the TTFT and TPOT targets the candidate was sized against
    (None for an infeasible one); {} without."""
    if result.record_margin is None:
        return {}
    planned = r.slo_planned or {}
    return {f"{m}_target_planned_ms": planned.get(f"{m}_ms") for m in ("ttft", "tpot")}


def _slo_text(slo: SLO) -> str:
    return " and ".join(f"P{slo.percentile:g} {k.upper()} ≤ {v:g} ms"
                        for k, v in slo.targets_ms.items())


def verdict(result: PlanResult) -> str:
    """The answer in one or two sentences of markdown."""
    goal = f"{result.target_rps:g} req/s within {_slo_text(result.slo)}"
    best = result.best
    if best is not None:
        per_m = best.usd_per_million_output_tokens
        cost = "" if per_m is None else f", ${per_m:.3f} per million output tokens"
        hourly = (f"**${best.usd_per_hour:.2f} per hour**" if best.usd_per_hour is not None
                  else f"no price for {best.gpu} (give one under Prices)")
        return (f"**Best for {goal}: {best.name}**, {best.replicas} replica(s) = "
                f"{best.num_gpus} GPU(s), {hourly}{cost}.")
    text = f"**No candidate meets the SLO** at {goal}."
    closest = result.closest
    if closest is not None and closest.miss is not None:
        m = closest.miss
        if m["target"]:
            text += (f" Closest: **{closest.name}**, which misses {m['key']} by "
                     f"{(m['factor'] - 1) * 100:.0f}% ({m['value']:.1f} ms vs "
                     f"{m['target']:g} ms).")
        else:
            text += (f" Closest: **{closest.name}**, which loses {m['value']:.0f} "
                     "requests (rejected or unfinished).")
    return text
