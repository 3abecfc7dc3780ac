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
    for i in range(3 * _MERGE_RUNS + 7):  # runs joined three times, rows packed between
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
    assert len(log._runs) == 1  # the table's columns, held once
