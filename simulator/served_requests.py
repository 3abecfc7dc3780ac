"""A request table read for serving, and served sequences back as request records.

:func:`read_arrivals` turns a request table (contract 1) into the sequences the simulator
and the engine both serve (open or closed loop); :func:`request_records` turns served
sequences into request records (contract 4). simulator/cluster.py and engine/serving.py
share both, so the two serve and report the same requests the same way.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from simulator.policies import Sequence
from simulator.records import REQUEST_COLUMNS, conform, empty_table

STATUS = np.array(["finished", "in_flight", "rejected"], dtype=object)  # by status code


def status_codes(reason: np.ndarray, generated: np.ndarray, output: np.ndarray) -> np.ndarray:
    """Each request's index into :data:`STATUS`: rejected when it has a reason, finished
    when it generated all its output, else in flight."""
    return np.where(reason != "", 2, np.where(generated == output, 0, 1))


@dataclass(slots=True)
class Arrivals:
    """A request table (contract 1) read for serving: what the simulator and the engine
    both start from."""

    seqs: list[Sequence]  # in arrival order (a stable sort, so ties keep table order)
    think_s: list[float]  # per sequence: a closed-loop client's pause before sending it
    closed: bool  # closed loop: arrival_s all NaN, clients send after their last request


def read_arrivals(requests: pd.DataFrame) -> Arrivals:
    """The table's requests as sequences, open or closed loop (see :class:`Arrivals`)."""
    table = requests.sort_values("arrival_s", kind="stable") if len(requests) else requests
    n = len(table)
    arr = table["arrival_s"].to_numpy(np.float64)
    closed = n > 0 and bool(np.isnan(arr).all())
    if closed and "client_id" not in table:
        raise ValueError("closed-loop request table (arrival_s all NaN) needs a client_id column")
    ids = table["request_id"].to_numpy(np.int64).tolist()
    p = table["prompt_tokens"].to_numpy(np.int64).tolist()
    o = table["output_tokens"].to_numpy(np.int64).tolist()
    c = table["client_id"].to_numpy(np.int64).tolist() if "client_id" in table else [-1] * n
    think = table["think_s"].to_numpy(np.float64).tolist() if "think_s" in table else [0.0] * n
    seqs = [Sequence(i, a, pp, oo, cc)
            for i, a, pp, oo, cc in zip(ids, arr.tolist(), p, o, c, strict=True)]
    if "priority_class" in table:  # priority classes (workload/classes.py)
        for seq, k in zip(seqs, table["priority_class"].to_numpy(np.int64).tolist(),
                          strict=True):
            seq.priority = k
    return Arrivals(seqs, think, closed)


def request_records(seqs: list[Sequence], sent_s: list[float] | None = None) -> pd.DataFrame:
    """Request records (contract 4) of ``seqs``: every request that arrived, with its status.

    ``sent_s``, when given, is each request's arrival time as its client saw it (the
    records' ``arrival_s``), where the sequences hold when the engine first saw it.
    """
    if not seqs:
        return empty_table(REQUEST_COLUMNS)
    n = len(seqs)

    def column(values: Any, dtype: type) -> np.ndarray:
        return np.fromiter(values, dtype=dtype, count=n)

    generated = column((s.num_generated for s in seqs), np.int64)
    output = column((s.output_tokens for s in seqs), np.int64)
    reason = np.array([s.reason for s in seqs], dtype=object)
    status = STATUS[status_codes(reason, generated, output)]
    arrival = (np.asarray(sent_s, dtype=np.float64) if sent_s is not None
               else column((s.arrival_s for s in seqs), np.float64))
    cols = {
        "request_id": column((s.request_id for s in seqs), np.int64),
        "arrival_s": arrival,
        "scheduled_s": column((s.scheduled_s for s in seqs), np.float64),
        "first_token_s": column((s.first_token_s for s in seqs), np.float64),
        "finish_s": column((s.finish_s for s in seqs), np.float64),
        "prompt_tokens": column((s.prompt_tokens for s in seqs), np.int64),
        "output_tokens": output,
        "preemptions": column((s.preemptions for s in seqs), np.int64),
        "replica": column((s.replica for s in seqs), np.int64),
        "status": status,
        "reason": reason,
    }
    return conform(pd.DataFrame(cols), REQUEST_COLUMNS, "request records")
