"""benchmarks/closed_loop_groups.py: the second round's groups from a replay's prefill steps,
worked by hand."""

from __future__ import annotations

import importlib
import sys
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
clg = importlib.import_module("benchmarks.closed_loop_groups")


def test_the_second_rounds_groups_by_hand() -> None:
    # 100 clients of 200-token prompts: the first round prefills 1 + 7 + 15 + 31 + 46 = 100
    # prompts in five steps, the second round the same five groups again
    steps = [200, 1400, 3000, 6200, 9200] * 3
    assert clg.round_groups(steps, 200, 100) == Counter({1: 1, 7: 1, 15: 1, 31: 1, 46: 1})
    # a second round split differently: 50 + 50
    assert clg.round_groups([20_000, 10_000, 10_000, 200], 200, 100) == Counter({50: 2})
    assert clg.round_groups([200], 200, 1) == Counter()  # no second round replayed
