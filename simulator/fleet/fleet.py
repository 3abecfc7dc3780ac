"""The fleet level of a simulation: router, front door, autoscaler and the replicas' roll.

:class:`Fleet` is what the driver (simulator/cluster.py) asks where a request goes and
tells when one is done. With no ``[admission]`` and no ``[autoscale]`` it is a router
over a fixed list of replicas and changes nothing a run did before.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import simpy

from simulator.fleet.admission import FrontDoor
from simulator.fleet.autoscaler import Autoscaler
from simulator.fleet.members import FleetUsage, Members
from simulator.fleet.sections import AdmissionSection, AutoscaleSection
from simulator.policies import Sequence
from simulator.replica import Replica
from simulator.router import make_router


class Fleet:
    """Routes arriving requests to serving replicas; admits, scales and bills the fleet."""

    def __init__(self, env: simpy.Environment, router: str, make: Callable[[int], Replica],
                 initial: int, admission: AdmissionSection | None,
                 autoscale: AutoscaleSection | None, remaining: Callable[[], bool],
                 request_s: float = 0.0) -> None:
        self.env = env
        self.router = make_router(router)
        self.members = Members(make, initial, lambda: env.now)
        self.serving = self.members.serving  # the same list: it changes as replicas come and go
        self.door = FrontDoor(admission) if admission is not None and admission.enabled else None
        self.scaler = (Autoscaler(env, autoscale, self.members, remaining)
                       if autoscale is not None and autoscale.enabled else None)
        self.request_s = request_s
        self.end_s = 0.0  # the latest a request was done (billing ends there)

    @property
    def replicas(self) -> list[Replica]:
        """Every replica created so far, by index (the list grows as replicas start)."""
        return self.members.replicas

    @property
    def num_events(self) -> int:
        """SimPy events the autoscaler waited on."""
        return 0 if self.scaler is None else self.scaler.num_events

    def route(self, seq: Sequence) -> Replica | None:
        """The replica ``seq`` goes to now, or None with ``seq.reason`` set (refused)."""
        serving = self.serving
        door = self.door
        if door is None:
            return serving[self.router.pick(serving, seq)]
        reason = door.rate_refusal(self.env.now)
        replica = None
        if not reason:
            replica = serving[self.router.pick(serving, seq)]
            reason = door.queue_refusal(replica, serving)
        if reason:
            seq.reason = reason
            return None
        return replica

    def done(self, seq: Sequence) -> None:
        """``seq`` finished or was refused (with an autoscaler: its signal and the roll)."""
        if self.scaler is None:
            return
        finish = seq.finish_s
        finished = not seq.reason and not math.isnan(finish)
        if not finished:  # refused now: by a replica's policy, on the replica's own clock
            finish = self.env.now if seq.replica < 0 else max(
                self.env.now, self.replicas[seq.replica].clock_s())
        self.end_s = max(self.end_s, finish)
        if finished:
            sent = seq.arrival_s - self.request_s
            self.scaler.observe(finish, (seq.first_token_s - sent) * 1000.0)
        if self.members.draining:
            self.members.left_if_empty(seq.replica)

    def usage(self, horizon_s: float | None, all_done: bool) -> FleetUsage | None:
        """Replica-seconds and the timeline (None without an autoscaler); billing ends when
        the last request is done, or at the horizon if some are left."""
        if self.scaler is None:
            return None
        end = self.end_s if all_done or horizon_s is None else horizon_s
        return self.members.usage(end)
