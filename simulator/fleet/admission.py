"""The fleet's front door: a token-bucket rate limit, then a bounded queue.

Rules (``[admission]``, simulator/fleet/sections.py): the bucket holds at most ``burst``
tokens, starts full, and refills at ``rate_limit`` tokens per second; a request passes
when the bucket holds at least one token and takes it. A request that passes the bucket
is refused when ``max_queue`` requests already wait on its replica (or on the serving
replicas together). A refused request's ``reason`` starts with its cause
(:data:`REFUSED_RATE`, :data:`REFUSED_QUEUE`), as the policies' refusals do
(simulator/policies/state.py), so the summary counts them by cause.
"""

from __future__ import annotations

from collections.abc import Sequence as Seq

from simulator.fleet.sections import AdmissionSection
from simulator.router import ReplicaView

REFUSED_RATE = "over the admission rate limit"
REFUSED_QUEUE = "admission queue full"


class TokenBucket:
    """``rate_per_s`` tokens per second, at most ``burst`` held, full at t = 0."""

    __slots__ = ("rate_per_s", "burst", "_tokens", "_at_s")

    def __init__(self, rate_per_s: float, burst: int) -> None:
        self.rate_per_s = rate_per_s
        self.burst = float(burst)
        self._tokens = float(burst)
        self._at_s = 0.0  # when _tokens was last brought up to date

    def take(self, now_s: float) -> bool:
        """Refill up to ``now_s``; take one token if there is one (True) or refuse (False)."""
        tokens = min(self.burst, self._tokens + (now_s - self._at_s) * self.rate_per_s)
        self._at_s = now_s
        if tokens >= 1.0:
            self._tokens = tokens - 1.0
            return True
        self._tokens = tokens
        return False

    def level(self) -> float:
        """Tokens held as of the last call."""
        return self._tokens


class FrontDoor:
    """Decides, per arriving request, whether it may go on to a replica."""

    def __init__(self, section: AdmissionSection) -> None:
        self.section = section
        self.bucket = (None if section.rate_limit is None
                       else TokenBucket(section.rate_limit, section.burst))
        self.fleet_wide = section.queue_scope == "fleet"

    def rate_refusal(self, now_s: float) -> str:
        """'' when the bucket lets a request through now (taking its token), else a reason."""
        if self.bucket is None or self.bucket.take(now_s):
            return ""
        s = self.section
        return (f"{REFUSED_RATE}: {s.rate_limit:g} req/s with burst {s.burst}, "
                f"{self.bucket.level():.3g} token(s) at {now_s:.6g} s")

    def queue_refusal(self, chosen: ReplicaView, serving: Seq[ReplicaView]) -> str:
        """'' when the queue bound lets a request routed to ``chosen`` through, else a reason."""
        bound = self.section.max_queue
        if bound is None:
            return ""
        if self.fleet_wide:
            waiting = sum(len(r.state.waiting) for r in serving)
            where = f"{len(serving)} serving replica(s)"
        else:
            waiting = len(chosen.state.waiting)
            where = "its replica"
        if waiting < bound:
            return ""
        return f"{REFUSED_QUEUE}: {waiting} waiting on {where}, max_queue = {bound}"
