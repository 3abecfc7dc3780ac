"""The server's own request records (data contract 4): as JSON for GET /servesim/records,
and as files (``--records-out``) when the server shuts down.

The records are the engine's, in its time base (seconds since the engine started), so
they validate against the simulator exactly as ``servesim run --backend engine`` records
do, and against what a client measured (``servesim measure``) up to HTTP overhead.

Memory holds at most ``--keep-records`` requests' records (engine/server/record_keeper.py);
older ones were written to ``<records-out>/records-parts`` or dropped, and the JSON and the
summary count them (``records_kept``, ``records_spilled``, ``records_dropped``). At
shutdown :func:`write_records` merges the parts with what memory holds, so the folder
has every request's records and its summary covers them all.
"""

from __future__ import annotations

import json
import shutil
from functools import partial
from pathlib import Path
from typing import Any

import pandas as pd

from engine.server.live_api import Snapshot
from engine.server.record_spill import PARTS, part_files
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
    return _summary(snap.requests, snap.steps, snap)


def _summary(requests: pd.DataFrame, steps: pd.DataFrame, snap: Snapshot) -> dict[str, Any]:
    out = summarize(requests, steps, kv_blocks_total=snap.kv_blocks_total)
    out["num_aborted"] = int((requests["status"] == "aborted").sum())
    out["records_kept"] = len(snap.requests)  # request records in the server's memory
    out["records_spilled"] = snap.records_spilled  # left memory for --records-out
    out["records_dropped"] = snap.records_dropped  # left memory, not written anywhere
    return to_json_safe(out)


def records_note(snap: Snapshot) -> str | None:
    """What the summary leaves out, when older records left memory (``--keep-records``)."""
    if not snap.records_dropped and not snap.records_spilled:
        return None
    where = (f"{snap.records_spilled} written to --records-out" if snap.records_spilled
             else "")
    if snap.records_dropped:
        where += (", " if where else "") + f"{snap.records_dropped} dropped"
    return (f"these records and summary cover the {len(snap.requests)} requests kept in "
            f"memory (--keep-records); older ones left it: {where}")


def records_json(snap: Snapshot, tokens: bool = False) -> dict[str, Any]:
    """Requests, step log and summary as one JSON object (token times when asked)."""
    out: dict[str, Any] = {
        "records_version": RECORDS_VERSION,
        "clock_s": snap.clock_s,
        "kv_blocks_total": snap.kv_blocks_total,
        "summary": records_summary(snap),
        "note": records_note(snap),
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
    Records spilled during the run (``records-parts/``) come first, merged one part at a
    time; the summary is then computed over every request, read back from the files.
    """
    spilled = any(part_files(folder, t) for t in ("requests", "steps", "tokens"))
    requests, steps = snap.requests.copy(), snap.steps.copy()
    requests.insert(0, "point", 0)
    steps.insert(0, "point", 0)
    tokens = snap.tokens.assign(point=0)
    if not spilled:
        text = json.dumps([records_summary(snap)], indent=2) + "\n"
        return [
            atomic_write(folder / "requests.parquet", lambda p: requests.to_parquet(p)),
            atomic_write(folder / "steps.parquet", lambda p: steps.to_parquet(p)),
            atomic_write(folder / "tokens.parquet", lambda p: tokens.to_parquet(p)),
            atomic_write(folder / "summary.json", lambda p: p.write_text(text)),
        ]
    written = [atomic_write(folder / f"{name}.parquet",
                            partial(_merge, part_files(folder, name), kept))
               for name, kept in (("requests", requests), ("steps", steps),
                                  ("tokens", tokens))]
    every = pd.read_parquet(folder / "requests.parquet").drop(columns="point")
    log = pd.read_parquet(folder / "steps.parquet").drop(columns="point")
    text = json.dumps([_summary(every, log, snap)], indent=2) + "\n"
    written.append(atomic_write(folder / "summary.json", lambda p: p.write_text(text)))
    shutil.rmtree(folder / PARTS)
    return written


def _merge(parts: list[Path], kept: pd.DataFrame, path: Path) -> None:
    """Write the part files then ``kept`` (with its ``point`` column) as one Parquet file,
    one row group per piece, holding one piece in memory at a time."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    columns = list(kept.columns)
    writer: pq.ParquetWriter | None = None
    try:
        for piece in [*parts, None]:
            frame = kept if piece is None else pd.read_parquet(piece).assign(point=0)[columns]
            if frame.empty:
                continue
            table = pa.Table.from_pandas(frame, preserve_index=False)
            if writer is None:
                writer = pq.ParquetWriter(path, table.schema)
            writer.write_table(table.cast(writer.schema))
        if writer is None:
            kept.to_parquet(path)
    finally:
        if writer is not None:
            writer.close()
