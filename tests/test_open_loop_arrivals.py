"""An uncapped open loop's arrivals as one rescheduled SimPy event (``OpenLoopArrivals``).

A tiny timeline worked by hand: requests due at 0, 0, 1, 1 and 2.5 s (plus the host's
``request_s``) are delivered at those instants in table order, each instant's first one
through one URGENT event (two events here: 1 and 2.5; those due at once go with the start),
ahead of a NORMAL event at the same instant, and the next arrival the replicas read is
the next one due (inf once all are sent).
"""

from __future__ import annotations

import math

import pytest
import simpy

from simulator.driver import OpenLoopArrivals
from simulator.policies import Sequence

pytestmark = pytest.mark.pure_python  # a stand-in driver: the compiled class wants its own


class _Driver:
    """What ``OpenLoopArrivals`` reads and calls of a ``Driver``."""

    def __init__(self, env: simpy.Environment, request_s: float) -> None:
        self.env = env
        self.request_s = request_s
        self.next_arrival_s = 0.0
        self.num_events = 0
        self.log: list[tuple[float, int, float, str]] = []

    def _deliver(self, seq: Sequence, sent_s: float) -> None:
        self.log.append((self.env.now, seq.request_id, self.next_arrival_s, "arrive"))


@pytest.mark.parametrize("request_s", [0.0, 0.25])
def test_arrivals_by_hand(request_s: float) -> None:
    env = simpy.Environment()
    driver = _Driver(env, request_s)
    seqs = [Sequence(i, t, 10, 5) for i, t in enumerate([0.0, 0.0, 1.0, 1.0, 2.5])]

    def normal(at: float) -> None:  # a step ending at ``at``: NORMAL priority
        env.timeout(at).callbacks.append(
            lambda _e: driver.log.append((env.now, -1, driver.next_arrival_s, "step")))

    normal(1.0 + request_s)
    OpenLoopArrivals(driver, seqs)
    assert seqs == []  # held by the loop only until sent
    env.run()
    r = request_s
    assert driver.log == [  # while one is delivered, the next due is itself
        (0.0 + r, 0, 0.0 + r, "arrive"), (0.0 + r, 1, 0.0 + r, "arrive"),
        (1.0 + r, 2, 1.0 + r, "arrive"), (1.0 + r, 3, 1.0 + r, "arrive"),
        (1.0 + r, -1, 2.5 + r, "step"),  # after both arrivals of its instant
        (2.5 + r, 4, 2.5 + r, "arrive"),
    ]
    assert driver.next_arrival_s == math.inf
    assert driver.num_events == (3 if request_s else 2)  # the first is due later too
