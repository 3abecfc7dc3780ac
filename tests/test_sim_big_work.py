"""Big work: refused up front when it cannot fit, progress while it runs, a step log that
grows by packed rows, and rates whose times float64 cannot resolve refused (issue 11)."""

from __future__ import annotations

import numpy as np
import pytest
from helpers import TokenCost, table

from simulator import memory_guard
from simulator.cluster import ClusterSpec, simulate
from simulator.errors import ConfigError
from simulator.memory_guard import BYTES_PER_REQUEST, TABLE_BYTES_PER_REQUEST, check_fits
from simulator.policies import ContinuousPolicy
from simulator.runner import run_point
from simulator.shapes import StepShape, StepShapes
from simulator.steplog import _FLUSH_ROWS, StepLog
from simulator.workload.arrivals import MAX_SPAN_S, poisson_arrivals

GIB = 2**30


def _point(**workload: object) -> dict[str, object]:
    return {"name": "big", "seed": 0, "policy": {"name": "continuous"},
            "workload": {"arrival": "poisson", "rate": 10.0,
                         "prompt": {"dist": "fixed", "tokens": 8},
                         "output": {"dist": "fixed", "tokens": 2}, **workload},
            "cost": {"form": "linear", "step_s": 0.01}}


def test_estimate_is_requests_times_the_measured_bytes() -> None:
    # 1000 requests, all simulated: 1000 x (1536 + 128) bytes; 10 of them before the
    # horizon: 1000 x 128 (the table) + 10 x 1536.
    assert (BYTES_PER_REQUEST, TABLE_BYTES_PER_REQUEST) == (1536, 128)
    assert memory_guard.estimate_bytes(1000) == 1_664_000
    assert memory_guard.estimate_bytes(1000, simulated=10) == 143_360


def test_work_that_cannot_fit_is_refused_with_the_figures() -> None:
    """10^8 requests grew to 5.5 GB and died with a traceback; now: 10^8 x 1664 bytes =
    155.0 GiB against 16 GiB available, refused with what fits (16 GiB / 1664 bytes)."""
    with pytest.raises(ConfigError) as e:
        check_fits(10**8, available=16 * GIB)
    text = str(e.value)
    assert "workload.num_requests = 100,000,000" in text
    assert "155.0 GiB" in text and "16.0 GiB available" in text
    assert f"at most about {16 * GIB // 1664:,}" in text and "run.horizon_s" in text
    check_fits(10**6, available=16 * GIB)  # 1.5 GiB: fits
    check_fits(10**8, 1000, available=16 * GIB)  # 12.8 GB of table + 2 MB simulated: fits


def test_a_point_of_a_trillion_requests_is_refused_before_anything_is_built() -> None:
    """10^12 raised a raw MemoryError drawing the arrivals; now a ConfigError at once."""
    with pytest.raises(ConfigError, match="workload.num_requests = 1,000,000,000,000"):
        run_point({}, _point(num_requests=10**12))


def test_the_horizon_counts_only_the_requests_before_it(monkeypatch) -> None:
    # 10^6 requests at 10 req/s with a 10 s horizon: ~ 10 x 10 x 1.1 + 100 = 210 simulated
    # -> 1.28e8 + 3.2e5 bytes, under 1 GiB; without the horizon 1.66e9 bytes: refused.
    monkeypatch.setattr("simulator.runner.available_bytes", lambda: GIB)
    with pytest.raises(ConfigError, match="simulating 1,000,000 of them"):
        run_point({}, _point(num_requests=10**6))
    point = {**_point(num_requests=10**6), "run": {"horizon_s": 10.0}}
    res = run_point({}, point).result
    assert 50 <= len(res.requests) <= 210


def test_progress_reports_requests_done_of_the_total() -> None:
    # 2000 requests of 4+1 tokens, 1 ms apart: every one finishes; progress is told
    # every 2 requests (2000 // 1000), so 1000 calls ending at (2000, 2000).
    calls: list[tuple[int, int]] = []
    rows = [(i * 0.001, 4, 1) for i in range(2000)]
    spec = ClusterSpec(ContinuousPolicy(), TokenCost(step_s=0.0005), kv_blocks=1000)
    simulate(table(rows), spec, progress=lambda d, t: calls.append((d, t)))
    assert len(calls) == 1000
    assert calls[0] == (2, 2000) and calls[-1] == (2000, 2000)
    assert all(b[0] > a[0] for a, b in zip(calls, calls[1:], strict=False))


def _shape(i: int) -> StepShape:
    return StepShape(num_prefill_tokens=i, num_decode_seqs=1, decode_context_tokens=i + 1)


