"""WorkloadConfig validation and build_requests."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from simulator.errors import ConfigError
from simulator.workload import LogNormal, WorkloadConfig, build_requests
from simulator.workload.config import DEFAULT_OUTPUT, DEFAULT_PROMPT

FIX = Path(__file__).parent / "fixtures" / "workload"


def build(d: dict, seed: int = 0, max_context: int | None = None):
    cfg = WorkloadConfig.from_dict(d, base_dir=FIX)
    return build_requests(cfg, np.random.default_rng(seed), max_context)


def test_defaults_are_chat_like_poisson() -> None:
    cfg = WorkloadConfig()
    assert cfg.arrival == "poisson" and cfg.rate == 1.0 and cfg.num_requests == 1000
    assert cfg.prompt == LogNormal(1100.0, 1.0) and cfg.output == LogNormal(265.0, 0.9)
    assert WorkloadConfig.from_dict({}) == cfg


@pytest.mark.parametrize(
    "d, message",
    [
        ({"rate": -1}, "workload.rate = -1: must be > 0"),
        ({"rate": "fast"}, "workload.rate = 'fast': must be a number"),
        ({"rate": "5"}, "workload.rate = '5': must be a number; write it without quotes"),
        ({"rate": True}, "workload.rate = true: must be a number"),
        ({"arrival": "bursty"}, "workload.arrival = 'bursty': must be one of"),
        ({"num_requests": 0}, "workload.num_requests = 0: must be >= 1"),
        ({"num_requests": 2.5}, "workload.num_requests = 2.5: must be a whole number"),
        ({"arrival": "gamma", "cv": 0}, "workload.cv = 0: must be > 0"),
        ({"cv": 2.0}, "workload.cv = 2.0: only for arrival = 'gamma'"),
        ({"arrival": "closed"}, "workload.concurrency is required"),
        ({"arrival": "closed", "concurrency": 0}, "workload.concurrency = 0: must be >= 1"),
        ({"arrival": "closed", "concurrency": 4, "rate": 2}, "workload.rate = 2.0: a closed loop"),
        (
            {"arrival": "closed", "concurrency": 4, "think_time_s": -1},
            "workload.think_time_s = -1: must be >= 0",
        ),
        ({"concurrency": 4}, "workload.concurrency = 4: only for arrival = 'closed'"),
        ({"arrival": "trace"}, "workload.trace is required"),
        ({"trace": "lengths.csv", "trace_format": "csv"}, "workload.trace_format = 'csv'"),
        ({"context_rule": "cut"}, "workload.context_rule = 'cut': must be one of"),
        ({"seed": 3}, "workload.seed: unknown key"),
        (
            {"prompt": {"dist": "lognormal", "mean": 800, "sigma": -2}},
            "workload.prompt.sigma = -2: must be >= 0",
        ),
        # a trace with prompt/output: the trace wins (tests/test_scenario_trace.py)
    ],
)
def test_errors_name_field_and_value(d: dict, message: str) -> None:
    with pytest.raises(ConfigError) as info:
        WorkloadConfig.from_dict(d)
    assert message in str(info.value)


def test_a_word_gets_no_quote_hint() -> None:
    # quotes are the slip only when the word unquoted would be a number
    with pytest.raises(ConfigError) as info:
        WorkloadConfig.from_dict({"rate": "fast"})
    assert str(info.value) == "workload.rate = 'fast': must be a number"


def test_where_prefix_is_used() -> None:
    with pytest.raises(ConfigError, match=r"sweep\[2\].workload.rate = 0"):
        WorkloadConfig.from_dict({"rate": 0}, where="sweep[2].workload")


def test_synthetic_same_seed_same_table() -> None:
    d = {"arrival": "gamma", "rate": 5, "cv": 3, "num_requests": 500}
    a, b = build(d, seed=7), build(d, seed=7)
    pd.testing.assert_frame_equal(a.table, b.table)
    assert not build(d, seed=8).table.equals(a.table)
    assert a.table["request_id"].tolist() == list(range(500))
    assert a.closed_loop is None and a.counts["truncated"] == 0


def test_context_fit_counts_reach_the_build() -> None:
    d = {
        "num_requests": 2000,
        "prompt": {"dist": "fixed", "tokens": 900},
        "output": {"dist": "uniform", "low": 50, "high": 150},
    }
    built = build(d, max_context=1000)
    over = build(d).table.eval("prompt_tokens + output_tokens > 1000").sum()
    assert built.counts["truncated"] == over > 0
    assert (built.table.eval("prompt_tokens + output_tokens") <= 1000).all()
    dropped = build({**d, "context_rule": "drop"}, max_context=1000)
    assert dropped.counts["dropped_context"] == over and len(dropped.table) == 2000 - over
    assert dropped.table["request_id"].tolist() == list(range(2000 - over))


def test_closed_loop_columns() -> None:
    built = build(
        {"arrival": "closed", "concurrency": 3, "think_time_s": 2.0, "num_requests": 3000}
    )
    t = built.table
    assert built.closed_loop == 3 and t["arrival_s"].isna().all()
    assert t["client_id"].tolist()[:5] == [0, 1, 2, 0, 1]
    assert t["think_s"].tolist()[:3] == [0.0] * 3 and (t["think_s"][3:] > 0).all()
    assert t["think_s"].mean() == pytest.approx(2.0, rel=0.1)
    no_think = build({"arrival": "closed", "concurrency": 2, "num_requests": 4}).table
    assert no_think["think_s"].tolist() == [0.0] * 4


def test_trace_arrivals_rescaled_and_drop_counts() -> None:
    built = build({"arrival": "trace", "trace": "burstgpt1.csv", "rate": 0.1})
    arr = built.table["arrival_s"].to_numpy()
    assert (len(arr) - 1) / (arr[-1] - arr[0]) == pytest.approx(0.1, rel=1e-12)
    assert built.counts["dropped_trace"] == 3
    assert built.counts["dropped_trace.failed_request"] == 1
    as_is = build({"arrival": "trace", "trace": "burstgpt1.csv"}).table
    assert as_is["arrival_s"].tolist() == [0.0, 40.0, 113.0]


def test_length_only_trace_needs_synthetic_arrivals() -> None:
    for trace in ("lengths.csv", "vllm_bench.json"):
        with pytest.raises(ConfigError, match="pick arrival = 'poisson', 'gamma' or 'constant'"):
            build({"arrival": "trace", "trace": trace})
    built = build({"arrival": "constant", "rate": 2, "trace": "lengths.csv"})
    assert built.table["arrival_s"].tolist() == [0.0, 0.5, 1.0]
    assert built.table["prompt_tokens"].tolist() == [74, 290, 1402]  # pairs kept in order
    with pytest.raises(ConfigError, match="num_requests = 9: .* has only 3"):
        build({"arrival": "poisson", "trace": "lengths.csv", "num_requests": 9})


def test_trace_lengths_with_synthetic_arrivals() -> None:
    d = {
        "rate": 3,
        "num_requests": 200,
        "prompt": {"dist": "trace", "path": "lengths.csv", "column": "prompt"},
        "output": {"dist": "trace", "path": "vllm_bench.json", "column": "output"},
    }
    t = build(d, seed=1).table
    assert set(t["prompt_tokens"]) <= {74, 290, 1402}
    assert set(t["output_tokens"]) <= {32, 16, 8}
    pd.testing.assert_frame_equal(t, build(d, seed=1).table)


def test_defaults_are_shared_objects() -> None:
    # the "prompt given with a trace" check relies on default identity
    assert WorkloadConfig().prompt is DEFAULT_PROMPT
    assert WorkloadConfig().output is DEFAULT_OUTPUT
