"""A replica's own clock against SimPy's: the waits that keep them together.

Several steps per SimPy event: when the next arrival is known ahead (an open loop, into
one replica or several: replicas interact only through arrivals and autoscaler
evaluations, simulator/driver.py), nothing can happen to a replica before it, so a step
that ends before it (and before the horizon) is completed at once on the replica's own
clock (``_now``) without a SimPy event; the SimPy clock is moved to the replica's,
exactly, only when the replica must wait (a step that ends at or after the next arrival,
an idle wait). Every step's
start and end are the same floats as with one event per step (SimPy adds the delay to
its clock; the replica's clock adds the same delay), so the records are identical
(tests/test_speed_paths_replica.py). One of several replicas lets a decode run go on past
the fleet's next arrival until a request reaches it (:mod:`simulator.replica_runs`).

:class:`ReplicaClock` holds those waits for :class:`~simulator.replica.Replica`, which
sets the attributes it declares.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Generator
from typing import Any

import numpy as np
import simpy

from simulator.policies import Wait


class ReplicaClock:
    """The waits of a replica whose clock may run ahead of SimPy's (a mixin of Replica)."""

    env: simpy.Environment
    next_arrival_s: Callable[[], float] | None  # when the next request arrives, if known
    horizon_s: float  # the run stops there
    num_events: int  # SimPy events this replica waited on
    _now: float  # the replica's clock: ahead of env.now after steps run inline
    _interruptible: bool  # in an idle wait or a fast-forward the next arrival cuts
    # the latest timeout _until made: scheduled again once SimPy has processed it (one
    # cut off a decode run (replica_runs._cut_run) or by an interrupt keeps callbacks, [],
    # until SimPy pops it, and is not reused: _until then makes a new one)
    _spare_wait: simpy.Timeout | None = None

    def _inline_before(self) -> float:
        """Steps ending before this time may run without a SimPy event (-inf: none may)."""
        if self.next_arrival_s is None:
            return -math.inf
        return self._inline_limit(self.next_arrival_s())

    def _inline_limit(self, arrival_s: float) -> float:
        """:meth:`_inline_before` for a next arrival the caller has just read."""
        return arrival_s if arrival_s < self.horizon_s else self.horizon_s

    def _until(self, at_s: float) -> simpy.Timeout:
        """A timeout that puts the SimPy clock at exactly ``at_s`` (SimPy adds the delay to
        ``env.now``, which lags the replica's clock after inline steps)."""
        now = self.env.now
        delay = at_s - now
        while now + delay < at_s:
            delay = math.nextafter(delay, math.inf)
        while now + delay > at_s:
            delay = math.nextafter(delay, -math.inf)
        self.num_events += 1
        wait: Any = self._spare_wait  # Any: SimPy types callbacks as a list, and None is
        # what says it was processed (compiled, a list-typed read would refuse None)
        if wait is not None and wait.callbacks is None and delay >= 0:
            # SimPy has processed it (and cleared its callbacks): scheduled again, as a new
            # Timeout would be (one schedule call, the same event id), without building one
            wait.callbacks = []
            wait._delay = delay
            self.env.schedule(wait, simpy.events.NORMAL, delay)
            return wait
        wait = self._spare_wait = self.env.timeout(delay)
        return wait

    def _wait(self, wait: Wait) -> Generator[simpy.Event, Any, None]:
        self._interruptible = True
        try:
            if wait.until is None:
                self.num_events += 1
                yield self.env.event()
            else:
                yield self._until(self._now + max(0.0, wait.until - self._now))
        except simpy.Interrupt:
            pass
        self._interruptible = False
        self._now = self.env.now

    def _run_interruptible(
        self, ends: np.ndarray
    ) -> Generator[simpy.Event, Any, tuple[int, np.ndarray]]:
        """Run steps ending at ``ends``; an arrival cuts them at the step in progress."""
        env = self.env
        self._interruptible = True
        try:
            yield env.timeout(ends[-1] - env.now)
        except simpy.Interrupt:  # a request arrived: finish the step in progress, then stop
            j = min(int(np.searchsorted(ends, env.now)), len(ends) - 1)
            self.num_events += 1
            yield env.timeout(max(0.0, ends[j] - env.now))
            ends = ends[:j + 1]
        self._interruptible = False
        self._now = env.now
        return len(ends), ends

    def _run_until_arrival(
        self, ends: np.ndarray
    ) -> Generator[simpy.Event, Any, tuple[int, np.ndarray]]:
        """Run steps ending at ``ends`` up to the one in progress when the next request arrives.

        The same cut as :meth:`_run_interruptible` without an interrupt. Arrivals run at
        URGENT priority, so one at exactly the cut is already queued when this wakes.
        """
        assert self.next_arrival_s is not None
        j = int(np.searchsorted(ends, self.next_arrival_s()))
        if j < len(ends) - 1:
            ends = ends[:j + 1]
        self._now = float(ends[-1])
        if self._now >= self._inline_before():
            yield self._until(self._now)
        return len(ends), ends
