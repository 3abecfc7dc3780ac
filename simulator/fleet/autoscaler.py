"""The autoscaler: a SimPy process that reads a signal every ``interval_s`` and adds or
drains replicas (rules in :class:`simulator.fleet.sections.AutoscaleSection`).

Decisions, at each evaluation ``t = k * interval_s`` (k = 1, 2, ...) while requests remain:

- signal > ``scale_up_above``, no replica starting, fewer than ``max_replicas`` starting or
  serving: start ``scale_up_step`` replicas (capped at the maximum); they serve at
  ``t + cold_start_s`` and are billed from ``t``;
- signal < ``scale_down_below`` at every evaluation since ``t0`` with ``t - t0 >=
  down_hold_s``, none starting, more than ``min_replicas`` serving: drain the serving
  replica with the fewest requests (the newest on ties); the hold starts again at ``t``;
- a signal with no value (``ttft`` with nothing finished in the window) changes nothing.

An evaluation runs first among the events of its instant (:mod:`simulator.fleet.urgent`):
a step ending then has not ended for it. ``next_s`` says when the next one is, so that
replicas running steps ahead of SimPy's clock stop short of it (simulator/driver.py), and
the ``ttft`` window is kept in finish order whatever order replicas report finishes in.
"""

from __future__ import annotations

import math
from bisect import bisect_left, insort
from collections.abc import Callable, Generator
from typing import Any

import numpy as np
import simpy

from simulator.fleet.members import Members
from simulator.fleet.sections import AutoscaleSection
from simulator.fleet.tokens import TokenReplica
from simulator.fleet.urgent import UrgentTimeout
from simulator.replica import Replica


def _kv_used(r: Replica) -> int:
    """KV blocks in use on ``r`` now (within a decode run too, when ``r`` tracks it)."""
    return r.kv_used_now() if isinstance(r, TokenReplica) else r.state.kv.used


class Autoscaler:
    """Adds and drains replicas of ``members`` by ``section``'s rules."""

    def __init__(self, env: simpy.Environment, section: AutoscaleSection, members: Members,
                 remaining: Callable[[], bool]) -> None:
        self.env = env
        self.section = section
        self.members = members
        self._remaining = remaining  # whether any request is still to be done
        self._low_since: float | None = None
        self._ttft: list[tuple[float, float]] = []  # (finish_s, ttft_ms), by finish_s
        self.num_events = 0
        self.next_s = self._tick_s(1)  # the next evaluation (inf: none)
        self.decisions: list[tuple[float, str, float]] = []  # (time_s, "up"/"down", signal)
        env.process(self._loop())

    def observe(self, finish_s: float, ttft_ms: float) -> None:
        """A request finished (its TTFT feeds the ``ttft`` signal)."""
        if self.section.signal == "ttft":  # replicas ahead of SimPy report out of order
            insort(self._ttft, (finish_s, ttft_ms))

    def signal(self) -> float:
        """The signal over the serving replicas now (NaN: no value)."""
        serving = self.members.serving
        kind = self.section.signal
        if kind == "queue":
            return sum(len(r.state.waiting) for r in serving) / len(serving)
        if kind == "kv":
            return sum(_kv_used(r) / r.state.kv.num_blocks for r in serving) / len(serving)
        window, cutoff = self._ttft, self.env.now - self.section.window_s
        del window[:bisect_left(window, (cutoff,))]  # those that finished before the cutoff
        if not window:
            return math.nan
        values = np.fromiter((v for _, v in window), float, len(window))
        return float(np.percentile(values, self.section.percentile))

    def _loop(self) -> Generator[simpy.Event, Any, None]:
        k = 0
        while self._remaining():
            k += 1
            self.num_events += 1
            self.next_s = self._tick_s(k)
            yield UrgentTimeout(self.env, k * self.section.interval_s - self.env.now)
            if self._remaining():  # nothing to decide once every request is done
                self._evaluate(self.signal())
        self.next_s = math.inf

    def _tick_s(self, k: int) -> float:
        """When the ``k``-th evaluation, scheduled now, happens: the float SimPy computes."""
        now = self.env.now
        return now + (k * self.section.interval_s - now)

    def _evaluate(self, value: float) -> None:
        s, m, now = self.section, self.members, self.env.now
        if math.isnan(value) or m.starting:
            return
        if value > s.scale_up_above:
            self._low_since = None
            room = s.max_replicas - len(m.serving)
            for _ in range(min(s.scale_up_step, room)):
                self._start()
            if room > 0:
                self.decisions.append((now, "up", value))
            return
        if value >= s.scale_down_below:
            self._low_since = None
            return
        if self._low_since is None:
            self._low_since = now
        if now - self._low_since >= s.down_hold_s and len(m.serving) > s.min_replicas:
            victim = min(reversed(m.serving), key=lambda r: r.state.num_outstanding)
            m.drain(victim)
            self.decisions.append((now, "down", value))
            self._low_since = now

    def _start(self) -> None:
        replica = self.members.start()
        self.num_events += 1
        self.env.timeout(self.section.cold_start_s).callbacks.append(self._ready(replica))

    def _ready(self, replica: Replica) -> Callable[[simpy.Event], None]:
        """The callback that makes ``replica`` serve when its cold start is over."""
        def ready(_event: simpy.Event) -> None:
            self.members.ready(replica)
        return ready
