"""One candidate's way to its answer: the rate search, then cluster checks at the target.

A :class:`Sizer` is a state machine a driver feeds: ``next_point()`` is the point to
simulate next (None once the answer is settled), ``take(summary)`` its outcome. Its
sequence of points depends only on the outcomes, never on timing, so every backend and
every number of workers gives the same answer.

The cluster checks (docs/capacity.md): ``replicas = ceil(target / max_rate)``, then the
whole cluster at the target rate, adding one replica at a time (at most
``max_extra_replicas``) while it fails. With a router that sends a request to the
lowest-numbered of the replicas with the least work (``least_outstanding``,
``shortest_queue``), a check whose last replica got no request at all would be
replayed exactly by every larger cluster: at each arrival some lower replica had no work
(else the last one, with none, would have been picked), so an added replica is never
picked either and the same requests go to the same replicas at the same times. Checks
of the same number of requests (``n`` a replica, capped at ``max_cluster_requests``)
would fail the same way, so the sizer skips them, and goes straight to the last size
when they reach it (its summary, whose utilisation counts every replica, is reported:
the run in hand summarised over that many replicas, so it is not simulated again).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from simulator.capacity.early_stop import DECIDED
from simulator.capacity.results import CandidateResult
from simulator.capacity.search import (
    PROBE_RATE,
    REPLICAS_USED,
    SUMMARY_KEYS,
    RateSearch,
    SearchSettings,
    at_rate,
    miss_of,
    passes,
    step_log_for,
)
from simulator.capacity.sizing import replicas_for, settled_replicas
from simulator.metrics_slo import miss_reason
from simulator.scenario_types import Scenario
from simulator.slo import SLO

# Routers that pick the lowest index among the replicas with the least work: a replica
# that never got a request stays unused in any larger cluster (module docstring).
LOWEST_IDLE_FIRST = ("least_outstanding", "shortest_queue")


@dataclass(slots=True)
class Sizer:
    """One candidate's search and cluster checks; fills in ``result`` as it goes."""

    point: dict[str, Any]  # the candidate's scenario point, with the plan's SLO
    result: CandidateResult
    target_rps: float
    slo: SLO
    settings: SearchSettings
    n: int  # requests per point (search.sample_size)
    cap: int | None = None  # the most a point can have (a trace's rows); None: no limit
    search: RateSearch = field(default_factory=RateSearch)
    replicas: int | None = None  # cluster size being checked (None: still searching)
    first: int = 0  # the first cluster size checked: the search's estimate
    done: bool = False
    _pending: dict[str, Any] | None = None  # the point handed out and not yet taken

    def next_point(self) -> dict[str, Any] | None:
        """The point to simulate next; None when this candidate is settled."""
        if self.done:
            return None
        if self._pending is None:
            self._pending = self._next()
        return self._pending

    def take(self, summary: dict[str, Any]) -> None:
        """The outcome of the point :meth:`next_point` gave."""
        point, self._pending = self._pending, None
        assert point is not None, "take() without a point handed out"
        self.result.simulations += 1
        decided = summary.get(DECIDED)
        if decided is not None:  # stopped once its verdict was a fail (early_stop.py)
            self.result.decided_early += 1
        self.result.requests_simulated += int(
            point["workload"]["num_requests"] if decided is None else decided["after_requests"])
        if self.replicas is None:
            self.search.record(point["workload"]["rate"], summary, self.settings)
        else:
            self._checked(summary)

    def _next(self) -> dict[str, Any] | None:
        if self.replicas is None:
            s, settings = self.search, self.settings
            if settings.stop_when_sized and settled_replicas(
                    s, self.target_rps, settings) is not None:
                s.done = True
            rate = s.next_rate(settings)
            if rate is not None:
                size = settings.min_requests if rate == PROBE_RATE else self.n
                return at_rate(self.point, rate, self._capped(size),
                               step_log=step_log_for(self.slo, cluster_check=False))
            self._searched()
            if self.done:
                return None
        assert self.replicas is not None
        return self.cluster_point(self.replicas)

    def replays(self) -> list[int]:
        """Cluster sizes whose check would replay the one in hand if its last replica
        gets no request: the last size tried, when it draws the same requests (the run
        in hand then gives its summary, ``search.cluster_job``); else none."""
        k = self.replicas
        if k is None or self._pending is None or not self._lowest_idle_first():
            return []
        last = self.first + self.settings.max_extra_replicas
        return [last] if last > k and self._size(last) == self._size(k) else []

    def verdict_only(self) -> bool:
        """Whether only the pass/fail of the point handed out is read, never its figures,
        so it may stop once that is a fail (early_stop.py): a bisection point (a rate
        search that has passed somewhere keeps no summary of a fail) and a cluster check
        with a larger size still to try and no size it stands in for (its summary is
        replaced by the next check's; its REPLICAS_USED is then unknown, so no size is
        skipped after it). Never the probe, the scan up from the low rate (its closest
        miss is reported) or the last cluster size."""
        if not self.settings.early_stop or self._pending is None:
            return False
        if self.replicas is None:
            return self.search.mu is not None and self.search.lo > 0
        last = self.first + self.settings.max_extra_replicas
        return self.replicas < last and not self.replays()

    def stop_bound(self) -> float | None:
        """When the point handed out may stop early (early_stop.py): ``1.0``, once its
        verdict is a fail (:meth:`verdict_only`); a factor ``b > 1``, once its miss
        certainly exceeds ``b`` (a scan-up point after a miss: only the closest miss of
        the scan is reported, and the search keeps a later one only when it is strictly
        closer, so a point certainly further off is read for its fail alone; ``b`` is the
        closest miss's factor, a hair over); None: it runs to the end."""
        if self.verdict_only():
            return 1.0
        s = self.search
        if (not self.settings.early_stop or self._pending is None or self.replicas is not None
                or s.mu is None or s.lo > 0 or s.failure is None or not s.trace):
            return None
        factor = float(miss_of(s.failure)["factor"])
        return factor * (1 + 1e-9) if factor > 1 else 1.0

    def cluster_point(self, k: int) -> dict[str, Any]:
        """The point of a cluster check of ``k`` replicas at the target rate."""
        return at_rate(self.point, self.target_rps, self._size(k), k,
                       step_log=step_log_for(self.slo, cluster_check=True))

    def _lowest_idle_first(self) -> bool:
        return Scenario.from_dict(self.point).cluster.router in LOWEST_IDLE_FIRST

    def _size(self, k: int) -> int:
        """Requests in a cluster check of ``k`` replicas: ``n`` a replica, capped."""
        return self._capped(min(self.settings.max_cluster_requests, max(self.n, self.n * k)))

    def _capped(self, size: int) -> int:
        """``size`` requests, or the point's limit (a trace's rows) if fewer."""
        return size if self.cap is None else min(size, self.cap)

    def _searched(self) -> None:
        """The search is over: the single-replica figures, then the first cluster size."""
        s, r, settings = self.search, self.result, self.settings
        r.saturated_rps, r.max_rate_rps = s.mu, s.lo
        if s.lo == 0:
            self.done = True
            if s.failure is not None:
                r.status, r.miss = "misses_slo", miss_of(s.failure)
                r.reason = (": ".join(filter(None, ("no request finished in the probe",
                                                    miss_reason(s.failure))))
                            if not s.mu else
                            f"misses the SLO at every rate tried ({len(s.trace)} rates from "
                            f"{s.mu * settings.low_fraction:.3g} req/s up to its capacity); "
                            f"closest: {miss_reason(s.failure)}")
            return
        k = replicas_for(self.target_rps, s.lo)
        if k > settings.max_replicas:
            self.done = True
            r.status, r.replicas = "infeasible", None
            r.reason = (f"needs {k:,} replicas ({self.target_rps:g} req/s at {s.lo:.3g} req/s "
                        f"each), more than the limit of {settings.max_replicas:,} a plan "
                        "simulates; lower --rate or plan for a share of the traffic")
            return
        self.replicas = self.first = k

    def _checked(self, summary: dict[str, Any]) -> None:
        r, k = self.result, self.replicas
        assert k is not None
        r.replicas, r.at_target = k, {key: summary.get(key) for key in SUMMARY_KEYS}
        last = self.first + self.settings.max_extra_replicas
        if passes(summary):
            r.status, r.miss, self.done = "meets_slo", None, True
        elif k < last:
            self.replicas = self._next_size(summary, k, last)
        else:
            self.done = True
            r.status, r.miss = "misses_slo", miss_of(summary)
            r.reason = (f"the cluster check still fails with {k} replicas "
                        f"({self.first} estimated + {self.settings.max_extra_replicas}): "
                        f"{miss_reason(summary)}")

    def _next_size(self, summary: dict[str, Any], k: int, last: int) -> int:
        """The next cluster size to check after ``k`` failed: ``k + 1``, or past every
        size that would replay this check (same requests, module docstring): ``last``
        itself when they reach it (its summary is the one reported)."""
        used = summary.get(REPLICAS_USED)  # absent from a summary cached before it was kept
        if not (self._lowest_idle_first() and isinstance(used, int)
                and not isinstance(used, bool) and used < k):
            return k + 1
        same = k  # the largest size with as many requests as this check (n a replica, capped)
        while same < last and self._size(same + 1) == self._size(k):
            same += 1
        return last if same == last else same + 1


def estimate_work(sizer: Sizer) -> float:
    """Requests still to simulate, roughly (a driver starts the longest chains first)."""
    if sizer.done:
        return 0.0
    settings, n = sizer.settings, sizer.n
    if sizer.replicas is not None:
        left = sizer.first + settings.max_extra_replicas - sizer.replicas + 1
        return float(min(settings.max_cluster_requests, n * sizer.replicas) * left)
    s = sizer.search
    steps = settings.max_iterations - s.iterations + (1 if s.mu is None else 0)
    k = replicas_for(sizer.target_rps, s.lo) if s.lo > 0 else 1
    return float(steps * n + min(settings.max_cluster_requests, n * max(1, k)))

