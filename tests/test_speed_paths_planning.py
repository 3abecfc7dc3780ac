"""Issue 13's step-loop speed paths, second slice: same answers as the plain paths.

- A vectorised decode run is planned only up to the step in progress at the next arrival
  (estimated from the first step's price, planned further when the estimate falls short):
  exactly the records, step log and SimPy events of planning every step and cutting.
- The step log keeps single steps and short decode runs as spans; its table is the rows
  a reader can write down by hand.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd
import pytest
from helpers import table
from hypothesis import given, settings
from hypothesis import strategies as st

import simulator.replica as replica_module
from simulator.cluster import ClusterSpec, SimResult, simulate
from simulator.costs import LinearCost
from simulator.costs.base import DecodePricer
from simulator.fastforward import steps_reaching
from simulator.policies import ContinuousPolicy
from simulator.shapes import StepShape, StepShapes
from simulator.steplog import StepLog


@dataclass(frozen=True)
class CheaperLaterCost:
    """t = 0.01 + P / 1000 + 2 / (1 + C): decode steps get cheaper as the context grows,
    so an estimate from the first step's price falls short (the replica plans further)."""

    def step_time(self, shape: StepShape) -> float:
        return 0.01 + shape.num_prefill_tokens / 1000 + 2 / (1 + shape.decode_context_tokens)

    def step_times(self, shapes: StepShapes) -> np.ndarray:
        return (0.01 + shapes.num_prefill_tokens / 1000
                + 2 / (1 + shapes.decode_context_tokens))

    def decode_pricer(self) -> DecodePricer:
        return lambda d, c, num_finished: 0.01 + 0 / 1000 + 2 / (1 + c)


COSTS = {
    "linear": LinearCost(step_s=0.003, prefill_token_s=1e-4, decode_seq_s=2e-4,
                         decode_context_s=1e-6, request_s=1e-4),
    "cheaper-later": CheaperLaterCost(),
}

requests = st.lists(
    st.tuples(st.floats(0, 30), st.integers(1, 40), st.integers(1, 400)), min_size=1,
    max_size=20,
)


def _same(a: SimResult, b: SimResult) -> None:
    pd.testing.assert_frame_equal(a.requests, b.requests, check_exact=True)
    pd.testing.assert_frame_equal(a.steps, b.steps, check_exact=True)
    assert a.num_events == b.num_events


def test_steps_reaching_covers_the_step_in_progress() -> None:
    # steps of 0.1 s from 0: the one in progress at 1.05 s is the 11th; one more for margin
    assert steps_reaching(500, 0.0, 1.05, 0.1) == 12
    assert steps_reaching(5, 0.0, 1.05, 0.1) == 5  # never more than the run
    assert steps_reaching(500, 0.0, math.inf, 0.1) == 500  # nobody comes: the whole run
    assert steps_reaching(500, 0.0, 1.0, 0.0) == 500  # free steps: no estimate


@settings(max_examples=80, deadline=None)
@given(rows=requests, max_seqs=st.integers(1, 6), kv_blocks=st.integers(8, 400),
       chunked=st.booleans(), cost=st.sampled_from(list(COSTS)),
       horizon=st.sampled_from([None, 7.0]))
def test_runs_planned_to_the_next_arrival_match_planning_every_step(  # type: ignore[no-untyped-def]
    rows, max_seqs, kv_blocks, chunked, cost, horizon
) -> None:
    policy = ContinuousPolicy(max_num_seqs=max_seqs, max_num_batched_tokens=512,
                              chunked_prefill=chunked)
    spec = ClusterSpec(policy, COSTS[cost], kv_blocks=kv_blocks, block_size=4,
                       check_invariants=True)
    results = []
    for whole in (False, True):
        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(replica_module, "_SHORT_RUN", 2)  # vectorised runs from 3 steps
            if whole:  # plan every step of a run, then cut it (as before)
                mp.setattr(replica_module, "steps_reaching", lambda k, *_: k)
            results.append(simulate(table(sorted(rows)), spec, horizon_s=horizon))
    _same(*results)


def test_step_log_spans_expand_to_the_rows_written_by_hand() -> None:
    log = StepLog(replica=3)
    prefill = StepShape(num_prefill_tokens=100, prefill_attn_work=5000.0, num_admitted=1)
    log.add(0.0, 0.5, prefill, 0, 1, 2, 7)  # one prefill step
    decode = StepShape(num_decode_seqs=2, decode_context_tokens=203)
    # three decode steps of two rows from 0.5 s, context 203, 205, 207; KV 7, then 7 + 1
    # (the second step opens a block), then the last row's (running, waiting, kv) after
    # the run: (1, 2, 6)
    log.add_decode_rows(0.5, [0.6, 0.7, 0.8], decode, 2, 2, 2, 7, [1, 0], (1, 2, 6))
    n = 20  # a long run kept as arrays, between the spans
    ends = 0.8 + 0.01 * np.arange(1, n + 1)
    shapes = StepShapes.decode_run(1, np.arange(300, 300 + n), np.zeros(n, dtype=np.int64))
    ones = np.ones(n, dtype=np.int64)
    log.extend(np.concatenate(([0.8], ends[:-1])), ends, shapes, ones, ones, 0 * ones,
               6 * ones)
    log.add_decode_rows(1.0, [1.1], decode, 2, 2, 0, 9, [0], (2, 1, 9))  # a run of one step
    steps = log.table()
    assert len(steps) == 25
    assert list(steps.num_prefill_tokens[:4]) == [100, 0, 0, 0]
    assert list(steps.prefill_attn_work[:4]) == [5000.0, 0.0, 0.0, 0.0]
    assert list(steps.start_s[:4]) == [0.0, 0.5, 0.6, 0.7]
    assert list(steps.end_s[:4]) == [0.5, 0.6, 0.7, 0.8]
    assert list(steps.num_decode_seqs[:4]) == [0, 2, 2, 2]
    assert list(steps.decode_context_tokens[:4]) == [0, 203, 205, 207]
    assert list(steps.num_decode_tokens[:4]) == [0, 2, 2, 2]
    assert list(steps.num_running[:4]) == [1, 2, 2, 1]
    assert list(steps.queue_len[:4]) == [2, 2, 2, 2]
    assert list(steps.kv_blocks_used[:4]) == [7, 7, 8, 6]
    assert list(steps.decode_context_tokens[4:24]) == list(range(300, 320))
    assert list(steps.end_s[4:24]) == list(ends)
    last = steps.iloc[24]
    assert (last.start_s, last.end_s, last.num_decode_seqs, last.decode_context_tokens,
            last.num_running, last.queue_len, last.kv_blocks_used) == (1.0, 1.1, 2, 203, 2, 1, 9)
    assert set(steps.replica) == {3}
