"""Request records and the step log (data contract 4), shared by simulator and engine.

Both the simulator and the real engine write exactly these tables, so validating one
against the other is a join on ``request_id``. Times are seconds from the start of
the run. Version: ``RECORDS_VERSION``.

Request record columns (one row per request that arrived):

=================  ======  =====================================================
column             dtype   meaning
=================  ======  =====================================================
request_id         int64   id from the request table
arrival_s          f8      when the request reached the server
scheduled_s        f8      start of the first step that worked on it (NaN if never)
first_token_s      f8      end of the step that produced its first output token (when it
                           left the API server, with ``stream_s``: token_stream.py)
finish_s           f8      end of the step that produced its last output token (likewise)
prompt_tokens      int64   prompt length
output_tokens      int64   output tokens asked for (and produced, when finished)
preemptions        int64   times its KV cache was evicted and recomputed
replica            int64   replica that served it (-1 if rejected before routing)
status             str     ``finished`` | ``rejected`` | ``in_flight`` (at the horizon) |
                           ``aborted`` (a live server's client went away)
reason             str     why it was rejected (empty otherwise)
=================  ======  =====================================================

Step log columns (one row per engine step):

======================  ======  ================================================
start_s, end_s          f8      step start and end
num_prefill_tokens      int64   P: prefill tokens, padding included
prefill_attn_work       f8      A: sum of n * (ctx + n / 2) over prefill chunks
num_decode_seqs         int64   D: decode rows, padded rows included
decode_context_tokens   int64   C: summed tokens attended by decode rows
num_decode_tokens       int64   output tokens this step emitted after a request's first
                                (the weight of this step's duration in the ITL samples)
num_running             int64   requests holding KV cache after the step
queue_len               int64   requests waiting (not yet scheduled) after the step
kv_blocks_used          int64   KV blocks in use after the step
replica                 int64   replica that ran the step
======================  ======  ================================================
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd

RECORDS_VERSION = 1

REQUEST_COLUMNS: dict[str, str] = {
    "request_id": "int64",
    "arrival_s": "float64",
    "scheduled_s": "float64",
    "first_token_s": "float64",
    "finish_s": "float64",
    "prompt_tokens": "int64",
    "output_tokens": "int64",
    "preemptions": "int64",
    "replica": "int64",
    "status": "object",
    "reason": "object",
}

STEP_COLUMNS: dict[str, str] = {
    "start_s": "float64",
    "end_s": "float64",
    "num_prefill_tokens": "int64",
    "prefill_attn_work": "float64",
    "num_decode_seqs": "int64",
    "decode_context_tokens": "int64",
    "num_decode_tokens": "int64",
    "num_running": "int64",
    "queue_len": "int64",
    "kv_blocks_used": "int64",
    "replica": "int64",
}



# Per-token times (engine runs, `servesim measure`): tokens.parquet beside the records.
TOKEN_COLUMNS: dict[str, str] = {"request_id": "int64", "token_index": "int64",
                                 "time_s": "float64"}


def token_table(times: Mapping[int, Sequence[float]]) -> pd.DataFrame:
    """One row per output token: its request, its index in the output, when it appeared."""
    rows = [(rid, i, t) for rid, ts in times.items() for i, t in enumerate(ts)]
    return pd.DataFrame(rows, columns=list(TOKEN_COLUMNS)).astype(TOKEN_COLUMNS)


def count_at(times: np.ndarray, at: np.ndarray) -> np.ndarray:
    """How many of ``times`` (NaN ignored) equal each value of ``at``: e.g. the requests
    whose ``scheduled_s`` is a step's start (admitted in it), or whose ``finish_s`` is."""
    t = np.sort(np.asarray(times, np.float64))
    t = t[np.isfinite(t)]
    return (np.searchsorted(t, at, "right") - np.searchsorted(t, at, "left")).astype(np.int64)


def empty_table(columns: dict[str, str]) -> pd.DataFrame:
    """An empty table with the given column dtypes."""
    return pd.DataFrame({c: pd.Series(dtype=t) for c, t in columns.items()})


def conform(df: pd.DataFrame, columns: dict[str, str], what: str) -> pd.DataFrame:
    """Return ``df`` with exactly ``columns`` in order and dtype; raise naming a missing one."""
    missing = [c for c in columns if c not in df.columns]
    if missing:
        raise ValueError(f"{what} table lacks columns {missing}; has {list(df.columns)}")
    out = df[list(columns)].copy()
    for c, t in columns.items():
        if t != "object":
            out[c] = out[c].astype(t)
    return out.reset_index(drop=True)


def steps_from_arrays(cols: dict[str, np.ndarray]) -> pd.DataFrame:
    """Build a step log from column arrays (all the same length).

    Arrays already of the contract's dtype are used without a further copy (a long
    run's step log is the largest thing a simulation keeps).
    """
    missing = [c for c in STEP_COLUMNS if c not in cols]
    if missing:
        raise ValueError(f"step log table lacks columns {missing}; has {list(cols)}")
    return pd.DataFrame({c: np.asarray(cols[c], dtype=t) for c, t in STEP_COLUMNS.items()},
                        copy=False)
