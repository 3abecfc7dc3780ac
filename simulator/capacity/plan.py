"""Capacity planning: the cheapest deployment that serves a target rate within an SLO.

``plan`` sizes every candidate in rounds (each round is one ``map`` over the executor, so
candidates run in parallel and results never depend on the backend or on the number of
workers): the rate search of ``search.py`` for one replica, then
``replicas = ceil(target / max_rate)``, then a check of the whole cluster at the target
rate with its router, adding replicas (up to ``max_extra_replicas``) while it fails. Every
simulated point goes through the point cache, so an interrupted plan resumes.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

from simulator.capacity.candidates import Candidate
from simulator.capacity.pareto import pareto_front
from simulator.capacity.prices import PriceTable, load_prices
from simulator.capacity.search import (
    PROBE_RATE,
    RateSearch,
    SearchSettings,
    at_rate,
    miss_of,
    passes,
    sample_size,
    summary_job,
)
from simulator.errors import ConfigError
from simulator.executors import Executor, SerialExecutor
from simulator.metrics_slo import miss_reason
from simulator.point_cache import PointCache, map_cached
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

    @property
    def best(self) -> CandidateResult | None:
        """The cheapest candidate that meets the SLO, None when none does."""
        return self.ranked[0] if self.ranked and self.ranked[0].status == "meets_slo" else None

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
            "best": self.best.name if self.best else None,
            "closest": closest.name if closest else None,
            "pareto": self.pareto, "candidates": [asdict(r) for r in self.ranked],
            "prices": asdict(self.prices), "settings": asdict(self.settings),
            "points_computed": self.computed, "points_from_cache": self.reused,
        })


Job = tuple[int, dict[str, Any]]  # (candidate index, scenario point)

PlanProgress = Callable[[int, int, int], None]
"""``progress(points_done, candidates_done, candidates_total)``: called as each simulated
(or cached) point comes back and as each candidate's answer is settled."""


@dataclass(slots=True)
class _Tally:
    """Points and candidates done so far, passed on to a :data:`PlanProgress`."""

    total: int
    progress: PlanProgress | None
    points: int = 0
    settled: set[int] = field(default_factory=set)

    def point(self) -> None:
        self.points += 1
        self._tell()

    def settle(self, i: int) -> None:
        if i not in self.settled:
            self.settled.add(i)
            self._tell()

    def _tell(self) -> None:
        if self.progress is not None:
            self.progress(self.points, len(self.settled), self.total)


def _rounds(ex: Executor, cache: PointCache,
            tally: _Tally) -> Callable[[list[Job]], list[dict[str, Any]]]:
    def run(jobs: list[Job]) -> list[dict[str, Any]]:
        points = [p for _, p in jobs]

        def save(i: int, key: str, s: dict[str, Any]) -> None:
            cache.save(key, points[i], s)
            tally.point()

        def load(i: int, key: str, s: dict[str, Any]) -> dict[str, Any]:
            tally.point()
            return s

        return map_cached(ex, summary_job, points, points, cache, "summary", save, load)
    return run


def plan(candidates: list[Candidate], target_rps: float, slo: SLO, *,
         prices: PriceTable | None = None, settings: SearchSettings | None = None,
         executor: Executor | None = None, cache: PointCache | None = None,
         progress: PlanProgress | None = None) -> PlanResult:
    """Size every candidate for ``target_rps`` within ``slo`` and rank them by cost.

    ``progress`` hears of every point and every candidate settled (see PlanProgress).
    """
    if not (isinstance(target_rps, int | float) and math.isfinite(target_rps)
            and target_rps > 0):
        why = ("; inf (every request at once) is a burst, not a rate a deployment can be "
               "sized for" if target_rps == math.inf else "")
        raise ConfigError(f"--rate = {target_rps!r}: must be a finite number > 0 "
                          f"(requests/s){why}")
    if not slo.targets_ms and slo.mean_queue_ms is None:
        raise ConfigError("--slo: no target given; e.g. ttft_p99_ms=500,tpot_p99_ms=50")
    settings = settings or SearchSettings()
    prices = prices or load_prices()
    cache = cache or PointCache(None)
    before = (cache.computed, cache.reused)
    tally = _Tally(len(candidates), progress)
    run = _rounds(executor or SerialExecutor(), cache, tally)
    n = sample_size(slo, settings)
    points = [{**c.point, "slo": slo.as_dict()} for c in candidates]
    results = [CandidateResult(c.name, c.labels, c.gpu, c.tp, "infeasible", c.infeasible or "")
               for c in candidates]
    live = [i for i, c in enumerate(candidates) if c.infeasible is None]
    searches = {i: RateSearch() for i in live}
    for i, c in enumerate(candidates):
        if c.infeasible is not None:
            tally.settle(i)
    _search(searches, points, results, settings, n, run)
    for i, r in enumerate(results):
        if r.status == "misses_slo":
            tally.settle(i)
    _cluster_checks(searches, points, results, target_rps, settings, n, run)
    for i in range(len(results)):
        tally.settle(i)
    for r in results:
        _price(r, prices)
    ranked = sorted(results, key=_rank)
    meeting = [r for r in ranked if r.status == "meets_slo" and r.usd_per_hour is not None]
    front = pareto_front([(r.usd_per_hour or 0.0, r.latency_ms) for r in meeting])
    return PlanResult(target_rps, slo, n, ranked, [meeting[i].name for i in front], prices,
                      settings, cache.computed - before[0], cache.reused - before[1])


