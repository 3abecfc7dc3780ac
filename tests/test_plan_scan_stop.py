"""A scan-up point stops once its miss is certainly further off than the closest so far
(simulator/capacity/early_stop.py ``bounded_job``, sizer.py ``Sizer.stop_bound``).

- the watch with a bound, on hand-made requests: values count over ``bound x target``;
  ``bound = inf`` watches lost requests alone;
- the whole plan on a small real scenario whose candidates miss the SLO at every rate
  (so the closest miss is reported): equal, figure for figure, to the plan with every
  point run to its end, with fewer requests simulated;
- a deliberately wrong rule (stop a scan-up point at its first fail, as a verdict-only
  point) is caught by the same comparison: its closest miss is a stopped run's lower
  bound, not a whole run's figure.
"""

from __future__ import annotations

import math
import tomllib
from types import SimpleNamespace
from typing import Any

import pandas as pd
import pytest
from helpers import tiny_plan_scenario

from simulator.capacity import SearchSettings, build_candidates, plan
from simulator.capacity.early_stop import DECIDED, Decided, SLOWatch
from simulator.capacity.sizer import Sizer
from simulator.slo import parse_slo_string

TINY = tiny_plan_scenario("tiny-scan-stop", 4)
COUNTERS = ("decided_early", "requests_simulated")


def _seq(i: int, ttft_s: float, output_tokens: int = 2) -> SimpleNamespace:
    """A finished request sent at 0 whose first token came at ``ttft_s``."""
    return SimpleNamespace(request_id=i, reason="", num_generated=output_tokens,
                           output_tokens=output_tokens, first_token_s=ttft_s,
                           finish_s=ttft_s + 0.001)


def test_the_bounded_watch_counts_over_bound_times_the_target() -> None:
    slo = parse_slo_string("ttft_p99_ms=100")
    table = pd.DataFrame({"output_tokens": [2] * 100})
    # P99 of 100 values: 2 over the threshold decide it (fail_threshold(100, 99) == 2).
    # bound 1.5: 140 ms misses the target but not 1.5 x 100 = 150 ms, so never counts
    watch = SLOWatch(slo, table, 1.5)
    for i in range(10):
        watch(_seq(i, 0.140), 0.0)
    watch(_seq(10, 0.151), 0.0)
    with pytest.raises(Decided) as got:
        watch(_seq(11, 0.160), 0.0)
    assert (got.value.after, got.value.key, got.value.value_ms) == (
        12, "p99_ttft_ms", pytest.approx(151.0))
    # the same requests with bound 1 (the verdict rule) decide at the 2nd over 100 ms
    plain = SLOWatch(slo, table)
    plain(_seq(0, 0.140), 0.0)
    with pytest.raises(Decided) as first:
        plain(_seq(1, 0.140), 0.0)
    assert first.value.after == 2
    # bound inf: no value decides; a refused request does
    lost = SLOWatch(slo, table, math.inf)
    for i in range(50):
        lost(_seq(i, 9.0), 0.0)
    refused = SimpleNamespace(request_id=50, reason="kv: too long", num_generated=0,
                              output_tokens=2, first_token_s=math.nan, finish_s=math.nan)
    with pytest.raises(Decided) as gone:
        lost(refused, 0.0)
    assert (gone.value.after, gone.value.key) == (51, "")


def _plan(slo_text: str, target: float, **settings: Any) -> Any:
    return plan(build_candidates(tomllib.loads(TINY)), target, parse_slo_string(slo_text),
                settings=SearchSettings(min_requests=400, min_tail=4, **settings))


def _figures(result: Any) -> dict[str, Any]:
    """The plan as JSON without the work counters and the early-stop setting."""
    data = result.to_json()
    for c in data["candidates"]:
        for key in COUNTERS:
            c.pop(key)
    data["settings"].pop("early_stop")
    return data


# ttft 4 ms: under every prefill of this traffic (step 4 ms + prompt x 0.02 ms), so every
# candidate misses at every rate and the closest miss of each scan is reported.
UNMEETABLE = "ttft_p99_ms=4.5,tpot_p99_ms=20"


def test_the_plan_equals_the_run_to_the_end_with_fewer_requests() -> None:
    fast = _plan(UNMEETABLE, 150.0)
    full = _plan(UNMEETABLE, 150.0, early_stop=False)
    assert fast.best is None and all(r.status == "misses_slo" for r in fast.ranked)
    assert all("misses the SLO at every rate tried" in r.reason for r in fast.ranked)
    assert _figures(fast) == _figures(full)  # every figure, the closest, the ranking
    # the same points, fewer of their requests: some scan points stopped once further off
    assert [r.simulations for r in fast.ranked] == [r.simulations for r in full.ranked]
    assert sum(r.decided_early for r in fast.ranked) > 0
    assert sum(r.decided_early for r in full.ranked) == 0
    assert sum(r.requests_simulated for r in fast.ranked) < sum(
        r.requests_simulated for r in full.ranked)
    for r in fast.ranked:  # the reported miss is a whole run's, never a lower bound
        assert r.miss is not None and DECIDED not in r.at_target


def test_a_wrong_stop_rule_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    """Stopping a scan-up point at its first fail (bound 1, as if only its verdict were
    read) can report a stopped run's lower bound as the closest miss: the comparison
    above must see it."""
    full = _plan(UNMEETABLE, 150.0, early_stop=False)
    right = Sizer.stop_bound

    def wrong(self: Sizer) -> float | None:
        bound = right(self)
        return 1.0 if bound is not None else None

    monkeypatch.setattr(Sizer, "stop_bound", wrong)
    broken = _plan(UNMEETABLE, 150.0)
    assert _figures(broken) != _figures(full)
