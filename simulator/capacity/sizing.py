"""Replica counts from a rate search, and the moment a search has settled its count.

A plan needs from a candidate's rate search only ``replicas = ceil(target / max_rate)``.
Bisection narrows ``max_rate`` to ``rel_tol``; once every rate it can still end at gives
the same count, the rest of it cannot change the plan, and the search stops there
(``SearchSettings.stop_when_sized``).

Why the end points are bracketed (the search's state is ``lo < hi`` after ``i`` steps):
every rate the bisection can still end at lies in ``[lo, top]``, where ``top`` is where it
ends if every remaining midpoint passes. A path that first differs from the all-pass path
at some midpoint ``m`` fails there, so it ends below ``m``, and the all-pass path took
``m`` as its ``lo``, so ``m <= top``. The count ``ceil(target / rate)`` never rises with
the rate, so ``count(top) == count(lo)`` means every end point gives that count. ``top`` is
found by replaying the search's own rules on a copy (:meth:`RateSearch.copy`), so the
rules live in one place; tests/test_plan_speedups.py checks the bracket against every
outcome pattern.
"""

from __future__ import annotations

import math

from simulator.capacity.search import RateSearch, SearchSettings


def replicas_for(target_rps: float, rate_rps: float) -> int:
    """Replicas of ``rate_rps`` each that carry ``target_rps``: ``ceil(target / rate)``
    (less 1e-9, so an exact multiple does not round up on float noise)."""
    return math.ceil(target_rps / rate_rps - 1e-9)


def highest_end(search: RateSearch, settings: SearchSettings) -> float:
    """The rate ``search`` ends at if every rate it tries from now on passes."""
    probe = search.copy()
    while (rate := probe.next_rate(settings)) is not None:
        probe.take(rate, True)
    return probe.lo


def settled_replicas(search: RateSearch, target_rps: float,
                     settings: SearchSettings) -> int | None:
    """The replica count the finished search will give, when it is already certain;
    None while probing, scanning up (no rate has passed yet) or still open."""
    if search.done or search.mu is None or search.lo <= 0:
        return None
    count = replicas_for(target_rps, search.lo)
    return count if replicas_for(target_rps, highest_end(search, settings)) == count else None
