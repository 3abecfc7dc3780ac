"""Capacity planning: the cheapest deployment that serves a target rate within an SLO.

Each candidate is a :class:`~simulator.capacity.sizer.Sizer`: the rate search of
``search.py`` for one replica (stopped once the replica count is certain, ``sizing.py``),
then ``replicas = ceil(target / max_rate)`` and checks of the whole cluster at the target
rate with its router, adding replicas (up to ``max_extra_replicas``) while it fails.
``dispatch.py`` runs their points on the executor as workers free up (the longest
remaining chains first), so candidates run in parallel and a candidate's cluster checks
overlap the others' searches; a sizer's points depend only on its own outcomes, so
results never depend on the backend or on the number of workers. A point whose figures
the plan never reports stops once its verdict is a fail (``early_stop.py``; the same
verdict, so the same points and the same plan). Every simulated point goes through the
point cache, so an interrupted plan resumes.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

from simulator.capacity.candidates import Candidate
from simulator.capacity.dispatch import Dispatch
from simulator.capacity.margin import check_cover, margined_slo, record_query
from simulator.capacity.pareto import pareto_front
from simulator.capacity.prices import PriceTable, load_prices
from simulator.capacity.results import CandidateResult, PlanResult
from simulator.capacity.search import SearchSettings, sample_size
from simulator.capacity.sizer import Sizer
from simulator.errors import ConfigError
from simulator.executors import Executor, SerialExecutor
from simulator.point_cache import PointCache
from simulator.scenario_types import Scenario
from simulator.slo import SLO
from simulator.track_record import point_record
from simulator.workload.traces import load_trace

__all__ = ["CandidateResult", "PlanProgress", "PlanResult", "plan"]

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


def plan(candidates: list[Candidate], target_rps: float, slo: SLO, *,
         prices: PriceTable | None = None, settings: SearchSettings | None = None,
         executor: Executor | None = None, cache: PointCache | None = None,
         progress: PlanProgress | None = None, record_margin: float | None = None
         ) -> PlanResult:
    """Size every candidate for ``target_rps`` within ``slo`` and rank them by cost.

    ``progress`` hears of every point and every candidate settled (see PlanProgress).
    ``record_margin`` Q sizes each candidate against ``slo`` tightened by servesim's error
    on the published runs like it, so the answer covers Q of them (capacity/margin.py).
    A candidate replaying a trace can have no more requests a point than the trace's rows
    (:func:`trace_requests`); fewer than the sample size asks for, every point replays
    them all, and ``PlanResult.requests_wanted`` keeps what was asked.
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
    wanted = n = sample_size(slo, settings)
    cap = trace_requests([c for c in candidates if c.infeasible is None])
    if cap is not None and cap < n:
        n = cap
    cover = None if record_margin is None else check_cover(record_margin)
    results = [CandidateResult(c.name, c.labels, c.gpu, c.tp, "infeasible", c.infeasible or "")
               for c in candidates]
    sizers = {}
    for i, c in enumerate(candidates):
        if c.infeasible is not None:
            continue
        own = slo
        if cover is not None:
            records = point_record(c.point, c.gpu, target_rps, **record_query(slo))
            own, margins = margined_slo(slo, records, cover)
            results[i].slo_planned = own.as_dict()
            results[i].margins = {k: m.to_json() for k, m in margins.items()}
        sizers[i] = Sizer({**c.point, "slo": own.as_dict()}, results[i], target_rps, own,
                          settings, n, cap=cap)
    for i, c in enumerate(candidates):
        if c.infeasible is not None:
            tally.settle(i)
    Dispatch(sizers, executor or SerialExecutor(), cache, tally.point, tally.settle).run()
    for r in results:
        _price(r, prices)
    ranked = sorted(results, key=_rank)
    meeting = [r for r in ranked if r.status == "meets_slo" and r.usd_per_hour is not None]
    front = pareto_front([(r.usd_per_hour or 0.0, r.latency_ms) for r in meeting])
    return PlanResult(target_rps, slo, n, ranked, [meeting[i].name for i in front], prices,
                      settings, cache.computed - before[0], cache.reused - before[1],
                      requests_wanted=wanted, record_margin=cover)


def trace_requests(candidates: list[Candidate]) -> int | None:
    """The fewest rows among the traces the candidates replay (a point cannot have more
    requests than its trace), or None when none replays a trace."""
    traces = {(w.trace, w.trace_format) for w in (Scenario.from_dict(c.point).workload
                                                   for c in candidates) if w.trace is not None}
    return min((len(load_trace(path, fmt).table) for path, fmt in traces), default=None)


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
