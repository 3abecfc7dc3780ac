"""Records written as requests leave (``RecordColumns``) equal the records built at the end."""

from __future__ import annotations

import numpy as np
import pandas as pd
from helpers import TokenCost

import simulator.record_columns as record_columns
from simulator.cluster import ClusterSpec, simulate
from simulator.policies import ContinuousPolicy, Sequence
from simulator.record_columns import RecordColumns
from simulator.records import REQUEST_COLUMNS
from simulator.served_requests import read_arrivals, request_records


def _seqs(n: int) -> list[Sequence]:
    rng = np.random.default_rng(1)
    table = pd.DataFrame({"request_id": np.arange(n) * 7, "prompt_tokens": rng.integers(1, 99, n),
                          "arrival_s": np.sort(rng.uniform(0, 10, n)),
                          "output_tokens": rng.integers(1, 9, n)})
    seqs = read_arrivals(table).seqs
    for i, s in enumerate(seqs):  # finished, refused, in flight (never scheduled or partway)
        s.replica = i % 3
        if i % 5 == 0:
            s.reason = "prompt + output over the replica's KV cache: 9 > 8 blocks"
        elif i % 5 != 1:
            s.scheduled_s, s.first_token_s, s.finish_s = s.arrival_s + 1, s.arrival_s + 2, 50.0
            s.num_computed, s.num_generated = s.prompt_tokens + s.output_tokens, s.output_tokens
            s.preemptions = i % 2
    return seqs


def test_records_written_on_leaving_equal_those_built_at_the_end(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setattr(record_columns, "_PACK_ROWS", 7)  # many packed parts
    seqs = _seqs(100)
    sent = [s.arrival_s - 0.5 for s in seqs]
    rec = RecordColumns()
    for s, t in zip(seqs, sent, strict=True):
        rec.arrive(s, t)
    order = np.random.default_rng(2).permutation(len(seqs))
    for i in order:  # leave in another order than they came; the in-flight ones stay
        if seqs[i].reason or seqs[i].num_generated == seqs[i].output_tokens:
            rec.leave(seqs[i])
    got = rec.table()
    want = request_records(seqs, sent)
    pd.testing.assert_frame_equal(got, want)
    assert set(got["status"]) == {"finished", "rejected", "in_flight"}


def test_an_empty_run_has_the_contract_columns() -> None:
    assert list(RecordColumns().table().columns) == list(REQUEST_COLUMNS)


def test_a_request_leaves_memory_when_it_finishes() -> None:
    # the recorder holds only requests in the system; finished ones are rows
    seqs = _seqs(10)
    rec = RecordColumns()
    for s in seqs:
        rec.arrive(s, s.arrival_s)
    rec.leave(seqs[0])
    assert seqs[0] not in rec._live and len(rec._live) == 9 and len(rec) == 10


def test_simulated_records_keep_arrival_order_at_a_horizon() -> None:
    rng = np.random.default_rng(4)
    n = 500
    table = pd.DataFrame({"request_id": np.arange(n)[::-1], "prompt_tokens": 16,
                          "arrival_s": np.cumsum(rng.exponential(0.01, n)),
                          "output_tokens": rng.integers(1, 300, n)})
    spec = ClusterSpec(ContinuousPolicy(max_num_seqs=8), TokenCost(0.01, 1e-5, 1e-4), 10_000,
                       num_replicas=2)
    res = simulate(table, spec, horizon_s=3.0)
    recs = res.requests
    assert recs["request_id"].tolist() == table["request_id"].tolist()[:len(recs)]
    assert {"finished", "in_flight"} <= set(recs["status"])
