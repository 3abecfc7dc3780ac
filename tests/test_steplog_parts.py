"""The full step log's parts (packed rows, joined runs) give back every row in order."""

from __future__ import annotations

import numpy as np
import pandas as pd

from simulator.records import STEP_COLUMNS
from simulator.shapes import StepShape, StepShapes
from simulator.steplog import _MERGE_RUNS, StepLog


def test_rows_and_many_runs_come_back_in_order() -> None:
    rng = np.random.default_rng(3)
    log, want = StepLog(2), []
    t = 0.0
    for i in range(3 * _MERGE_RUNS + 7):  # runs packed three times, rows packed between
        k = int(rng.integers(1, 40))
        if i % 3 == 0:  # single steps
            for _ in range(k):
                shape = StepShape(num_prefill_tokens=i, num_decode_seqs=k)
                log.add(t, t + 0.5, shape, k, i, 1, 7)
                want.append((t, t + 0.5, i, 0.0, k, 0, k, i, 1, 7))
                t += 0.5
            continue
        starts = t + np.arange(k, dtype=float)
        d = np.full(k, i, np.int64)
        shapes = StepShapes(num_prefill_tokens=np.zeros(k, np.int64),
                            prefill_attn_work=np.zeros(k), num_decode_seqs=d,
                            decode_context_tokens=d * 3, num_admitted=d * 0,
                            num_finished=d * 0)
        log.extend(starts, starts + 1, shapes, d, d, d, d)
        want += [(s, s + 1, 0, 0.0, i, 3 * i, i, i, i, i) for s in starts.tolist()]
        t += k
    got = log.table()
    cols = [c for c in STEP_COLUMNS if c != "replica"]
    expect = pd.DataFrame(want, columns=cols).astype({c: STEP_COLUMNS[c] for c in cols})
    expect["replica"] = np.int64(2)
    pd.testing.assert_frame_equal(got, expect, check_dtype=False)
    pd.testing.assert_frame_equal(log.table(), got)  # a second call gives the same
    assert len(log._pieces) == 1  # the table's columns, held once


def test_packed_values_come_back_bit_for_bit() -> None:
    # spans are packed by struct, not np.fromiter: integers past 2**53 (where a float64
    # would round) and floats with every mantissa bit set must come back unchanged
    big, t0, t1 = 2**53 + 1, 0.1 + 0.2, 1.0 / 3.0
    log = StepLog(0)
    log.add(t0, t1, StepShape(num_prefill_tokens=big, prefill_attn_work=t1,
                              num_decode_seqs=3, decode_context_tokens=big + 2),
            3, 5, 6, big + 4)
    log.add_decode_rows(t1, [t1 + 1.0, t1 + 2.0], StepShape(num_decode_seqs=2,
                                                             decode_context_tokens=big),
                        2, 4, 1, big, [2], (3, 0, 9))
    got = log.table()
    assert got["num_prefill_tokens"].tolist() == [big, 0, 0]
    assert got["decode_context_tokens"].tolist() == [big + 2, big, big + 2]  # + 2 a row
    assert got["kv_blocks_used"].tolist() == [big + 4, big, 9]
    assert got["start_s"].tolist() == [t0, t1, t1 + 1.0]
    assert got["end_s"].tolist() == [t1, t1 + 1.0, t1 + 2.0]
    assert got["prefill_attn_work"].tolist() == [t1, 0.0, 0.0]
    assert got["num_running"].tolist() == [5, 4, 3]  # a run's last row logs ``last``
    assert got["queue_len"].tolist() == [6, 1, 0]


def test_a_runs_kv_blocks_follow_its_block_openings() -> None:
    # a run of six steps from 10 blocks whose later steps open 1, 0, 2, 1, 0, ... blocks
    # (kvcache.used_after_steps([1, 0, 2], 4, 10) == [10, 11, 11, 13, 14]); the last row
    # logs the blocks once the run was applied (two finished: 9); a run of one row and a
    # run whose cohort opens nothing around it
    log = StepLog(0)
    decode = StepShape(num_decode_seqs=3, decode_context_tokens=30)
    log.add_decode_rows(0.0, [1.0, 2.0, 3.0, 4.0, 5.0, 6.0], decode, 3, 3, 0, 10, [1, 0, 2],
                        (1, 0, 9))
    log.add_decode_rows(6.0, [7.0], decode, 3, 3, 0, 9, [5, 5, 5], (3, 0, 12))
    log.add_decode_rows(7.0, [8.0, 9.0, 10.0], decode, 3, 3, 0, 12, [], (3, 0, 12))
    log.add(10.0, 11.0, decode, 3, 3, 0, 4)
    # runs shorter than their cycle of openings (only the openings they read are kept)
    # and one step longer: 20, 21, 23, 27 from 20 with openings 1, 2, 4, 8
    log.add_decode_rows(11.0, [12.0, 13.0, 14.0], decode, 3, 3, 0, 20, [1, 2, 4, 8], (3, 0, 5))
    log.add_decode_rows(14.0, [15.0, 16.0, 17.0, 18.0, 19.0], decode, 3, 3, 0, 20,
                        [1, 2, 4, 8], (3, 0, 6))
    assert log.table()["kv_blocks_used"].tolist() == [10, 11, 11, 13, 14, 9, 12, 12, 12, 12, 4,
                                                      20, 21, 5, 20, 21, 23, 27, 6]
