"""Routers' picks on hand-set loads: the least (or shortest, or fewest tokens) wins, and a
tie goes to the lowest index (the one-pass loops in simulator/router.py keep the first
strict minimum)."""

from __future__ import annotations

from collections import deque
from types import SimpleNamespace
from typing import Any

import pytest

from simulator.router import make_router


def _replica(waiting: int, running: int, tokens: int = 0) -> Any:
    state = SimpleNamespace(waiting=deque(range(waiting)), running=list(range(running)))
    return SimpleNamespace(state=state, tokens_now=lambda: tokens)


@pytest.mark.pure_python
def test_least_outstanding_takes_the_first_of_the_least_loaded() -> None:
    # outstanding 2+1=3, 0+2=2, 1+1=2, 0+5=5: replicas 1 and 2 tie at 2 -> 1
    reps = [_replica(2, 1), _replica(0, 2), _replica(1, 1), _replica(0, 5)]
    assert make_router("least_outstanding").pick(reps, None) == 1  # type: ignore[arg-type]
    reps[1].state.running.append(0)  # now 3: replica 2 alone is least
    assert make_router("least_outstanding").pick(reps, None) == 2  # type: ignore[arg-type]


@pytest.mark.pure_python
def test_shortest_queue_reads_waiting_only_and_takes_the_first_of_the_shortest() -> None:
    # waiting 1, 0, 0 (running 9, 3, 0): replica 1, the first of the empty queues
    reps = [_replica(1, 0), _replica(0, 9), _replica(0, 3)]
    assert make_router("shortest_queue").pick(reps, None) == 1  # type: ignore[arg-type]


@pytest.mark.pure_python
def test_least_outstanding_tokens_takes_the_first_of_the_fewest() -> None:
    reps = [_replica(0, 0, 500), _replica(0, 0, 300), _replica(0, 0, 300), _replica(0, 0, 0)]
    assert make_router("least_outstanding_tokens").pick(reps[:3], None) == 1  # type: ignore[arg-type]
    assert make_router("least_outstanding_tokens").pick(reps, None) == 3  # type: ignore[arg-type]
