"""The search for the highest request rate one replica sustains within the SLO.

Per candidate (docs/capacity.md, "Method"):

1. probe: every request arrives at once (rate ``PROBE_RATE``); the throughput it drains
   at is the replica's saturated capacity ``mu``. No rate above ``mu`` is sustainable, so
   the bracket is ``[lo, hi] = [mu * low_fraction, mu * high_margin]`` (the margin
   covers a burst draining slower than a steady stream would);
2. ``lo`` must meet the SLO, else the candidate cannot meet it at any useful rate;
3. bisection: try the midpoint, keep the half where the answer lies, stop when
   ``hi - lo <= rel_tol * lo`` or after ``max_iterations``. The answer is ``lo``, the
   highest rate *seen* to pass. The grid depends only on ``mu`` and the outcomes, never
   on the target rate, so a higher target can never need fewer replicas.

Every point draws its requests from the scenario seed; Poisson gaps at rate r are the
same standard draws scaled by 1 / r, so all rates see the same requests, time-scaled.
"""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass, field, replace
from typing import Any

from simulator.errors import ConfigError
from simulator.metrics import summarize, to_json_safe
from simulator.metrics_slo import slo_met
from simulator.runner import PointResult, run_point
from simulator.slo import SLO

PROBE_RATE = 1e6  # req/s: "everything at once" for any simulated replica


@dataclass(frozen=True, slots=True)
class SearchSettings:
    """Knobs of the search; the defaults are the rule stated in docs/capacity.md."""

    min_requests: int = 1000  # every point simulates at least this many requests
    min_tail: int = 100  # ... and at least this many beyond the SLO percentile
    max_iterations: int = 8  # bisection steps per candidate, at most
    rel_tol: float = 0.02  # stop when hi - lo <= rel_tol * lo
    low_fraction: float = 1 / 64  # lowest rate tried, as a fraction of the probe's mu
    high_margin: float = 1.25  # highest rate assumed to fail, as a multiple of mu
    max_extra_replicas: int = 4  # the cluster check adds at most this many replicas
    max_cluster_requests: int = 50_000  # cap on requests in one cluster check
    # Replicas one candidate may need at most: a target that needs more is refused for
    # that candidate (simulating 10^8 replicas would never return; --rate 1e9 asked it).
    max_replicas: int = 1024
    # Stop bisecting once the replica count for the target is certain (sizing.py): the
    # plan is the same, max_rate_rps is then a coarser lower bound. False: bisect to rel_tol.
    stop_when_sized: bool = True
    # Stop a point's simulation once its verdict is a fail no later request can undo
    # (early_stop.py), on the points whose figures the plan never reports (sizer.py).
    early_stop: bool = True

    def __post_init__(self) -> None:
        for name in ("min_requests", "min_tail", "max_iterations", "max_cluster_requests",
                     "max_replicas"):
            value = getattr(self, name)
            if not isinstance(value, int) or value < 1:
                raise ConfigError(f"{name} = {value!r}: must be an integer >= 1")
        for name in ("stop_when_sized", "early_stop"):
            if not isinstance(getattr(self, name), bool):
                raise ConfigError(f"{name} = {getattr(self, name)!r}: must be true or false")
        if not 0 < self.rel_tol < 1:
            raise ConfigError(f"rel_tol = {self.rel_tol!r}: must be in (0, 1)")
        if not 0 < self.low_fraction < 1 or self.high_margin < 1:
            raise ConfigError(f"low_fraction = {self.low_fraction!r} must be in (0, 1) and "
                              f"high_margin = {self.high_margin!r} >= 1")


def sample_size(slo: SLO, settings: SearchSettings) -> int:
    """Requests per point: ``max(min_requests, ceil(min_tail / (1 - q / 100)))``.

    At P99 with the defaults that is 10,000 requests, 100 of them beyond the P99. An SLO
    on means only (``mean_queue_ms``) needs just ``min_requests``.
    """
    n = settings.min_requests
    if slo.targets_ms and slo.percentile < 100:
        n = max(n, math.ceil(round(settings.min_tail / (1 - slo.percentile / 100), 6)))
    elif slo.targets_ms:
        n = max(n, settings.min_tail)
    return n


