"""Summary metrics on hand-built request records and step logs, checked figure by figure.

The three-request run used throughout (times in s, latencies in ms):

    id  arrival  scheduled  first  finish  prompt  output   queue  ttft  e2el  tpot
    0   0.0      0.0        0.1    1.1     100     11       0      100   1100  1000/10 = 100
    1   1.0      1.5        1.7    2.7     200     21       500    700   1700  1000/20 = 50
    2   2.0      2.0        2.3    5.0     300     28       0      300   3000  2700/27 = 100

Duration 0 -> 5.0 s. The step log: replica 0 runs [0, 1) prefill, [1, 1.5) with 4
decode tokens, [1.5, 2) with 2; replica 1 runs [2, 3) with 1 decode token.
"""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pytest

from simulator.metrics import (
    SUMMARY_VERSION,
    itl_samples,
    request_metrics,
    summarize,
    to_json_safe,
    weighted_percentile,
)
from simulator.records import REQUEST_COLUMNS, STEP_COLUMNS, conform
from simulator.slo import SLO

NAN = float("nan")


def approx(x: float) -> object:
    return pytest.approx(x, rel=1e-12, abs=1e-12)


def make_requests(rows: list[tuple]) -> pd.DataFrame:
    """rows: (arrival, scheduled, first, finish, prompt, output, status[, preemptions])."""
    names = ["arrival_s", "scheduled_s", "first_token_s", "finish_s", "prompt_tokens"]
    names += ["output_tokens", "status", "preemptions"]
    df = pd.DataFrame([r if len(r) == 8 else (*r, 0) for r in rows], columns=names)
    df["request_id"], df["replica"], df["reason"] = range(len(df)), 0, ""
    return conform(df, REQUEST_COLUMNS, "requests")


def make_steps(rows: list[tuple]) -> pd.DataFrame:
    """rows: (start, end, num_decode_tokens, kv_blocks_used, replica); other columns 0."""
    names = ["start_s", "end_s", "num_decode_tokens", "kv_blocks_used", "replica"]
    df = pd.DataFrame(rows, columns=names).reindex(columns=list(STEP_COLUMNS), fill_value=0)
    return conform(df, STEP_COLUMNS, "steps")


THREE = [
    (0.0, 0.0, 0.1, 1.1, 100, 11, "finished"),
    (1.0, 1.5, 1.7, 2.7, 200, 21, "finished", 2),
    (2.0, 2.0, 2.3, 5.0, 300, 28, "finished"),
]
STEPS = [(0.0, 1.0, 0, 10, 0), (1.0, 1.5, 4, 20, 0), (1.5, 2.0, 2, 40, 0), (2.0, 3.0, 1, 25, 1)]


@pytest.fixture
def run() -> tuple[pd.DataFrame, pd.DataFrame]:
    return make_requests(THREE), make_steps(STEPS)


def test_request_metrics_per_row(run: tuple[pd.DataFrame, pd.DataFrame]) -> None:
    per = request_metrics(run[0])
    assert per["queue_ms"].tolist() == [approx(0), approx(500), approx(0)]
    assert per["ttft_ms"].tolist() == [approx(100), approx(700), approx(300)]
    assert per["e2el_ms"].tolist() == [approx(1100), approx(1700), approx(3000)]
    assert per["tpot_ms"].tolist() == [approx(100), approx(50), approx(100)]
    assert "status" in per.columns and len(per) == 3


def test_request_metrics_one_token_output_has_no_tpot() -> None:
    per = request_metrics(make_requests([(0.0, 0.0, 0.2, 0.2, 10, 1, "finished")]))
    assert math.isnan(per["tpot_ms"][0])
    assert per["ttft_ms"][0] == approx(200)


def test_counts_tokens_and_throughputs(run: tuple[pd.DataFrame, pd.DataFrame]) -> None:
    s = summarize(*run, num_replicas=2)
    assert s["summary_version"] == SUMMARY_VERSION == 1
    assert s["completed"] == 3 and s["num_rejected"] == 0 and s["num_in_flight"] == 0
    assert s["duration"] == 5.0
    assert s["total_input_tokens"] == 600 and s["total_output_tokens"] == 60
    assert s["request_throughput"] == approx(3 / 5)
    assert s["output_throughput"] == approx(60 / 5)
    assert s["total_token_throughput"] == approx(660 / 5)
    assert s["num_preemptions"] == 2


