"""Analytic queueing checks: with batch size 1 the simulator is an M/G/1 queue.

M/D/1 and M/G/1 mean waits follow Pollaczek-Khinchine: Wq = lambda E[S^2] / (2 (1 - rho)).
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from helpers import TokenCost

from simulator.cluster import ClusterSpec, simulate
from simulator.policies import ContinuousPolicy, StaticPolicy

N = 60_000
RATE = 6.0  # req/s
STEP_S = 0.02  # every step (prefill or decode) costs 20 ms


def _poisson_table(outputs: np.ndarray, seed: int) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    return pd.DataFrame({
        "request_id": np.arange(len(outputs)),
        "arrival_s": np.cumsum(rng.exponential(1 / RATE, len(outputs))),
        "prompt_tokens": 8,
        "output_tokens": outputs,
    })


def _mean_wait(res) -> float:  # type: ignore[no-untyped-def]
    r = res.requests
    return float((r["scheduled_s"] - r["arrival_s"]).mean())


@pytest.mark.slow
def test_md1_mean_wait() -> None:
    # S = 5 steps x 20 ms = 0.1 s fixed; rho = 0.6; Wq = rho S / (2 (1 - rho)) = 0.075 s
    outputs = np.full(N, 5)
    spec = ClusterSpec(StaticPolicy(batch_size=1), TokenCost(step_s=STEP_S), kv_blocks=1000)
    wq = _mean_wait(simulate(_poisson_table(outputs, 1), spec))
    assert wq == pytest.approx(0.6 * 0.1 / (2 * 0.4), rel=0.04)


@pytest.mark.slow
def test_mg1_pollaczek_khinchine() -> None:
    # S = 0.02 * out, out uniform on 1..9: E[S] = 0.1, E[S^2] = 4e-4 * 285/9; rho = 0.6
    rng = np.random.default_rng(7)
    outputs = rng.integers(1, 10, N)
    es2 = 4e-4 * 285 / 9
    spec = ClusterSpec(ContinuousPolicy(max_num_seqs=1), TokenCost(step_s=STEP_S), 1000)
    wq = _mean_wait(simulate(_poisson_table(outputs, 2), spec))
    assert wq == pytest.approx(RATE * es2 / (2 * 0.4), rel=0.04)


def test_littles_law_on_the_step_log() -> None:
    # L (time-average of requests in the system) = lambda * W (mean time in system).
    rng = np.random.default_rng(3)
    outputs = rng.integers(20, 200, 4000)
    spec = ClusterSpec(ContinuousPolicy(max_num_seqs=64), TokenCost(0.01, 1e-5, 1e-4), 10_000)
    res = simulate(_poisson_table(outputs, 4), spec)
    steps, recs = res.steps, res.requests
    span = recs["finish_s"].max() - recs["arrival_s"].min()
    # requests in system during a step: those there after it, as seen at its end
    in_system = steps["num_running"] + steps["queue_len"]
    dur = steps["end_s"] - steps["start_s"]
    big_l = float((in_system * dur).sum() / span)
    lam = len(recs) / span
    w = float((recs["finish_s"] - recs["arrival_s"]).mean())
    assert big_l == pytest.approx(lam * w, rel=0.05)
