"""A SimPy timeout at URGENT priority: what runs first among the events of one instant.

Arrivals (simulator/driver.py) and autoscaler evaluations (simulator/fleet/autoscaler.py)
use it, so a step that ends at the same instant has not ended for them, whichever path ran
the step: one SimPy event per step (scheduled when the step began), a fast-forwarded run
(one event scheduled when the run began), or steps run ahead on a replica's own clock up
to the next such event (simulator/replica_clock.py). Among themselves they keep the order
they were scheduled in, the same in every path.
"""

from __future__ import annotations

import simpy


class UrgentTimeout(simpy.Event):
    """A timeout of ``delay`` seconds at URGENT priority (see the module docstring)."""

    def __init__(self, env: simpy.Environment, delay: float) -> None:
        super().__init__(env)
        self._ok = True
        self._value = None
        env.schedule(self, simpy.events.URGENT, delay)
