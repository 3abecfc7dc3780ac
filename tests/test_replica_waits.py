"""A replica's timeouts (``ReplicaClock._until``) are scheduled again once SimPy has
processed them, and only then.

Worked by hand on one stand-in clock: a wait to 1.0 s is processed, and the next wait (to
2.5 s) is the same event, scheduled again; a wait that a decode run's cut left pending with
no callbacks (``replica_runs._cut_run``) is not reused while it is in SimPy's queue; and
the order of two waits ending at one instant is the order they were made in, as new
events would have it (the same event ids).
"""

from __future__ import annotations

import math

import pytest
import simpy

from simulator.replica_clock import ReplicaClock

pytestmark = pytest.mark.pure_python  # a stand-in subclass of a class the build compiles


class _Clock(ReplicaClock):
    def __init__(self, env: simpy.Environment) -> None:
        self.env = env
        self.num_events = 0
        self.next_arrival_s = None
        self.horizon_s = math.inf
        self._now = 0.0
        self._interruptible = False


def test_processed_wait_is_scheduled_again() -> None:
    env = simpy.Environment()
    clock = _Clock(env)
    first = clock._until(1.0)
    env.run()
    assert env.now == 1.0 and first.callbacks is None  # processed
    again = clock._until(2.5)
    assert again is first and again.callbacks == []
    seen: list[float] = []
    again.callbacks.append(lambda _e: seen.append(env.now))
    env.run()
    assert seen == [2.5] and clock.num_events == 2


def test_pending_wait_is_not_reused() -> None:
    env = simpy.Environment()
    clock = _Clock(env)
    cut_off = clock._until(3.0)
    cut_off.callbacks = []  # what _cut_run leaves in the queue
    fresh = clock._until(2.0)
    assert fresh is not cut_off
    env.run()
    assert env.now == 3.0  # both were processed, the cut-off one last
    assert clock._until(4.0) is fresh  # the latest made is the one kept


def test_simultaneous_waits_keep_the_order_they_were_made_in() -> None:
    env = simpy.Environment()
    a, b = _Clock(env), _Clock(env)
    first = a._until(1.0)
    env.run()  # a's wait processed: reusable
    order: list[str] = []
    b._until(2.0).callbacks.append(lambda _e: order.append("b"))  # new event, made first
    reused = a._until(2.0)  # made second
    assert reused is first
    reused.callbacks.append(lambda _e: order.append("a"))
    env.run()
    assert order == ["b", "a"]
