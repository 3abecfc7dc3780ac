"""``workload.client_start = "random"``: closed-loop clients at random phases (issue 12).

NIM's concurrency sweeps are measured in a steady state whose client phases nothing holds
evenly apart; evenly staggered starts never let two prompts meet. The check is by hand
against the cycle of tests/test_burst_and_clients.py: 0.5 s a step plus 0.125 s a prompt
token, so one 4-token prefill takes 1.0 s and a client's cycle (3 output tokens) 2.0 s.
"""

from __future__ import annotations

import numpy as np
import pytest
from helpers import TokenCost

from simulator.errors import ConfigError
from simulator.workload.build import build_requests
from simulator.workload.config import WorkloadConfig

FIXED = {"prompt": {"dist": "fixed", "tokens": 4}, "output": {"dist": "fixed", "tokens": 3}}
COST = TokenCost(step_s=0.5, prefill_token_s=0.125)


def _think(workload: dict, seed: int = 0, step_time=COST.step_time) -> list[float]:  # type: ignore[no-untyped-def]
    cfg = WorkloadConfig.from_dict({**FIXED, **workload})
    return build_requests(cfg, np.random.default_rng(seed), None, step_time).table[
        "think_s"].tolist()


def test_random_starts_are_uniform_in_one_cycle_and_seeded() -> None:
    closed = {"arrival": "closed", "concurrency": 3, "num_requests": 6,
              "client_start": "random"}
    think = _think(closed)
    # the clients' first sends: 2.0 s (one cycle) x the seed's first three uniforms
    want = (2.0 * np.random.default_rng(0).uniform(0.0, 1.0, size=3)).tolist()
    assert think == pytest.approx(want + [0.0, 0.0, 0.0], abs=1e-12)
    assert all(0.0 <= t < 2.0 for t in think[:3])
    assert _think(closed) == think and _think(closed, seed=1) != think


def test_random_starts_leave_the_other_starts_unchanged() -> None:
    closed = {"arrival": "closed", "concurrency": 2, "num_requests": 4}
    assert _think({**closed, "client_start": "staggered"}) == [0.0, 1.0, 0.0, 0.0]
    assert _think({**closed, "client_start": "together"}) == [0.0, 0.0, 0.0, 0.0]


def test_random_starts_need_the_cost_model() -> None:
    with pytest.raises(ConfigError, match="client_start = 'random' needs the deployment"):
        _think({"arrival": "closed", "concurrency": 2, "client_start": "random"},
               step_time=None)
