"""The Pareto front: the options no other option beats on every objective at once."""

from __future__ import annotations

from collections.abc import Sequence


def pareto_front(points: Sequence[tuple[float, float]]) -> list[int]:
    """Indices of the points not dominated when both coordinates are to be minimised.

    Point a dominates b when a <= b in both coordinates and a < b in at least one; of
    exact duplicates the first is kept. The indices come back sorted by the first
    coordinate (for cost against latency: cheapest first, latency falling).
    """
    order = sorted(range(len(points)), key=lambda i: (points[i][0], points[i][1], i))
    front: list[int] = []
    best_second = float("inf")
    for i in order:
        if points[i][1] < best_second:
            front.append(i)
            best_second = points[i][1]
    return front
