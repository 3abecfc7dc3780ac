"""Routers: which replica gets the next request. Chosen by name from :data:`ROUTERS`.

A router sees the replicas that take new requests now (all of them, unless an autoscaler
is starting or draining some: simulator/fleet/) and the request, and returns an index into
that list. Every rule is O(replicas) per request (``prefix_affinity``: plus the request's
prompt blocks); none walks the requests already there.
"""

from __future__ import annotations

import math
from collections.abc import Sequence as Seq
from typing import Protocol, cast

from simulator.errors import ConfigError
from simulator.policies import Sequence, ServerState
from simulator.prefix_cache_base import PrefixCacheBase


class ReplicaView(Protocol):
    """What a router may look at on a replica."""

    @property
    def state(self) -> ServerState: ...


class TokenView(ReplicaView, Protocol):
    """A replica that counts the tokens its requests still need (simulator/fleet/tokens.py)."""

    def tokens_now(self) -> int: ...


class Router(Protocol):
    """Picks a replica index for each arriving request."""

    def pick(self, replicas: Seq[ReplicaView], seq: Sequence) -> int: ...


class RoundRobin:
    """Replicas in turn, regardless of load."""

    __slots__ = ("_next",)

    def __init__(self) -> None:
        self._next = 0

    def pick(self, replicas: Seq[ReplicaView], seq: Sequence) -> int:
        i = self._next % len(replicas)
        self._next = i + 1
        return i


class LeastOutstanding:
    """The replica with the fewest requests waiting or running (lowest index on ties)."""

    def pick(self, replicas: Seq[ReplicaView], seq: Sequence) -> int:
        # one pass, lengths read directly (ServerState.num_outstanding's sum): a pick runs
        # per request and reads every replica, so the property call and a list cost ~1/3
        best, least = 0, math.inf
        for i, r in enumerate(replicas):
            state = r.state
            load = len(state.waiting) + len(state.running)
            if load < least:  # strictly fewer: the first of the least loaded
                best, least = i, float(load)
        return best


class ShortestQueue:
    """Join the shortest queue: fewest requests waiting to be scheduled (lowest index on ties)."""

    def pick(self, replicas: Seq[ReplicaView], seq: Sequence) -> int:
        best, least = 0, math.inf
        for i, r in enumerate(replicas):
            queued = len(r.state.waiting)
            if queued < least:  # strictly fewer: the first of the shortest
                best, least = i, float(queued)
        return best


class LeastOutstandingTokens:
    """The replica with the fewest tokens still to serve (lowest index on ties).

    A request counts ``prompt + output`` tokens when it reaches a replica; its prompt
    leaves the count when its first token is emitted, then each output token as it is
    emitted (what a front door can count from the streams it relays). Each replica keeps
    its count as steps end (:class:`simulator.fleet.tokens.TokenReplica`), so a pick is
    O(replicas).
    """

    needs_tokens = True  # the driver builds TokenReplica replicas for this router

    def pick(self, replicas: Seq[ReplicaView], seq: Sequence) -> int:
        best, fewest = 0, math.inf
        for i, r in enumerate(cast(Seq[TokenView], replicas)):
            tokens = r.tokens_now()
            if tokens < fewest:  # strictly fewer: the first of the fewest
                best, fewest = i, float(tokens)
        return best


AFFINITY_SLACK = 8  # requests a cache-warm replica may have beyond the least loaded


class PrefixAffinity:
    """The replica holding the longest cached prefix of the request's prompt, among those
    within ``AFFINITY_SLACK`` outstanding requests of the least loaded (fewest outstanding,
    then lowest index, on ties); with prefix caching on (``kv.prefix_caching``).

    A cache-aware router in the manner of SGLang's router and llm-d's prefix scorer: it
    looks each replica's prefix cache up by the request's block hashes (a query: nothing is
    taken), and the load bound stops one warm replica from taking every request. The
    slack is ours, not a stack's default.
    """

    reads_cache = True  # the driver's replicas keep their caches exact at every arrival

    def pick(self, replicas: Seq[ReplicaView], seq: Sequence) -> int:
        loads = [r.state.num_outstanding for r in replicas]
        bound = min(loads) + AFFINITY_SLACK
        best, best_key = 0, (1, 0, 0)
        chain: list[int] | None = None
        for i, r in enumerate(replicas):
            if loads[i] > bound:
                continue
            kv = r.state.kv
            cached = 0
            if isinstance(kv, PrefixCacheBase):
                if chain is None:
                    chain = kv.prompt_chain(seq)
                cached = kv.cached_prefix_blocks(chain)
            key = (0, -cached, loads[i])
            if key < best_key:
                best, best_key = i, key
        return best


ROUTERS: dict[str, type] = {
    "round_robin": RoundRobin,
    "least_outstanding": LeastOutstanding,
    "shortest_queue": ShortestQueue,
    "least_outstanding_tokens": LeastOutstandingTokens,
    "prefix_affinity": PrefixAffinity,
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


def reads_cache(name: str) -> bool:
    """Whether the router called ``name`` reads what the replicas' prefix caches hold."""
    return bool(getattr(ROUTERS.get(name), "reads_cache", False))