def _search(searches: dict[int, RateSearch], points: list[dict[str, Any]],
            results: list[CandidateResult], settings: SearchSettings, n: int,
            run: Callable[[list[Job]], list[dict[str, Any]]]) -> None:
    """Rounds of probe, low check and bisection until every search is done."""
    while True:
        jobs: list[Job] = []
        for i, s in searches.items():
            rate = s.next_rate(settings)
            if rate is not None:
                size = settings.min_requests if rate == PROBE_RATE else n
                jobs.append((i, at_rate(points[i], rate, size)))
        if not jobs:
            break
        for (i, point), summary in zip(jobs, run(jobs), strict=True):
            searches[i].record(point["workload"]["rate"], summary, settings)
            results[i].simulations += 1
    for i, s in searches.items():
        r = results[i]
        r.saturated_rps, r.max_rate_rps = s.mu, s.lo
        if s.lo == 0 and s.failure is not None:
            r.status, r.miss = "misses_slo", miss_of(s.failure)
            r.reason = ("no request finished in the probe" if not s.mu else
                        f"misses the SLO at every rate tried ({len(s.trace)} rates from "
                        f"{s.mu * settings.low_fraction:.3g} req/s up to its capacity); "
                        f"closest: {miss_reason(s.failure)}")


def _cluster_checks(searches: dict[int, RateSearch], points: list[dict[str, Any]],
                    results: list[CandidateResult], target: float, settings: SearchSettings,
                    n: int, run: Callable[[list[Job]], list[dict[str, Any]]]) -> None:
    """Simulate each sized cluster at the target rate; add replicas while it fails."""
    replicas = {i: math.ceil(target / s.lo - 1e-9) for i, s in searches.items() if s.lo > 0}
    for i, k in list(replicas.items()):
        if k > settings.max_replicas:
            r = results[i]
            r.status, r.replicas = "infeasible", None
            r.reason = (f"needs {k:,} replicas ({target:g} req/s at {searches[i].lo:.3g} req/s "
                        f"each), more than the limit of {settings.max_replicas:,} a plan "
                        "simulates; lower --rate or plan for a share of the traffic")
            del replicas[i]
    first = dict(replicas)
    while replicas:
        jobs = [(i, at_rate(points[i], target, min(settings.max_cluster_requests,
                                                  max(n, n * k)), k))
                for i, k in replicas.items()]
        for (i, _), summary in zip(jobs, run(jobs), strict=True):
            r, k = results[i], replicas.pop(i)
            r.simulations += 1
            r.replicas, r.at_target = k, summary
            if passes(summary):
                r.status, r.miss = "meets_slo", None
            elif k - first[i] < settings.max_extra_replicas:
                replicas[i] = k + 1
            else:
                r.status, r.miss = "misses_slo", miss_of(summary)
                r.reason = (f"the cluster check still fails with {k} replicas "
                            f"({first[i]} estimated + {settings.max_extra_replicas}): "
                            f"{miss_reason(summary)}")


def _price(r: CandidateResult, prices: PriceTable) -> None:
    if r.replicas is None:
        return
    r.num_gpus = r.replicas * r.tp
    per_gpu = prices.price(r.gpu)
    if per_gpu is None:
        r.reason = (r.reason + "; " if r.reason else "") + f"no price for {r.gpu}"
        return
    r.usd_per_hour = per_gpu * r.num_gpus
    tokens_per_s = r.at_target.get("output_throughput") or 0.0
    if tokens_per_s > 0:
        r.usd_per_million_output_tokens = r.usd_per_hour / (tokens_per_s * 3600) * 1e6


def _rank(r: CandidateResult) -> tuple[int, float, float, str]:
    order = {"meets_slo": 0, "misses_slo": 1, "infeasible": 2}[r.status]
    cost = math.inf if r.usd_per_hour is None else r.usd_per_hour
    if r.status == "misses_slo" and r.miss is not None:
        cost = r.miss["factor"]  # the closest miss first
    return order, cost, r.latency_ms, r.name