def test_latency_statistics(run: tuple[pd.DataFrame, pd.DataFrame]) -> None:
    s = summarize(*run, num_replicas=2)
    assert s["mean_ttft_ms"] == approx(1100 / 3)
    assert s["median_ttft_ms"] == s["p50_ttft_ms"] == approx(300)
    m = 1100 / 3
    assert s["std_ttft_ms"] == approx(
        math.sqrt(((100 - m) ** 2 + (300 - m) ** 2 + (700 - m) ** 2) / 3)
    )
    assert s["p90_ttft_ms"] == approx(300 + 0.8 * 400)  # h = 2 * 0.9 = 1.8
    assert s["p99_ttft_ms"] == approx(300 + 0.98 * 400)  # h = 1.98
    assert s["mean_tpot_ms"] == approx(250 / 3)
    assert s["median_tpot_ms"] == approx(100) and s["p99_tpot_ms"] == approx(100)
    assert s["mean_e2el_ms"] == approx(5800 / 3)
    assert s["median_e2el_ms"] == approx(1700)
    assert s["p99_e2el_ms"] == approx(1700 + 0.98 * 1300)
    assert s["mean_queue_ms"] == approx(500 / 3)
    assert s["median_queue_ms"] == approx(0) and s["p90_queue_ms"] == approx(400)


def test_itl_statistics_from_step_log(run: tuple[pd.DataFrame, pd.DataFrame]) -> None:
    # samples: 500 ms x 4, 500 ms x 2, 1000 ms x 1 -> [500] * 6 + [1000]
    s = summarize(*run, num_replicas=2)
    assert s["mean_itl_ms"] == approx(4000 / 7)
    assert s["median_itl_ms"] == approx(500)
    assert s["p90_itl_ms"] == approx(500 + 0.4 * 500)  # h = 6 * 0.9 = 5.4
    assert s["p99_itl_ms"] == approx(500 + 0.94 * 500)  # h = 5.94
    assert s["std_itl_ms"] == approx(float(np.std([500] * 6 + [1000])))


def test_percentiles_on_one_to_hundred() -> None:
    rows = [(0.0, 0.0, t / 1000, t / 1000 + 1, 1, 2, "finished") for t in range(1, 101)]
    s = summarize(make_requests(rows), make_steps([]), percentiles=(50, 90, 99, 99.9))
    assert s["p50_ttft_ms"] == approx(50.5)
    assert s["p90_ttft_ms"] == approx(90.1)
    assert s["p99_ttft_ms"] == approx(99.01)
    assert s["p99.9_ttft_ms"] == approx(99.901)
    assert s["mean_ttft_ms"] == approx(50.5) and s["median_ttft_ms"] == approx(50.5)


def test_goodput_two_of_three(run: tuple[pd.DataFrame, pd.DataFrame]) -> None:
    # request 1 misses TTFT (700 > 400); 0 and 2 meet both targets
    s = summarize(*run, num_replicas=2, slo=SLO(ttft_ms=400, tpot_ms=150))
    assert s["request_goodput"] == approx(2 / 5)
    assert s["goodput_fraction"] == approx(2 / 3)
    s = summarize(*run, num_replicas=2, slo=SLO(e2el_ms=1800))  # only 0 and 1 meet
    assert s["request_goodput"] == approx(2 / 5)


def test_percentile_slo_check(run: tuple[pd.DataFrame, pd.DataFrame]) -> None:
    s = summarize(*run, num_replicas=2, slo=SLO(ttft_ms=400, tpot_ms=150, percentile=50))
    assert s["slo_met"] is True
    assert s["slo"] == {
        "p50_ttft_ms": {"target": 400.0, "value": approx(300), "met": True},
        "p50_tpot_ms": {"target": 150.0, "value": approx(100), "met": True},
    }
    s = summarize(*run, num_replicas=2, slo=SLO(ttft_ms=400, itl_ms=1000, percentile=99))
    assert s["slo_met"] is False
    assert s["slo"]["p99_ttft_ms"]["met"] is False and s["slo"]["p99_ttft_ms"]["value"] == approx(
        692
    )
    assert s["slo"]["p99_itl_ms"] == {"target": 1000.0, "value": approx(970), "met": True}


