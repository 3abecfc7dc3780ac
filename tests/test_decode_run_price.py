"""A decode run's prices and KV counts through their shortcuts equal the general paths'.

- ``StepShapes.decode_run`` marks its steps as pure decodes of D rows; the piecewise
  model then prices the terms of D once per run (``_decode_run_times``). Hand-summed for
  one run, and bit for bit the general path's (the same shapes unmarked) on runs of every
  kind of step the marker can carry: one row, many rows, rows above both knees, finishes.
- ``blocks_used_after_steps`` sums long runs in numpy: the same integers as the cycle of
  block openings summed one by one (hand-counted for a short and a long run).
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from simulator.costs.piecewise import PiecewiseCost
from simulator.kvcache import _CYCLE_STEPS, blocks_used_after_steps
from simulator.shapes import StepShapes

PIECEWISE = PiecewiseCost(decode_step_s=0.01, single_token_step_s=0.004, knee1_tokens=4,
                          knee1_token_s=0.001, knee2_tokens=64, knee2_token_s=0.002,
                          decode_seq_s=1e-4, decode_context_s=1e-6, admit_s=0.5,
                          finish_s=1e-3, prefill_token_s=0.3, prefill_attn_s=0.2,
                          mixed_step_s=0.02, prefill_step_s=0.015)


def _unmarked(shapes: StepShapes) -> StepShapes:
    return dataclasses.replace(shapes, decode_rows=-1)


def test_decode_run_priced_by_hand() -> None:
    shapes = StepShapes.decode_run(8, np.array([1000, 1008, 1016]), np.array([0, 0, 1]))
    assert shapes.decode_rows == 8 and shapes.head(2).decode_rows == 8
    times = PIECEWISE.step_times(shapes)
    # 0.01 + 0.001 * (8 - 4) + 1e-4 * 8 + 1e-6 * C (+ 1e-3 on the step that finishes one)
    assert times.tolist() == pytest.approx([0.0158, 0.015808, 0.016816], abs=1e-15)


@pytest.mark.parametrize("rows", [1, 2, 5, 64, 100, 300])
def test_decode_run_prices_are_the_general_paths(rows: int) -> None:
    rng = np.random.default_rng(rows)
    k = 257
    context = rows * 900 + rows * np.arange(k)
    finished = np.zeros(k, np.int64)
    finished[rng.integers(0, k, 5)] = rng.integers(1, 4, 5)
    marked = StepShapes.decode_run(rows, context, finished)
    general = PIECEWISE.step_times(_unmarked(marked))
    fast = PIECEWISE.step_times(marked)
    assert fast.dtype == general.dtype == np.float64
    assert np.array_equal(fast, general)  # every float, not to a tolerance
    assert np.array_equal(PIECEWISE.step_times(marked.head(40)), general[:40])


def test_blocks_used_after_steps_by_hand() -> None:
    # two sequences: one opens a block every 4th step, the other on the 2nd of each 4
    counts = [1, 1, 0, 0]
    assert blocks_used_after_steps(counts, 6, 10).tolist() == [10, 11, 12, 12, 12, 13, 14]
    long_run = blocks_used_after_steps(counts, _CYCLE_STEPS + 6, 10)
    assert len(long_run) == _CYCLE_STEPS + 7 and long_run.dtype == np.int64
    assert long_run[-1] == 10 + (_CYCLE_STEPS + 6) // 4 * 2 + 2  # 2 a cycle, then 1, 1
    steps = np.resize(np.array(counts), _CYCLE_STEPS + 6)
    assert np.array_equal(long_run, np.concatenate(([10], 10 + np.cumsum(steps))))
