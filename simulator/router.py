"""Routers: which replica gets the next request. Chosen by name from :data:`ROUTERS`."""

from __future__ import annotations

from collections.abc import Sequence as Seq
from typing import Protocol

from simulator.errors import ConfigError
from simulator.policies import ServerState


class Router(Protocol):
    """Picks a replica index for each arriving request."""

    def pick(self, states: Seq[ServerState]) -> int: ...


class RoundRobin:
    """Replicas in turn, regardless of load."""

    __slots__ = ("_next",)

    def __init__(self) -> None:
        self._next = 0

    def pick(self, states: Seq[ServerState]) -> int:
        i = self._next % len(states)
        self._next = i + 1
        return i


class LeastOutstanding:
    """The replica with the fewest requests waiting or running (lowest index on ties)."""

    def pick(self, states: Seq[ServerState]) -> int:
        return min(range(len(states)), key=lambda i: states[i].num_outstanding)


class ShortestQueue:
    """Join the shortest queue: fewest requests waiting to be scheduled (lowest index on ties)."""

    def pick(self, states: Seq[ServerState]) -> int:
        return min(range(len(states)), key=lambda i: len(states[i].waiting))


ROUTERS: dict[str, type] = {
    "round_robin": RoundRobin,
    "least_outstanding": LeastOutstanding,
    "shortest_queue": ShortestQueue,
}


def make_router(name: str) -> Router:
    """A fresh router called ``name``; unknown names raise ConfigError listing the known ones."""
    cls = ROUTERS.get(name)
    if cls is None:
        raise ConfigError(f"cluster.router = {name!r}: unknown; known: {sorted(ROUTERS)}")
    router: Router = cls()
    return router