def test_slo_percentile_outside_reported_percentiles(
    run: tuple[pd.DataFrame, pd.DataFrame],
) -> None:
    s = summarize(*run, num_replicas=2, slo=SLO(e2el_ms=3000, percentile=75), percentiles=(50,))
    assert s["slo"]["p75_e2el_ms"]["value"] == approx(1700 + 0.5 * 1300)
    assert "p75_e2el_ms" not in s and "p99_e2el_ms" not in s


def test_no_slo_gives_none(run: tuple[pd.DataFrame, pd.DataFrame]) -> None:
    s = summarize(*run, num_replicas=2)
    assert s["request_goodput"] is None and s["goodput_fraction"] is None
    assert s["slo_met"] is None and s["slo"] == {}
    s = summarize(*run, num_replicas=2, slo=SLO(itl_ms=600))
    # ITL alone: a percentile check, no goodput
    assert s["request_goodput"] is None and s["slo_met"] is False


def test_one_token_outputs_left_out_of_tpot_but_good() -> None:
    reqs = make_requests(
        [(0.0, 0.0, 0.1, 1.1, 10, 11, "finished"), (0.0, 0.0, 0.2, 0.2, 10, 1, "finished")]
    )
    s = summarize(reqs, make_steps([]), SLO(tpot_ms=150))
    assert s["mean_tpot_ms"] == approx(100) and s["median_tpot_ms"] == approx(100)
    assert s["completed"] == 2 and s["total_output_tokens"] == 12
    assert s["goodput_fraction"] == approx(1.0)  # vLLM counts the 1-token TPOT as 0


def test_rejected_and_in_flight_counted_not_measured() -> None:
    rows = [
        *THREE,
        (0.5, NAN, NAN, NAN, 400, 50, "rejected"),
        (3.0, 3.0, 3.01, NAN, 500, 60, "in_flight", 1),
    ]
    s = summarize(make_requests(rows), make_steps(STEPS), SLO(ttft_ms=400), num_replicas=2)
    assert s["completed"] == 3 and s["num_rejected"] == 1 and s["num_in_flight"] == 1
    assert s["duration"] == 5.0  # first arrival to last finish of a finished request
    assert s["total_input_tokens"] == 600 and s["total_output_tokens"] == 60
    assert s["mean_ttft_ms"] == approx(1100 / 3) and s["p99_queue_ms"] == approx(490)
    assert s["request_goodput"] == approx(2 / 5)
    assert s["goodput_fraction"] == approx(2 / 5)  # over all 5 that arrived
    assert s["num_preemptions"] == 3


def test_explicit_duration(run: tuple[pd.DataFrame, pd.DataFrame]) -> None:
    s = summarize(*run, duration_s=10.0, num_replicas=2)
    assert s["duration"] == 10.0
    assert s["request_throughput"] == approx(0.3)
    assert s["output_throughput"] == approx(6.0)
    assert s["utilisation"] == approx(3.0 / 20.0)
    with pytest.raises(ValueError, match="duration_s"):
        summarize(*run, duration_s=0.0, num_replicas=2)


def test_utilisation_and_kv_usage(run: tuple[pd.DataFrame, pd.DataFrame]) -> None:
    # busy 1 + 0.5 + 0.5 + 1 = 3 s over 5 s x 2 replicas; usage 0.1, 0.2, 0.4, 0.5
    s = summarize(*run, kv_blocks_total={0: 100, 1: 50}, num_replicas=2)
    assert s["utilisation"] == approx(0.3)
    assert s["mean_kv_usage"] == approx(0.3) and s["max_kv_usage"] == approx(0.5)
    s = summarize(*run, kv_blocks_total=100, num_replicas=4)
    assert s["utilisation"] == approx(0.15)
    assert s["mean_kv_usage"] == approx(0.95 / 4) and s["max_kv_usage"] == approx(0.4)
    assert summarize(*run, num_replicas=2)["mean_kv_usage"] is None


def test_utilisation_clips_steps_past_the_window(run: tuple[pd.DataFrame, pd.DataFrame]) -> None:
    steps = make_steps([*STEPS, (4.5, 6.0, 1, 5, 1)])  # runs 1 s past the last finish
    assert summarize(run[0], steps, num_replicas=2)["utilisation"] == approx(3.5 / 10)


