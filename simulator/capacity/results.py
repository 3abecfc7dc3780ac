"""What a plan returns: each candidate's answer (``CandidateResult``) and the ranked plan
(``PlanResult``, ``servesim plan --json``)."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any

from simulator.capacity.prices import PriceTable
from simulator.capacity.search import SearchSettings
from simulator.slo import SLO

PLAN_VERSION = 1


@dataclass(slots=True)
class CandidateResult:
    """How one candidate fares: its single-replica limit, the cluster it needs, the cost."""

    name: str
    labels: dict[str, Any]
    gpu: str
    tp: int
    status: str  # "meets_slo", "misses_slo" (no replica count met it) or "infeasible"
    reason: str = ""  # why not, for the last two
    saturated_rps: float | None = None  # probe throughput of one replica, req/s
    max_rate_rps: float = 0.0  # highest rate one replica sustained within the SLO
    replicas: int | None = None  # replicas that passed the cluster check (or the last tried)
    num_gpus: int | None = None
    usd_per_hour: float | None = None
    usd_per_million_output_tokens: float | None = None
    at_target: dict[str, Any] = field(default_factory=dict)  # cluster check summary
    miss: dict[str, Any] | None = None  # worst target missed: key, value, target, factor
    simulations: int = 0  # points simulated (or read from the cache) for this candidate
    # of those, points stopped once their verdict was a fail (capacity/early_stop.py): only
    # their pass/fail was read; no figure of theirs is reported
    decided_early: int = 0
    # requests those points served: all of a point's, or those that had left when it stopped
    requests_simulated: int = 0
    # with a record margin (capacity/margin.py): the targets this candidate was sized
    # against (SLO.as_dict) and, per target, how it was tightened; None / {} without one
    slo_planned: dict[str, float] | None = None
    margins: dict[str, Any] = field(default_factory=dict)

    @property
    def latency_ms(self) -> float:
        """P99 TTFT at the target rate (the Pareto front's latency axis); inf if unknown."""
        value = self.at_target.get("p99_ttft_ms")
        return math.inf if value is None else float(value)


@dataclass(slots=True)
class PlanResult:
    """Every candidate ranked (cheapest meeting the SLO first) and the Pareto front."""

    target_rps: float
    slo: SLO
    requests_per_point: int
    ranked: list[CandidateResult]
    pareto: list[str]  # names of the candidates on the cost vs P99 TTFT front
    prices: PriceTable
    settings: SearchSettings
    computed: int = 0  # points simulated in this call
    reused: int = 0  # points read from the cache
    # the sample size the SLO asked for; more than requests_per_point when a trace has
    # fewer rows (0: as requests_per_point)
    requests_wanted: int = 0
    # --record-margin: the share of published runs like each candidate its targets cover
    # (capacity/margin.py); None: every candidate sized against ``slo`` as given
    record_margin: float | None = None

    @property
    def best(self) -> CandidateResult | None:
        """The cheapest candidate that meets the SLO, None when none does."""
        return self.ranked[0] if self.ranked and self.ranked[0].status == "meets_slo" else None

    @property
    def given_slo(self) -> SLO | None:
        """The SLO as given where the candidates were sized against targets tightened by a
        record margin (what headroom is then measured under); None without a margin."""
        return self.slo if self.record_margin is not None else None

    @property
    def closest(self) -> CandidateResult | None:
        """When none meets the SLO: the candidate that misses it by the smallest factor."""
        missed = [r for r in self.ranked if r.miss is not None]
        return min(missed, key=lambda r: r.miss["factor"]) if missed else None  # type: ignore[index]

    def to_json(self) -> dict[str, Any]:
        """The plan as JSON-safe data (``servesim plan --json``)."""
        from simulator.metrics import to_json_safe

        closest = self.closest if self.best is None else None
        return to_json_safe({
            "plan_version": PLAN_VERSION, "target_rps": self.target_rps,
            "slo": self.slo.as_dict(), "requests_per_point": self.requests_per_point,
            "requests_wanted": self.requests_wanted or self.requests_per_point,
            "best": self.best.name if self.best else None,
            "closest": closest.name if closest else None,
            "pareto": self.pareto, "candidates": [asdict(r) for r in self.ranked],
            "prices": asdict(self.prices), "settings": asdict(self.settings),
            "points_computed": self.computed, "points_from_cache": self.reused,
            "record_margin": self.record_margin,
        })
