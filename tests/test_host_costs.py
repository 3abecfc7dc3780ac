"""The serving loop's host work (calibrate/host_costs.py): counts per step from a tiny
timeline, and known per-step / per-admission / per-finish costs recovered by the fit."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

pytest.importorskip("torch")

from calibrate.host_costs import fit_host_costs, step_counts, synthetic_workload  # noqa: E402


def test_step_counts_by_hand():
    # Steps [0,1) [1,2) [2,3): request 1 admitted at 0 finishes at 2; request 2 admitted
    # at 1 finishes at 3. Step 2 starts at 2, right after request 1's last token.
    steps = pd.DataFrame({"start_s": [0.0, 1.0, 2.0], "end_s": [1.0, 2.0, 3.0],
                          "num_decode_seqs": [0, 1, 1]})
    requests = pd.DataFrame({"scheduled_s": [0.0, 1.0], "finish_s": [2.0, 3.0]})
    counts = step_counts(steps, requests)
    assert counts["admitted"].tolist() == [1, 1, 0]
    assert counts["finished_before"].tolist() == [0, 0, 1]
    assert counts["decode_rows"].tolist() == [0, 1, 1]


def test_known_host_costs_are_recovered():
    rng = np.random.default_rng(0)
    n = 400
    counts = pd.DataFrame({"admitted": rng.integers(0, 3, n),
                           "finished_before": rng.integers(0, 2, n),
                           "decode_rows": rng.integers(0, 9, n)})
    truth = 1e-4 + 3e-4 * counts["admitted"] + 8e-4 * counts["finished_before"] \
        + 1e-5 * counts["decode_rows"]
    host = truth.to_numpy() * rng.lognormal(0, 0.05, n)  # 5% noise
    host[7] += 0.05  # one garbage collection: left out as above the 99th percentile
    fit = fit_host_costs(host, counts)
    assert fit.step_s == pytest.approx(1e-4, rel=0.15)
    assert fit.admit_s == pytest.approx(3e-4, rel=0.05)
    assert fit.finish_s == pytest.approx(8e-4, rel=0.05)
    assert fit.seq_s == pytest.approx(1e-5, rel=0.3)
    assert fit.num_steps < n and set(fit.overhead()) == {"step_s", "admit_s", "finish_s",
                                                           "seq_s"}


def test_the_synthetic_workload_is_its_own():
    table = synthetic_workload(64, seed=0)
    assert len(table) == 64 and table["arrival_s"].is_monotonic_increasing
    assert table["prompt_tokens"].between(32, 320).all()
    assert table["output_tokens"].between(4, 48).all()


def test_served_time_scale_is_served_over_predicted_forward_time():
    from calibrate.host_costs import served_time_scale
    from engine.serving import EngineRun
    from simulator.cluster import SimResult
    from simulator.costs.linear import LinearCost

    # A 2 ms intercept and 0.1 ms per decode row: steps of 1 and 3 rows cost 2.1 and 2.3 ms;
    # served in 1.89 and 2.07 ms, 0.9 of that.
    kernel = LinearCost(step_s=2e-3, prefill_token_s=0.0, prefill_attn_s=0.0,
                        decode_seq_s=1e-4, decode_context_s=0.0, request_s=0.0)
    steps = pd.DataFrame({"start_s": [0.0, 1.0], "end_s": [0.5, 1.5],
                          "num_prefill_tokens": [0, 0], "prefill_attn_work": [0.0, 0.0],
                          "num_decode_seqs": [1, 3], "decode_context_tokens": [10, 30]})
    requests = pd.DataFrame({"scheduled_s": [9.0], "finish_s": [9.0]})
    run = EngineRun(SimResult(requests, steps, 0, 1, 2, 0.0), pd.DataFrame(), {}, None,
                    np.array([1.89e-3, 2.07e-3]))
    assert served_time_scale(run, kernel) == pytest.approx(0.9)