def test_resource_argument_errors(run: tuple[pd.DataFrame, pd.DataFrame]) -> None:
    with pytest.raises(ValueError, match="replicas"):
        summarize(*run, kv_blocks_total={0: 100}, num_replicas=2)
    with pytest.raises(ValueError, match="kv_blocks_total = 0"):
        summarize(*run, kv_blocks_total=0, num_replicas=2)
    with pytest.raises(ValueError, match="2 replicas"):
        summarize(*run, num_replicas=1)
    with pytest.raises(ValueError, match="percentile"):
        summarize(*run, num_replicas=2, percentiles=(50, 101))
    with pytest.raises(ValueError, match="lacks columns"):
        summarize(run[0].drop(columns=["status"]), run[1], num_replicas=2)


def test_itl_samples(run: tuple[pd.DataFrame, pd.DataFrame]) -> None:
    values, weights = itl_samples(run[1])
    assert values.tolist() == [500.0, 500.0, 1000.0]
    assert weights.tolist() == [4, 2, 1]


def test_weighted_percentile_matches_repeated_values() -> None:
    rng = np.random.default_rng(7)
    for _ in range(50):
        n = int(rng.integers(1, 12))
        values = np.round(rng.exponential(30.0, n), 3)
        weights = rng.integers(0, 6, n)
        weights[0] = max(weights[0], 1)
        repeated = np.repeat(values, weights)
        for q in (0, 1, 25, 50, 90, 99, 99.9, 100, float(rng.uniform(0, 100))):
            assert weighted_percentile(values, weights, q) == np.percentile(repeated, q)


def test_weighted_percentile_unit_weights_is_numpy_linear() -> None:
    values = np.arange(1.0, 101.0)
    for q in (0, 50, 90, 99, 100):
        assert weighted_percentile(values, np.ones(100), q) == np.percentile(values, q)


def test_weighted_percentile_edges() -> None:
    assert math.isnan(weighted_percentile([], [], 50))
    assert math.isnan(weighted_percentile([1.0, 2.0], [0, 0], 50))
    assert weighted_percentile([5.0, 1.0], [1, 0], 99) == 5.0
    with pytest.raises(ValueError, match="q="):
        weighted_percentile([1.0], [1], 101)
    with pytest.raises(ValueError, match="weights"):
        weighted_percentile([1.0], [-1], 50)
    with pytest.raises(ValueError, match="length"):
        weighted_percentile([1.0, 2.0], [1], 50)


def test_summary_is_json_safe(run: tuple[pd.DataFrame, pd.DataFrame]) -> None:
    s = summarize(*run, num_replicas=2, slo=SLO(ttft_ms=400), kv_blocks_total=100)
    back = json.loads(json.dumps(to_json_safe(s), allow_nan=False))
    assert back["p99_ttft_ms"] == approx(692) and back["slo_met"] is False
    for key, value in s.items():
        assert type(value) in (int, float, bool, dict, type(None)), key


def test_empty_run_is_json_safe() -> None:
    s = summarize(make_requests([(0.0, NAN, NAN, NAN, 5, 5, "rejected")]), make_steps([]),
                  SLO(ttft_ms=100))  # fmt: skip
    assert s["completed"] == 0 and s["num_rejected"] == 1
    assert math.isnan(s["duration"]) and math.isnan(s["mean_ttft_ms"])
    safe = to_json_safe(s)
    json.dumps(safe, allow_nan=False)
    assert safe["duration"] is None and safe["p99_e2el_ms"] is None
    assert safe["slo"]["p99_ttft_ms"] == {"target": 100.0, "value": None, "met": False}
    assert safe["goodput_fraction"] == 0.0


def test_to_json_safe_converts_numpy() -> None:
    out = to_json_safe({"a": np.float64(np.inf), "b": np.int64(3), "c": (np.bool_(True),)})
    assert out == {"a": None, "b": 3, "c": [True]}
    assert type(out["b"]) is int


def test_vllm_key_names_present(run: tuple[pd.DataFrame, pd.DataFrame]) -> None:
    s = summarize(*run, num_replicas=2)
    vllm = {
        "completed", "duration", "total_input_tokens", "total_output_tokens",
        "request_throughput", "request_goodput", "output_throughput", "total_token_throughput",
    }  # fmt: skip
    for m in ("ttft", "tpot", "itl", "e2el"):
        vllm |= {f"mean_{m}_ms", f"median_{m}_ms", f"std_{m}_ms", f"p99_{m}_ms"}
    assert vllm <= set(s)
