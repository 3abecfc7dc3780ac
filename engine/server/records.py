"""The server's own request records (data contract 4): as JSON for GET /servesim/records,
and as files (``--records-out``) when the server shuts down.

The records are the engine's, in its time base (seconds since the engine started), so
they validate against the simulator exactly as ``servesim run --backend engine`` records
do, and against what a client measured (``servesim measure``) up to HTTP overhead.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pandas as pd

from engine.server.live_api import Snapshot
from simulator.atomic import atomic_write
from simulator.metrics import summarize, to_json_safe
from simulator.records import RECORDS_VERSION


def mark_aborted(requests: pd.DataFrame, aborted: set[int]) -> pd.DataFrame:
    """Status ``aborted`` for the requests whose client left (a padded batch's row may have
    run to its end regardless: it is still not a success)."""
    if not aborted or requests.empty:
        return requests
    hit = requests["request_id"].isin(aborted).to_numpy()
    requests.loc[hit, "status"] = "aborted"
    empty = hit & (requests["reason"] == "").to_numpy()
    requests.loc[empty, "reason"] = "aborted: the client went away"
    return requests


def records_summary(snap: Snapshot) -> dict[str, Any]:
    """The summary (contract 5) of the server's records so far, plus ``num_aborted``
    (requests whose client went away; they count as neither finished nor rejected)."""
    out = summarize(snap.requests, snap.steps, kv_blocks_total=snap.kv_blocks_total)
    out["num_aborted"] = int((snap.requests["status"] == "aborted").sum())
    return to_json_safe(out)


def records_json(snap: Snapshot, tokens: bool = False) -> dict[str, Any]:
    """Requests, step log and summary as one JSON object (token times when asked)."""
    out: dict[str, Any] = {
        "records_version": RECORDS_VERSION,
        "clock_s": snap.clock_s,
        "kv_blocks_total": snap.kv_blocks_total,
        "summary": records_summary(snap),
        "requests": to_json_safe(snap.requests.to_dict(orient="records")),
        "steps": to_json_safe(snap.steps.to_dict(orient="records")),
    }
    if tokens:
        out["tokens"] = to_json_safe(snap.tokens.to_dict(orient="records"))
    return out


def write_records(snap: Snapshot, folder: Path) -> list[Path]:
    """requests.parquet, steps.parquet, tokens.parquet and summary.json, atomically.

    The layout of ``servesim run`` results (one point: ``summary.json`` is a list of one,
    the tables have a ``point`` column of 0), so ``servesim validate --measured`` reads it.
    """
    text = json.dumps([records_summary(snap)], indent=2) + "\n"
    requests, steps = snap.requests.copy(), snap.steps.copy()
    requests.insert(0, "point", 0)
    steps.insert(0, "point", 0)
    tokens = snap.tokens.assign(point=0)
    return [
        atomic_write(folder / "requests.parquet", lambda p: requests.to_parquet(p)),
        atomic_write(folder / "steps.parquet", lambda p: steps.to_parquet(p)),
        atomic_write(folder / "tokens.parquet", lambda p: tokens.to_parquet(p)),
        atomic_write(folder / "summary.json", lambda p: p.write_text(text)),
    ]
