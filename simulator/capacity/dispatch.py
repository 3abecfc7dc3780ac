"""Running the sizers' points on an executor as soon as a worker is free.

A plan is a handful of independent chains (one per candidate: probe, search, cluster
checks), each point depending on the one before. In rounds (one ``map`` per round)
every round waits for its slowest point while the other workers idle; here each
finished point at once hands its worker the next point of the sizer with the most work
left (``sizer.estimate_work``), so the longest chains start first and short ones fill
the gaps. At most ``executor.workers`` points are in flight, so that choice is made as
late as possible and Ctrl-C has nothing queued to cancel.

The executors offer one blocking ``map``; each point in flight is one ``map`` of one
item called from a helper thread (the process pool and Dask take submissions from any
thread). Everything else (the point cache, the sizers, progress) happens in this
thread, in completion order; a sizer's own points still come in its own order, so the
answer never depends on timing. With one worker the points run here, without threads.

A cluster check that larger checks would replay (``Sizer.replays``) also brings back
their summaries (``search.cluster_job``); they are kept (and cached) under those checks'
own points, so when the sizer asks for one it is not simulated again. A point whose
figures the plan never reads (``Sizer.verdict_only``) runs as ``early_stop.verdict_job``,
stopped once its verdict is a fail, and is cached under its own kind (``verdict``); a
scan-up point after a miss (``Sizer.stop_bound``) runs as ``early_stop.bounded_job``,
stopped once its miss is certainly further off than the closest so far, cached under
``verdict>`` and that bound.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from typing import Any

from simulator.capacity.early_stop import bounded_job, verdict_job
from simulator.capacity.search import cluster_job, summary_job
from simulator.capacity.sizer import Sizer, estimate_work
from simulator.executors import Executor
from simulator.point_cache import PointCache, point_key, profile_cache_state
from simulator.point_inputs import HashMemo

VERDICT = "verdict"  # cache kind of a point run only for its pass/fail (early_stop.py)
Point = dict[str, Any]
Outcome = tuple[Point, dict[int, Point]]  # a point's summary; replayed sizes' summaries


class Dispatch:
    """Drives ``sizers`` to the end on ``ex``, through ``cache``; ``on_point()`` after
    every point (simulated or read back), ``on_settled(i)`` as sizer ``i`` finishes."""

    def __init__(self, sizers: dict[int, Sizer], ex: Executor, cache: PointCache,
                 on_point: Callable[[], None], on_settled: Callable[[int], None]) -> None:
        self.sizers, self.ex, self.cache = sizers, ex, cache
        self.on_point, self.on_settled = on_point, on_settled
        self._memo: HashMemo = {}
        self._state = profile_cache_state(self._memo)  # read once per plan, as map_cached
        self._busy: set[int] = set()  # sizers with a point in flight
        self._replayed: dict[str, Point] = {}  # summaries of replayed checks, by point key

    def run(self) -> None:
        """Every sizer settled, or the first error (or Ctrl-C) raised."""
        if self.ex.workers <= 1:
            while (job := self._next_job()) is not None:
                sizer = self.sizers[job[0]]
                self._finish(*job, _run(job[2], sizer.replays(), sizer.stop_bound()))
            return
        threads = ThreadPoolExecutor(max_workers=self.ex.workers,
                                     thread_name_prefix="plan-point")
        pending: dict[Future[Outcome], tuple[int, str, Point]] = {}
        try:
            while True:
                while len(pending) < self.ex.workers and (job := self._next_job()):
                    sizer = self.sizers[job[0]]
                    pending[threads.submit(_one, self.ex, job[2], sizer.replays(),
                                           sizer.stop_bound())] = job
                    self._busy.add(job[0])
                if not pending:
                    return
                done, _ = wait(pending, return_when=FIRST_COMPLETED)
                for future in done:
                    i, key, point = pending.pop(future)
                    self._busy.discard(i)
                    self._finish(i, key, point, future.result())
        except KeyboardInterrupt:
            stop = getattr(self.ex, "stop", None)  # a process pool ends its workers now
            if callable(stop) and pending:
                stop()
            raise
        finally:
            threads.shutdown(wait=not pending, cancel_futures=True)

    def _next_job(self) -> tuple[int, str, Point] | None:
        """The next point to simulate, of the idle sizer with the most work left; points
        found in the cache are taken on the way. None: nothing to start now."""
        while True:
            idle = [i for i, z in self.sizers.items() if i not in self._busy and not z.done]
            if not idle:
                return None
            i = max(idle, key=lambda j: (estimate_work(self.sizers[j]), -j))
            point = self.sizers[i].next_point()
            if point is None:
                self.on_settled(i)
                continue
            kind = _kind(self.sizers[i].stop_bound())
            key = point_key(point, kind, self._state, self._memo)
            replayed = self._replayed.pop(key, None)  # neither simulated nor read back
            hit = replayed if replayed is not None else self.cache.load(key)
            if hit is None:
                return i, key, point
            if replayed is None:
                self.cache.reused += 1
            self.on_point()
            self._take(i, hit)

    def _finish(self, i: int, key: str, point: Point, outcome: Outcome) -> None:
        summary, replayed = outcome
        self.cache.save(key, point, summary)
        self.cache.computed += 1
        for k, other in replayed.items():  # what a larger cluster would give: kept as run
            other_point = self.sizers[i].cluster_point(k)
            other_key = point_key(other_point, "summary", self._state, self._memo)
            self._replayed[other_key] = other
            self.cache.save(other_key, other_point, other)
        self.on_point()
        self._take(i, summary)

    def _take(self, i: int, summary: Point) -> None:
        sizer = self.sizers[i]
        sizer.take(summary)
        if sizer.next_point() is None:
            self.on_settled(i)


def _kind(bound: float | None) -> str:
    """The cache kind of a point run to its end (None), to its verdict (1) or to a miss
    certainly over ``bound``."""
    if bound is None:
        return "summary"
    return VERDICT if bound == 1.0 else f"{VERDICT}>{bound!r}"


def _run(point: Point, replays: list[int], bound: float | None) -> Outcome:
    """One point here: its summary (stopped early as ``Sizer.stop_bound`` says), and those
    of the clusters that replay it."""
    if replays:
        return cluster_job((point, replays))
    if bound is None:
        return summary_job(point), {}
    return (verdict_job(point) if bound == 1.0 else bounded_job((point, bound))), {}


def _one(ex: Executor, point: Point, replays: list[int], bound: float | None) -> Outcome:
    """One point on ``ex`` (in a helper thread)."""
    if replays:
        return ex.map(cluster_job, [(point, replays)])[0]
    if bound is None:
        return ex.map(summary_job, [point])[0], {}
    if bound == 1.0:
        return ex.map(verdict_job, [point])[0], {}
    return ex.map(bounded_job, [(point, bound)])[0], {}