def test_step_log_packs_rows_and_keeps_their_order() -> None:
    """Rows are packed into arrays every _FLUSH_ROWS: a log of rows, a long run, then more
    rows across the packing boundary reads back in order."""
    log = StepLog(3)
    n1 = _FLUSH_ROWS + 5
    for i in range(n1):
        log.add(float(i), i + 1.0, _shape(i), 1, 1, 0, i)
    k = 40  # a long run: kept as arrays
    starts = np.arange(n1, n1 + k, dtype=float)
    shapes = StepShapes(num_prefill_tokens=np.zeros(k, np.int64),
                        prefill_attn_work=np.zeros(k), num_decode_seqs=np.ones(k, np.int64),
                        decode_context_tokens=np.arange(k, dtype=np.int64),
                        num_admitted=np.zeros(k, np.int64), num_finished=np.zeros(k, np.int64))
    ones = np.ones(k, np.int64)
    log.extend(starts, starts + 1, shapes, ones, ones, ones * 0, ones * 7)
    n2 = _FLUSH_ROWS
    for i in range(n1 + k, n1 + k + n2):
        log.add(float(i), i + 1.0, _shape(i), 1, 1, 0, i)
    assert len(log._ends) < _FLUSH_ROWS  # packed as it went, not kept as spans
    steps = log.table()
    total = n1 + k + n2
    assert len(steps) == total
    assert steps["start_s"].tolist() == [float(i) for i in range(total)]
    assert steps["kv_blocks_used"].iloc[n1:n1 + k].tolist() == [7] * k
    assert steps["kv_blocks_used"].iloc[-1] == total - 1
    assert (steps["replica"] == 3).all()
    assert steps.dtypes.astype(str).tolist()[:2] == ["float64", "float64"]


def test_a_rate_whose_times_float64_cannot_resolve_is_refused() -> None:
    """rate = 1e-300 put arrivals near 1e303 s, where a 10 ms step vanishes: TTFT 0/0/0.
    1000 requests may span 1e9 s at most: rate 1e-6 is the lowest allowed."""
    with pytest.raises(ConfigError, match=r"span about 1e\+303 s .* at least 1e-06 req/s"):
        poisson_arrivals(1e-300, 1000, np.random.default_rng(0))
    assert MAX_SPAN_S == 1e9
    poisson_arrivals(1e-6, 1000, np.random.default_rng(0))  # 1e9 s: allowed
    with pytest.raises(ConfigError):
        run_point({}, _point(rate=1e-300, num_requests=1000))


def test_a_slow_but_allowed_rate_keeps_its_latencies() -> None:
    # 3 requests at 1e-5 req/s (arrivals ~1e5 s apart): each runs alone, its TTFT is the
    # prefill step, 10 ms (linear cost: step_s 0.01 s), not 0.
    res = run_point({}, _point(rate=1e-5, num_requests=3)).result
    ttft_ms = (res.requests["first_token_s"] - res.requests["arrival_s"]) * 1000
    assert res.requests["arrival_s"].min() > 100  # far from 0, times still resolved
    assert np.allclose(ttft_ms, 10.0, atol=1e-3)


def test_records_keep_types_and_statuses() -> None:
    spec = ClusterSpec(ContinuousPolicy(max_num_batched_tokens=8), TokenCost(step_s=1.0), 100)
    res = simulate(table([(0, 4, 5), (0, 4, 2)]), spec, horizon_s=1.5)
    recs = res.requests.set_index("request_id")
    assert recs["status"].tolist() == ["rejected", "in_flight"]
    assert recs["replica"].tolist() == [0, 0]
    assert recs.loc[0, "reason"].startswith("prompt + output over max_num_batched_tokens")
    assert recs.loc[1, "reason"] == ""


def test_a_step_log_beyond_its_budget_stops_the_run() -> None:
    # 3 requests of 4 + 5 tokens, 1 s apart, 0.1 s a step: each runs alone, a prefill
    # step then 4 decodes: 5 rows each, 15 in all. With a budget of 10 rows, the 3rd
    # request's prefill (row 11, ending at 2.1 s) stops the run, stepping or fast-forwarded.
    spec = ClusterSpec(ContinuousPolicy(), TokenCost(step_s=0.1), kv_blocks=100)
    rows = [(0, 4, 5), (1, 4, 5), (2, 4, 5)]
    assert len(simulate(table(rows), spec, max_step_rows=15).steps) == 15
    for fast_forward in (True, False):
        with pytest.raises(ConfigError, match=r"the step log reached 11 rows at simulated "
                           r"time 2\.1 s.*lower workload.num_requests or set run.horizon_s"):
            simulate(table(rows), spec, max_step_rows=10, fast_forward=fast_forward)
    # 1000 requests hold 4 rows each in their estimate; the rest of 1 GiB at 264 bytes
    assert memory_guard.step_row_budget(1000, available=GIB) == (
        4000 + (GIB - 1000 * 1664) // (3 * 88))
