"""``[run] step_log``: "summary" gives the summary "full" gives, "none" says what it lacks.

The summary from aggregated steps must equal the one from the full step log exactly,
except ITL percentiles (within ``ITL_REL_ERROR``, the histogram's stated error) and the
figures that are sums taken in another order (ITL mean and std, utilisation, mean KV
usage: float rounding). Memory structures have sizes fixed ahead (``NUM_BINS``).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd
import pytest
from helpers import TokenCost

import simulator.steplog_summary as steplog_summary
from simulator.cluster import ClusterSpec, simulate
from simulator.errors import ConfigError
from simulator.metrics import summarize
from simulator.metrics_stats import weighted_percentile
from simulator.metrics_steps import HI_MS, ITL_REL_ERROR, LO_MS, NUM_BINS, ItlHistogram, bin_index
from simulator.policies import ContinuousPolicy, StaticPolicy
from simulator.runner import run_point, write_results
from simulator.scenario import apply_overrides, expand_sweep, load_scenario
from simulator.scenario_types import Scenario
from simulator.slo import SLO

ROUNDING = ("mean_itl_ms", "std_itl_ms", "utilisation", "mean_kv_usage")
PERCENTILES = ("median_itl_ms", "p50_itl_ms", "p90_itl_ms", "p99_itl_ms")
STEP_KEYS = (*ROUNDING, *PERCENTILES, "max_kv_usage")


def _point(mode: str, *extra: str, n: int = 400) -> tuple[dict[str, Any], dict[str, Any]]:
    raw = apply_overrides(load_scenario("scenarios/chat.toml"), [
        f"workload.num_requests={n}", "workload.rate=12", "policy.name='continuous'",
        f"run.step_log='{mode}'", *extra])
    (labels, point), = expand_sweep(raw)
    return labels, point


def _assert_same(full: dict[str, Any], other: dict[str, Any], *, itl: bool = True) -> None:
    """Every key of ``full`` equal in ``other`` (see the module doc for the exceptions)."""
    for key, value in full.items():
        if key in ("sim_wall_s",):
            continue
        got = other[key]
        if key in PERCENTILES and itl:
            assert got == pytest.approx(value, rel=ITL_REL_ERROR), key
        elif key in ROUNDING and value is not None and got is not None:
            assert got == pytest.approx(value, rel=1e-12, abs=1e-15), key
        elif key == "slo":  # its ITL check reads the histogram
            assert got.keys() == value.keys()
            for name, check in value.items():
                assert got[name]["met"] == check["met"], name
                assert got[name]["value"] == pytest.approx(check["value"], rel=ITL_REL_ERROR)
        else:
            assert got == value, key


CASES = [
    (),
    ("policy.name='chunked'",),
    ("stack.name='sglang'",),  # prefill-only steps: ITL gaps across them (itl_gaps.py)
    ("policy.name='static'", "policy.batch_size=4"),
    ("policy.name='dynamic'",),
    ("cluster.replicas=3", "cluster.router='least_outstanding'", "workload.rate=30"),
    ("run.horizon_s=20",),  # in flight at the horizon: steps after the last finish
    ("cluster.replicas=2", "run.horizon_s=15", "workload.rate=40"),
    ("run.fast_forward=false",),
    ("slo.itl_ms=50",),
]


@pytest.mark.parametrize("extra", CASES, ids=lambda e: " ".join(e) or "continuous")
def test_summary_equals_full(extra: tuple[str, ...]) -> None:
    full = run_point(*_point("full", *extra)).summary
    summ = run_point(*_point("summary", *extra)).summary
    _assert_same(full, summ)
    assert summ["step_log"] == "summary" and "0.1%" in summ["step_log_note"]
    assert "step_log" not in full  # full summaries are as they were


@pytest.mark.parametrize("extra", CASES[:8], ids=lambda e: " ".join(e) or "continuous")
def test_many_small_folds_give_the_same_figures(
        extra: tuple[str, ...], monkeypatch: pytest.MonkeyPatch) -> None:
    # fold every 5 rows: tails after a finish carried across many folds
    full = run_point(*_point("full", *extra)).summary
    monkeypatch.setattr(steplog_summary, "_FOLD_ROWS", 5)
    _assert_same(full, run_point(*_point("summary", *extra)).summary)


def test_none_keeps_no_step_figures_and_says_so() -> None:
    full = run_point(*_point("full")).summary
    none = run_point(*_point("none")).summary
    for key in STEP_KEYS:
        assert none[key] is None, key  # never a number it cannot know
    rest = {k: v for k, v in full.items() if k not in STEP_KEYS}
    _assert_same(rest, none)
    assert none["step_log"] == "none" and "ITL" in none["step_log_note"]


def test_none_refuses_an_itl_target() -> None:
    with pytest.raises(ConfigError, match="slo.itl_ms needs the step log"):
        run_point(*_point("none", "slo.itl_ms=50"))


def test_an_unknown_mode_is_refused() -> None:
    with pytest.raises(ConfigError, match="run.step_log"):
        Scenario.from_dict(_point("full", n=10)[1] | {"run": {"step_log": "some"}})


def test_exact_itl_when_every_step_lasts_the_same() -> None:
    # 250 ms steps from whole-second arrivals: every time is exact in binary, so every
    # step's duration is one value and its bin gives it back exactly
    rng = np.random.default_rng(5)
    n = 300
    requests = pd.DataFrame({"request_id": np.arange(n), "prompt_tokens": 8,
                             "arrival_s": np.cumsum(rng.integers(0, 3, n)).astype(float),
                             "output_tokens": rng.integers(1, 30, n)})
    spec = ClusterSpec(StaticPolicy(batch_size=1), TokenCost(step_s=0.25), kv_blocks=1000)
    full = simulate(requests, spec)
    summ = simulate(requests, ClusterSpec(StaticPolicy(batch_size=1), TokenCost(step_s=0.25),
                                          kv_blocks=1000, step_log="summary"))
    assert len(summ.steps) == 0 and summ.step_stats is not None
    assert summ.step_stats.num_steps == len(full.steps)
    a = summarize(full.requests, full.steps, kv_blocks_total=1000)
    b = summarize(summ.requests, summ.steps, kv_blocks_total=1000, step_stats=summ.step_stats)
    for key in PERCENTILES:
        assert b[key] == a[key] == 250.0, key


def test_histogram_percentiles_within_the_stated_error() -> None:
    rng = np.random.default_rng(11)
    values = np.exp(rng.uniform(np.log(1e-3), np.log(1e5), 20_000))
    weights = rng.integers(1, 50, values.size)
    h = ItlHistogram()
    for lo in range(0, values.size, 3000):  # in parts, as a run folds them
        h.add(values[lo:lo + 3000], weights[lo:lo + 3000])
    rep, counts = h.samples()
    for q in (0, 1, 10, 25, 50, 75, 90, 99, 99.9, 100):
        exact = weighted_percentile(values, weights, q)
        assert weighted_percentile(rep, counts, q) == pytest.approx(exact, rel=ITL_REL_ERROR)
    stats = h.describe((50,))
    assert stats["mean"] == pytest.approx(np.average(values, weights=weights), rel=1e-12)
    assert h.weight == int(weights.sum())


def test_histogram_size_does_not_grow_with_steps() -> None:
    # K bins: log(HI/LO) / log((1+e)/(1-e)) rounded up, plus under- and overflow
    e = 0.999 * ITL_REL_ERROR
    assert NUM_BINS == math.ceil(math.log(HI_MS / LO_MS) / math.log((1 + e) / (1 - e))) + 2
    assert NUM_BINS < 21_000  # 3 arrays of 8 bytes: under 0.5 MB a replica
    h = ItlHistogram()
    for _ in range(20):
        h.add(np.random.default_rng(0).uniform(1, 100, 50_000), np.ones(50_000, np.int64))
    assert h.counts.shape == h.lo_ms.shape == h.hi_ms.shape == (NUM_BINS,)
    assert bin_index(np.array([0.0, LO_MS / 2, LO_MS, HI_MS, 1e300])).tolist() == [
        0, 0, 1, NUM_BINS - 2, NUM_BINS - 1]


def test_summary_log_holds_a_bounded_number_of_rows() -> None:
    rng = np.random.default_rng(2)
    n = 3000
    requests = pd.DataFrame({"request_id": np.arange(n), "prompt_tokens": 16,
                             "arrival_s": np.cumsum(rng.exponential(0.01, n)),
                             "output_tokens": rng.integers(1, 200, n)})
    spec = ClusterSpec(ContinuousPolicy(max_num_seqs=8), TokenCost(0.01, 1e-5, 1e-4), 10_000,
                       step_log="summary")
    # a log holding more rows than this would stop the run (memory_guard.step_log_full)
    res = simulate(requests, spec, max_step_rows=steplog_summary._FOLD_ROWS + 64)
    stats = res.step_stats
    assert stats is not None and stats.num_steps > 4 * steplog_summary._FOLD_ROWS
    assert len(stats.tail_end_s) == 0  # every request finished: no step after the last


def test_results_folder_has_steps_only_when_kept(tmp_path: Any) -> None:
    for mode in ("full", "summary"):
        result = run_point(*_point(mode, n=50))
        paths = write_results([result], tmp_path / mode)
        names = sorted(p.name for p in paths)
        assert ("steps.parquet" in names) == (mode == "full"), names
        assert not (tmp_path / "summary" / "steps.parquet").exists() or mode == "full"


def test_summarize_refuses_steps_and_stats_together() -> None:
    result = run_point(*_point("full", n=30)).result
    other = run_point(*_point("summary", n=30)).result
    with pytest.raises(ValueError, match="not both"):
        summarize(result.requests, result.steps, SLO(), step_stats=other.step_stats)