def at_rate(point: dict[str, Any], rate: float, num_requests: int,
            replicas: int = 1, step_log: str | None = None) -> dict[str, Any]:
    """A copy of ``point`` at ``rate`` req/s with ``num_requests`` on ``replicas``, keeping
    ``step_log`` of the step log (``[run] step_log``) unless the point says."""
    out = copy.deepcopy(point)
    workload = out.setdefault("workload", {})
    workload["rate"] = float(rate)
    workload["num_requests"] = max(int(num_requests), int(workload.get("num_requests") or 0))
    out.setdefault("cluster", {})["replicas"] = int(replicas)
    if step_log is not None:  # the scenario's own [run] step_log wins
        out.setdefault("run", {}).setdefault("step_log", step_log)
    return out


def step_log_for(slo: SLO, cluster_check: bool) -> str:
    """What a plan's point keeps of its step log (``[run] step_log``).

    The verdict reads ITL only when the SLO has an ITL target, and then from the whole
    log ("full", exact). Otherwise a rate-search point keeps none (its verdict and its
    TTFT/TPOT figures come from the request records), and a cluster check keeps a
    summary, so ``at_target`` still reports P99 ITL (within 0.1%) and utilisation. A
    light-load point decodes each request alone, ~265 steps a request on the shipped
    chat traffic, and the full log of a 50,000-request cluster check held 3.4 GB.
    """
    if "itl" in slo.targets_ms:
        return "full"
    return "summary" if cluster_check else "none"


SUMMARY_KEYS = (
    "completed", "num_rejected", "rejected_by_cause", "num_in_flight", "request_throughput",
    "output_throughput",
    "p50_ttft_ms", "p99_ttft_ms", "p99_tpot_ms", "p99_itl_ms", "p99_e2el_ms", "mean_queue_ms",
    "slo_met", "slo", "utilisation",
)


REPLICAS_USED = "replicas_used"  # highest replica index that got a request, plus one


def summary_job(point: dict[str, Any]) -> dict[str, Any]:
    """Simulate one point and keep the figures the planner reads (JSON-safe, small), and
    :data:`REPLICAS_USED` (from the request records' ``replica``)."""
    return cluster_job((point, []))[0]


def cluster_job(item: tuple[dict[str, Any], list[int]],
                ) -> tuple[dict[str, Any], dict[int, dict[str, Any]]]:
    """:func:`summary_job` of ``point``, and, when its last replica got no request, the
    summary each cluster of ``larger`` replicas would give: the same run summarised over
    more replicas (sizer.py: behind a lowest-idle router such a cluster replays it)."""
    point, larger = item
    res = run_point({}, point)
    out = figures(res)
    used = out[REPLICAS_USED]
    if not larger or used >= point["cluster"]["replicas"]:
        return out, {}
    dep, sim = res.deployment, res.result
    also = {}
    for k in larger:  # as run_point summarises, with k replicas
        summary = to_json_safe(summarize(sim.requests, sim.steps, dep.slo,
                                         kv_blocks_total=dep.kv_blocks, num_replicas=k,
                                         step_stats=sim.step_stats))
        also[k] = {**{key: summary.get(key) for key in SUMMARY_KEYS}, REPLICAS_USED: used}
    return out, also


def figures(res: PointResult) -> dict[str, Any]:
    """The figures the planner keeps of a finished run: :data:`SUMMARY_KEYS` and
    :data:`REPLICAS_USED` (from the request records' ``replica``)."""
    out = {k: res.summary.get(k) for k in SUMMARY_KEYS}
    replica = res.result.requests["replica"]
    out[REPLICAS_USED] = int(replica.max()) + 1 if len(replica) else 0
    return out


