"""Routers: which replica gets the next request. Chosen by name from :data:`ROUTERS`.

A router sees the replicas that take new requests now (all of them, unless an autoscaler
is starting or draining some: simulator/fleet/) and returns an index into that list.
Every rule is O(replicas) per request; none walks the requests themselves.
"""

from __future__ import annotations

from collections.abc import Sequence as Seq
from typing import Protocol, cast

from simulator.errors import ConfigError
from simulator.policies import ServerState


class ReplicaView(Protocol):
    """What a router may look at on a replica."""

    @property
    def state(self) -> ServerState: ...


class TokenView(ReplicaView, Protocol):
    """A replica that counts the tokens its requests still need (simulator/fleet/tokens.py)."""

    def tokens_now(self) -> int: ...


class Router(Protocol):
    """Picks a replica index for each arriving request."""

    def pick(self, replicas: Seq[ReplicaView]) -> int: ...


class RoundRobin:
    """Replicas in turn, regardless of load."""

    __slots__ = ("_next",)

    def __init__(self) -> None:
        self._next = 0

    def pick(self, replicas: Seq[ReplicaView]) -> int:
        i = self._next % len(replicas)
        self._next = i + 1
        return i


class LeastOutstanding:
    """The replica with the fewest requests waiting or running (lowest index on ties)."""

    def pick(self, replicas: Seq[ReplicaView]) -> int:
        return min(range(len(replicas)), key=lambda i: replicas[i].state.num_outstanding)


class ShortestQueue:
    """Join the shortest queue: fewest requests waiting to be scheduled (lowest index on ties)."""

    def pick(self, replicas: Seq[ReplicaView]) -> int:
        return min(range(len(replicas)), key=lambda i: len(replicas[i].state.waiting))


class LeastOutstandingTokens:
    """The replica with the fewest tokens still to serve (lowest index on ties).

    A request counts ``prompt + output`` tokens when it reaches a replica; its prompt
    leaves the count when its first token is emitted, then each output token as it is
    emitted (what a front door can count from the streams it relays). Each replica keeps
    its count as steps end (:class:`simulator.fleet.tokens.TokenReplica`), so a pick is
    O(replicas).
    """

    needs_tokens = True  # the driver builds TokenReplica replicas for this router

    def pick(self, replicas: Seq[ReplicaView]) -> int:
        views = cast(Seq[TokenView], replicas)
        return min(range(len(views)), key=lambda i: views[i].tokens_now())


ROUTERS: dict[str, type] = {
    "round_robin": RoundRobin,
    "least_outstanding": LeastOutstanding,
    "shortest_queue": ShortestQueue,
    "least_outstanding_tokens": LeastOutstandingTokens,
}


def make_router(name: str) -> Router:
    """A fresh router called ``name``; unknown names raise ConfigError listing the known ones."""
    cls = ROUTERS.get(name)
    if cls is None:
        raise ConfigError(f"cluster.router = {name!r}: unknown; known: {sorted(ROUTERS)}")
    router: Router = cls()
    return router


def needs_tokens(name: str) -> bool:
    """Whether the router called ``name`` reads the replicas' token counts."""
    return bool(getattr(ROUTERS.get(name), "needs_tokens", False))
