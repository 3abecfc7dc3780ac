"""validate's priced-steps row: the engine's own steps priced by the cost model, by hand."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from calibrate.validate_steps import measured_and_priced, priced_steps_row, step_counts
from servesim.validate_steps_drift import steps_drift_corrected, steps_factor, unjittered
from simulator.costs.linear import LinearCost

# Three back-to-back steps: a 100-token prefill admitting request 0, a decode of 1 row
# (100 cached tokens), then a decode of 2 rows (101 + 50 cached) that finishes request 0
# while request 1 (admitted by a 50-token prefill nowhere in this log) keeps decoding.
STEPS = pd.DataFrame({
    "point": [0, 0, 0],
    "start_s": [0.0, 0.010, 0.013],
    "end_s": [0.010, 0.013, 0.017],
    "num_prefill_tokens": [100, 0, 0],
    "prefill_attn_work": [5000.0, 0.0, 0.0],
    "num_decode_seqs": [0, 1, 2],
    "decode_context_tokens": [0, 100, 151],
})
REQUESTS = pd.DataFrame({
    "request_id": [0, 1],
    "scheduled_s": [0.0, -1.0],  # request 1 was admitted before the log starts
    "finish_s": [0.017, math.nan],
    "status": ["finished", "running"],
})
COST = LinearCost(step_s=0.002, prefill_token_s=5e-5, decode_seq_s=1e-3, request_s=5e-4)


def test_admitted_and_finished_per_step():
    admitted, finished = step_counts(STEPS, REQUESTS)
    assert admitted.tolist() == [1, 0, 0]
    assert finished.tolist() == [0, 0, 1]


def test_priced_total_by_hand():
    row = priced_steps_row(STEPS, REQUESTS, COST, policy="continuous", load="rate=3")
    assert row is not None
    # step 1: 2 + 100 x 0.05 + 0.5 (admit) = 7.5 ms; step 2: 2 + 1 = 3 ms;
    # step 3: 2 + 2 + 0.5 (finish) = 4.5 ms. Measured: 10 + 3 + 4 = 17 ms.
    assert row["simulated"] == pytest.approx(15.0)
    assert row["measured"] == pytest.approx(17.0)
    assert row["relative_error"] == pytest.approx(15 / 17 - 1)
    assert row["ok"] is False  # -11.8% is outside 5%
    assert (row["metric"], row["statistic"]) == ("steps", "priced_total")


def test_no_steps_no_row():
    assert priced_steps_row(STEPS.iloc[:0], REQUESTS, COST, policy="p", load="l") is None


# An inline linear profile with host costs: kernel 2 ms a step + 1 ms a decode row +
# 0.05 ms a prefill token; host 0.5 ms per admitted request (simulator/costs/host.py).
LINEAR_POINT = {"model": {"name": "tiny", "weight_dtype": "fp32"}, "hardware": {"gpu": "cpu"},
                "policy": {"name": "continuous"},
                "cost": {"form": "linear", "step_s": 0.002, "decode_seq_s": 1e-3,
                         "prefill_token_s": 5e-5, "overhead": {"admit_s": 5e-4},
                         "time_scale": 1.5}}


def test_steps_factor_splits_host_from_kernel():
    # kernel at time_scale 1.5: (7 + 3 + 4) x 1.5 = 21 ms; host: 0.5 ms (one admission).
    # Measured 17 ms, so the kernel must run at (17 - 0.5) / 21 of its scaled time.
    factor = steps_factor(LINEAR_POINT, STEPS, REQUESTS)
    assert factor == pytest.approx(16.5 / 21)
    [(_, new)], notes = steps_drift_corrected([({}, LINEAR_POINT)], STEPS, [REQUESTS],
                                              [("continuous", "rate=3")])
    assert new["cost"]["time_scale"] == pytest.approx(1.5 * 16.5 / 21)
    assert LINEAR_POINT["cost"]["time_scale"] == 1.5  # the caller's point is not changed
    assert "0.786x" in notes[0] and "continuous rate=3" in notes[0]
    # at that scale the same steps price to what they measured
    _, priced = measured_and_priced(STEPS, REQUESTS, unjittered(new))
    assert priced == pytest.approx(0.017)


def test_steps_drift_refuses_an_absurd_factor():
    slow = STEPS.assign(end_s=STEPS["start_s"] + 1.0)  # every step a second: ~60x the profile
    [(_, same)], notes = steps_drift_corrected([({}, LINEAR_POINT)], slow, [REQUESTS],
                                               [("continuous", "rate=3")])
    assert same is LINEAR_POINT and "not applied" in notes[0]


def test_two_replicas_are_priced_apart():
    # Replica 0 runs one long step [0, 10 ms] that finishes request 0; replica 1 runs two
    # short ones, [1, 2] and [2, 3] ms, the second finishing request 1. Merged in start
    # order the step ends read 10, 2, 3 ms (not sorted), and a search over them misplaces
    # the finish at 10 ms; per replica each finish lands on its own step.
    steps = pd.DataFrame({
        "point": 0, "replica": [0, 1, 1], "start_s": [0.0, 0.001, 0.002],
        "end_s": [0.010, 0.002, 0.003], "num_prefill_tokens": 0, "prefill_attn_work": 0.0,
        "num_decode_seqs": 1, "decode_context_tokens": 100})
    requests = pd.DataFrame({
        "request_id": [0, 1], "replica": [0, 1], "scheduled_s": [-1.0, -1.0],
        "finish_s": [0.010, 0.003], "status": ["finished", "finished"]})
    measured, priced = measured_and_priced(steps, requests, COST)
    # each step 2 + 1 ms (one decode row), and 0.5 ms for each of the two finishes
    assert measured == pytest.approx(0.012)
    assert priced == pytest.approx(3 * 0.003 + 2 * 0.0005)