def passes(summary: dict[str, Any]) -> bool:
    """The point meets its SLO, as ``servesim run`` judges it (metrics_slo.slo_met: every
    target met and no request lost); recomputed from the figures, so a summary cached
    before that rule was one judge is judged the same way."""
    return slo_met(summary.get("slo") or {}, int(summary.get("num_rejected") or 0),
                   int(summary.get("num_in_flight") or 0)) is True


def worst_miss(summary: dict[str, Any]) -> tuple[str, float, float]:
    """The target missed by the largest factor: ``(key, value, target)``.

    Lost requests count as ``("rejected_or_unfinished", count, 0)``.
    """
    lost = (summary.get("num_rejected") or 0) + (summary.get("num_in_flight") or 0)
    if lost:
        return ("rejected_or_unfinished", float(lost), 0.0)
    worst = ("", 0.0, 1.0)
    for key, check in (summary.get("slo") or {}).items():
        value = check.get("value")
        value = math.inf if value is None else float(value)
        if value / check["target"] > worst[1] / worst[2]:
            worst = (key, value, float(check["target"]))
    return worst


def miss_of(summary: dict[str, Any]) -> dict[str, Any]:
    """``{"key", "value", "target", "factor"}`` of the worst target missed (factor =
    value / target; infinite for lost requests)."""
    key, value, target = worst_miss(summary)
    factor = math.inf if target == 0 else value / target
    return {"key": key, "value": value, "target": target, "factor": factor}


@dataclass(slots=True)
class RateSearch:
    """One candidate's search state: the probe, the scan up from the low rate, bisection."""

    mu: float | None = None  # saturated throughput from the probe, req/s
    lo: float = 0.0  # highest rate seen to pass (0: none yet)
    hi: float = math.inf  # lowest rate above ``lo`` seen (or assumed) to fail
    iterations: int = 0  # bisection steps taken
    done: bool = False
    failure: dict[str, Any] | None = None  # while none passed: the closest miss's summary
    trace: list[tuple[float, bool]] = field(default_factory=list)  # (rate, passed)

    def next_rate(self, settings: SearchSettings) -> float | None:
        """The rate to simulate next (``PROBE_RATE`` for the probe), None when done."""
        if self.done:
            return None
        if self.mu is None:
            return PROBE_RATE
        if not self.trace:
            return self.mu * settings.low_fraction
        if self.lo == 0:  # scan up: static batches wait to fill, so light load can fail
            rate = self.trace[-1][0] * 2
            if rate <= self.mu * settings.high_margin:
                return rate
        elif self.iterations < settings.max_iterations and self.hi - self.lo > (
                settings.rel_tol * self.lo):
            return (self.lo + self.hi) / 2
        self.done = True
        return None

    def record(self, rate: float, summary: dict[str, Any], settings: SearchSettings) -> None:
        """Take the outcome of simulating ``rate``."""
        if self.mu is None:
            self.mu = float(summary.get("request_throughput") or 0.0)
            self.hi = self.mu * settings.high_margin
            if self.mu <= 0:
                self.done, self.failure = True, summary
            return
        self.take(rate, passes(summary), summary)

    def take(self, rate: float, ok: bool, summary: dict[str, Any] | None = None) -> None:
        """Take a pass (``ok``) or a fail at ``rate`` (after the probe); ``summary`` is
        kept as the closest miss while no rate has passed."""
        self.trace.append((rate, ok))
        if self.lo == 0:
            if ok:
                self.lo, self.failure = rate, None
            elif summary is not None and (self.failure is None or (
                    miss_of(summary)["factor"] < miss_of(self.failure)["factor"])):
                self.failure = summary
            return
        self.iterations += 1
        if ok:
            self.lo = rate
        else:
            self.hi = rate

    def copy(self) -> RateSearch:
        """An independent copy (to play out outcomes that have not happened)."""
        return replace(self, trace=list(self.trace))
