"""simulator/workload/arrivals.py ``sglang_bench_sends``: SGLang ``bench_serving``'s own send
times, and the published runs whose recorded durations say they were sent so."""

from __future__ import annotations

import importlib
import math
import re
import sys
from pathlib import Path

import numpy as np
import pytest

from simulator.workload.arrivals import sglang_bench_sends

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
published_cases = importlib.import_module("benchmarks.published_cases")
published_lengths = importlib.import_module("benchmarks.published_lengths")


def test_gaps_are_numpy_exponentials_from_seed_1() -> None:
    # by hand: legacy RandomState(1).exponential(1 / 2) twice, then the cumulative sum
    gaps = np.random.RandomState(1).exponential(0.5, size=2)
    assert sglang_bench_sends(2.0, 3).tolist() == [0.0, gaps[0], gaps[0] + gaps[1]]
    assert sglang_bench_sends(2.0, 3)[1] == pytest.approx(0.2698029186)  # RandomState(1)'s
    assert sglang_bench_sends(math.inf, 3).tolist() == [0.0, 0.0, 0.0]


def test_the_random_datasets_length_draws_come_first() -> None:
    rng = np.random.RandomState(7)
    rng.randint(1, 1025, size=4)  # the prompt lengths, then the output lengths
    rng.randint(0, 1025, size=4)
    gaps = rng.exponential(1.0, size=3)
    got = sglang_bench_sends(1.0, 4, seed=7, random_dataset=(1, 1024, 0, 1024))
    np.testing.assert_array_equal(got, np.concatenate([[0.0], np.cumsum(gaps)]))
    assert not np.allclose(got, sglang_bench_sends(1.0, 4, seed=7))


def _predicted_end_minus_duration(case, seed: int) -> float:
    """When the run would end if sent at ``seed``'s times: each request's send + the run's
    median TTFT + its drawn output length x the median ITL, the latest of them; minus the
    recorded duration."""
    wl = case.workload
    n = int(wl["num_prompts"])
    _, _, outputs = published_lengths.random_draws(
        wl["prompt_low"], wl["prompt_high"], wl["output_high"], n, seed)
    sends = sglang_bench_sends(float(wl["rate"]), n, seed, (
        wl["prompt_low"], wl["prompt_high"], 0, wl["output_high"]))
    end = (sends + case.metrics["median_ttft_ms"] / 1e3
           + outputs * case.metrics["median_itl_ms"] / 1e3).max()
    duration = float(re.search(r'"duration": ([0-9.]+)', case.quote).group(1))
    return float(end - duration)


def test_datacrunch_runs_end_as_seed_1_sends_them() -> None:
    """DataCrunch's SGLang 0.4 runs at 1 and 2 req/s (about 300 s each, not saturated, so
    the median ITL holds to the end): sent at seed 1's gaps they end within 2.2 s of their
    recorded durations; seeds 0, 2, 3 and 42 each miss one of them by 14 s or more."""
    runs = [c for c in published_cases.load_cases()
            if re.fullmatch(r"sglang0\.4-dc-h200-.*-random1024-1024-rps[12](-run1212)?", c.id)]
    assert len(runs) == 6
    assert {c.workload.get("client") for c in runs} == {"sglang-bench"}
    assert max(abs(_predicted_end_minus_duration(c, 1)) for c in runs) < 2.3
    for seed in (0, 2, 3, 42):
        assert max(abs(_predicted_end_minus_duration(c, seed)) for c in runs) > 14.0
