"""Which replicas exist, which take new requests, and what they cost: the fleet's roll.

A replica is *billed* from its start until it leaves (or the run ends), *serving* once
its cold start is over and until it is drained, and *draining* from then until its last
request is done, when it leaves. Without an autoscaler every replica serves from t = 0
to the end. :meth:`Members.usage` integrates billed replicas over time (replica-seconds);
the timeline records each change.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

from simulator.replica import Replica


@dataclass(slots=True)
class FleetUsage:
    """What the fleet used over a run (simulator/fleet/autoscaler.py)."""

    end_s: float  # when billing stops: the last request done, or the horizon
    replica_seconds: float  # integral of billed replicas over [0, end_s]
    peak_replicas: int  # most replicas billed at once
    replicas_started: int  # replicas created over the run (those at t = 0 included)
    # (time_s, billed, serving) after each change, from t = 0
    timeline: list[tuple[float, int, int]] = field(default_factory=list)

    @property
    def mean_replicas(self) -> float:
        """Replica-seconds / end_s: the time-averaged number of billed replicas."""
        return self.replica_seconds / self.end_s if self.end_s > 0 else float("nan")


class Members:
    """The replicas of one run and their state (see the module docstring)."""

    def __init__(self, make: Callable[[int], Replica], initial: int, now: Callable[[], float]
                 ) -> None:
        self._make = make
        self._now = now
        self.replicas: list[Replica] = []
        self.serving: list[Replica] = []  # take new requests, in index order
        self.draining: set[int] = set()
        self.starting = 0  # created, not serving yet (cold start)
        self.started_s: list[float] = []  # billing starts, by index
        self.left_s: list[float | None] = []  # billing ends, by index (None: still billed)
        self.timeline: list[tuple[float, int, int]] = []
        for _ in range(initial):
            self.serving.append(self._create())
        self._mark()

    def _create(self) -> Replica:
        i = len(self.replicas)
        replica = self._make(i)
        self.replicas.append(replica)
        self.started_s.append(self._now())
        self.left_s.append(None)
        return replica

    @property
    def billed(self) -> int:
        """Replicas billed now (starting, serving or draining)."""
        return self.starting + len(self.serving) + len(self.draining)

    def _mark(self) -> None:
        point = (self._now(), self.billed, len(self.serving))
        if self.timeline and self.timeline[-1][0] == point[0]:
            self.timeline[-1] = point  # several changes at one instant: the last stands
        else:
            self.timeline.append(point)

    def start(self) -> Replica:
        """Create a replica now (billed from now); :meth:`ready` makes it serve."""
        self.starting += 1
        replica = self._create()
        self._mark()
        return replica

    def ready(self, replica: Replica) -> None:
        """A started replica's cold start is over: it takes requests from now."""
        self.starting -= 1
        self.serving.append(replica)
        self.serving.sort(key=lambda r: r.index)
        self._mark()

    def drain(self, replica: Replica) -> None:
        """``replica`` takes no new request; it leaves once its requests are done.

        From now on it waits on SimPy for every step (told no next arrival), so each of its
        requests is done at SimPy's clock, which :meth:`left_if_empty` reads."""
        self.serving.remove(replica)
        replica.next_arrival_s = None
        self.draining.add(replica.index)
        self._mark()
        self.left_if_empty(replica.index)

    def left_if_empty(self, index: int) -> None:
        """A draining replica with nothing left to serve leaves now."""
        if index in self.draining and self.replicas[index].state.num_outstanding == 0:
            self.draining.discard(index)
            self.left_s[index] = self._now()
            self._mark()

    def usage(self, end_s: float) -> FleetUsage:
        """Replica-seconds and the timeline up to ``end_s``."""
        spans = []
        for start, left in zip(self.started_s, self.left_s, strict=True):
            stop = end_s if left is None else min(left, end_s)
            spans.append(max(0.0, stop - start))
        total = math.fsum(spans)  # correctly rounded: n replicas throughout give n * end_s
        timeline = [p for p in self.timeline if p[0] <= end_s]
        peak = max((p[1] for p in timeline), default=0)
        return FleetUsage(end_s, total, peak, len(self.replicas), timeline)
