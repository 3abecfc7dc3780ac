"""ITL across prefill-only steps (simulator/itl_gaps.py), on timelines worked by hand.

A request decoding when a prefill-only step runs waits through it: its next token's gap
is the time since its previous token, as a streaming client measures it.
"""

from __future__ import annotations

import numpy as np
import pytest
from helpers import TokenCost, table

from simulator.cluster import ClusterSpec, simulate
from simulator.itl_gaps import itl_gaps
from simulator.metrics import itl_samples, summarize, weighted_percentile
from simulator.policies import ContinuousPolicy


def _gaps(rows: list[tuple[float, float, int, int]], last=None):  # noqa: ANN001, ANN202
    start, end, tokens, running = (np.array(c) for c in zip(*rows, strict=True))
    values, weights, after = itl_gaps(start, end, tokens, running, last)
    return np.round(values, 9).tolist(), weights.tolist(), after


def test_decoders_wait_through_a_prefill_step() -> None:
    # ms: prefill [0, 10); 2 decoders [10, 30); a 60 ms prefill [30, 90) adds a third
    # request; 3 tokens [90, 110): the two decoders' gap is 110 - 30 = 80 ms, the new
    # request's 20 ms (its first token came at 90)
    rows = [(0.0, 10.0, 0, 2), (10.0, 30.0, 2, 2), (30.0, 90.0, 0, 3), (90.0, 110.0, 3, 3)]
    values, weights, after = _gaps([(s / 1e3, e / 1e3, d, r) for s, e, d, r in rows])
    assert values == [20.0, 20.0, 80.0] and weights == [2, 1, 2]
    assert after == (0.11, 3, 3)


def test_back_to_back_steps_keep_their_durations() -> None:
    rows = [(0.0, 0.02, 4, 4), (0.02, 0.05, 4, 3), (0.05, 0.06, 3, 3)]
    values, weights, _ = _gaps(rows)
    assert values == [20.0, 30.0, 10.0] and weights == [4, 4, 3]


def test_nothing_is_carried_across_idle_time_or_by_finished_requests() -> None:
    # the one decoder finishes at 0.02 (0 running after it); a new request arrives at 1.0,
    # prefills [1.0, 1.01), decodes [1.01, 1.02): 10 ms, not 1 s
    values, weights, _ = _gaps([(0.0, 0.01, 0, 1), (0.01, 0.02, 1, 0), (1.0, 1.01, 0, 1),
                                (1.01, 1.02, 1, 1)])
    assert values == [10.0, 10.0] and weights == [1, 1]
    # one of two decoders finished: one token carried, the newcomer's keeps 10 ms
    values, weights, _ = _gaps([(0.0, 0.01, 2, 1), (0.01, 0.03, 0, 2), (0.03, 0.04, 2, 2)])
    assert values == [10.0, 10.0, 30.0] and weights == [2, 1, 1]


def test_the_last_emitting_step_carries_over_calls() -> None:
    rows = [(0.0, 0.01, 0, 2), (0.01, 0.02, 2, 2), (0.02, 0.05, 0, 3), (0.05, 0.06, 3, 3)]
    whole = _gaps(rows)
    first = _gaps(rows[:2])
    second = _gaps(rows[2:], first[2])
    assert (first[0] + second[0], first[1] + second[1]) == whole[:2] == (
        [10.0, 10.0, 40.0], [2, 1, 2])


def test_itl_samples_are_each_tokens_gap_on_a_simulated_timeline() -> None:
    # vLLM V0's default: a step prefills or decodes. 10 ms a step. r0 (4 + 4) at 0, r1
    # (4 + 2) at .015. 0-.01 prefill r0; .01-.02 r0's token 2; .02-.03 prefill r1 (r0
    # waits); .03-.04 r0's token 3 (20 ms after its token 2), r1's token 2 (done);
    # .04-.05 r0's token 4. Gaps: r0 10, 20, 10 ms; r1 10 ms.
    spec = ClusterSpec(ContinuousPolicy(), TokenCost(step_s=0.01), kv_blocks=100,
                       block_size=4, check_invariants=True)
    res = simulate(table([(0.0, 4, 4), (0.015, 4, 2)]), spec)
    values, weights = itl_samples(res.steps)
    assert sorted(zip(np.round(values, 9).tolist(), weights.tolist(), strict=True)) == [
        (10.0, 1), (10.0, 1), (10.0, 1), (20.0, 1)]
    assert weighted_percentile(values, weights, 100) == pytest.approx(20.0)
    # the pooled mean ITL is every request's (finish - first token) over its gaps
    req = res.requests
    pooled = 1000 * (req.finish_s - req.first_token_s).sum() / (req.output_tokens - 1).sum()
    assert summarize(req, res.steps)["mean_itl_ms"] == pytest.approx(pooled) == 12.5


def test_the_summary_log_counts_the_same_gaps_as_the_table() -> None:
    # one replica's steps fed as single steps, a decode run and arrays (one with a step that
    # emits nothing, one a decode run after a prefill): the summary log's ITL histogram
    # holds the samples itl_gaps gives over the same rows, in order
    from simulator.shapes import StepShape
    from simulator.steplog_summary import SummaryStepLog

    log = SummaryStepLog(0)
    shape = StepShape()
    rows: list[tuple[float, float, int, int]] = []

    def single(start: float, end: float, tokens: int, running: int) -> None:
        log.add(start, end, shape, tokens, running, 0, 1)
        rows.append((start, end, tokens, running))

    def arrays(part: list[tuple[float, float, int, int]]) -> None:
        start, end, tokens, running = (np.array(c) for c in zip(*part, strict=True))
        log.extend(start, end, None, tokens.astype(np.int64), running.astype(np.int64),  # type: ignore[arg-type]
                   np.zeros(len(part), np.int64), np.ones(len(part), np.int64))
        rows.extend(part)

    single(0.00, 0.01, 0, 2)  # prefill
    single(0.01, 0.02, 2, 2)
    log.add_decode_rows(0.05, [0.06, 0.07, 0.08], shape, 2, 2, 0, 1, [], (2, 0, 1))
    rows.extend([(0.05, 0.06, 2, 2), (0.06, 0.07, 2, 2), (0.07, 0.08, 2, 2)])
    arrays([(0.08, 0.10, 0, 3), (0.10, 0.11, 3, 3), (0.11, 0.12, 3, 3)])  # not all emit
    single(0.12, 0.15, 0, 4)  # prefill
    arrays([(0.15, 0.16, 4, 4), (0.16, 0.17, 4, 3)])  # a decode run
    itl = log.stats().itl
    assert itl is not None
    start, end, tokens, running = (np.array(c) for c in zip(*rows, strict=True))
    values, weights, _ = itl_gaps(start, end, tokens, running)
    # gaps: .02 -> .06 (both tokens, 40 ms), .08 -> .11 (2 of 3, 30 ms), .12 -> .16 (3 of 4,
    # 40 ms); every other token its step's 10 ms
    assert sorted(zip(np.round(values, 9).tolist(), weights.tolist(), strict=True)) == [
        (10.0, 1), (10.0, 1), (10.0, 2), (10.0, 2), (10.0, 2), (10.0, 3), (10.0, 4),
        (30.0, 2), (40.0, 2), (40.0, 3)]
    assert itl.weight == int(weights.sum()) == 22
    assert itl.mean_ms == pytest.approx(np.average(values, weights=weights), rel=1e-12)
    assert itl.hi_ms.max() == pytest.approx(40.0)
