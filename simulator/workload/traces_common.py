"""What every trace loader shares: the LoadedTrace result and the last steps of loading.

Each loader parses its format into plain columns (raising TraceError on a malformed
row, naming file, line and field), then calls :func:`finish`, which drops rows with
zero tokens (counted by reason), shifts arrivals so the earliest is at 0, sorts by
arrival (stable) and numbers the requests 0..n-1.

Drop reasons (keys of ``LoadedTrace.dropped``; only reasons that occurred appear):

* ``failed_request``: both token counts are 0 (BurstGPT logs failures this way), or
  the source marks the request failed (vLLM bench: a non-empty ``errors`` entry; a
  completed request with an empty completion is kept, see ``load_vllm_bench``).
* ``zero_prompt_tokens``: 0 prompt tokens but some output. A request needs at least
  one prompt token to be prefilled, and inventing one would change the trace.
* ``zero_output_tokens``: some prompt but 0 output tokens. The simulated engine
  always produces at least one token; a 0-token response is not servable as logged.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from simulator.workload.prefixes import PrefixSegments
from simulator.workload.table import validate_request_table


@dataclass(frozen=True, slots=True)
class LoadedTrace:
    """A trace turned into a request table, with what was dropped and why."""

    table: pd.DataFrame  # request table (contract 1), request_id 0..n-1 in arrival order
    source: str  # path of the file it was read from
    format: str  # loader name, one of TRACE_FORMATS
    dropped: dict[str, int] = field(default_factory=dict)  # reason -> rows dropped
    notes: list[str] = field(default_factory=list)  # facts a user should know
    segments: PrefixSegments | None = None  # prefix identity the rows' segment columns slice


def zero_token_reasons(
    prompt: np.ndarray, output: np.ndarray, failed: np.ndarray | None = None
) -> tuple[np.ndarray, dict[str, int]]:
    """Return (keep mask, dropped counts by reason) for rows with zero tokens."""
    failed = (prompt == 0) & (output == 0) if failed is None else failed
    reasons = {
        "failed_request": failed,
        "zero_prompt_tokens": (prompt == 0) & ~failed,
        "zero_output_tokens": (output == 0) & ~failed & (prompt != 0),
    }
    keep = np.ones(prompt.size, dtype=bool)
    dropped: dict[str, int] = {}
    for reason, mask in reasons.items():
        keep &= ~mask
        if mask.any():
            dropped[reason] = int(mask.sum())
    return keep, dropped


def finish(
    columns: dict[str, np.ndarray],
    path: str,
    fmt: str,
    failed: np.ndarray | None = None,
    notes: list[str] | None = None,
    extra: Callable[[np.ndarray, np.ndarray], dict[str, np.ndarray]] | None = None,
) -> LoadedTrace:
    """Drop zero-token rows, shift arrivals to start at 0, sort, renumber, validate.

    ``columns`` holds ``arrival_s`` (seconds, any origin, or all NaN) and the token
    columns for the rows as they appear in the file, plus any optional contract
    columns. ``failed`` marks rows the source itself reports as failed. ``extra``,
    if given, is called with the original row positions in final order and the final
    prompt lengths, and returns more columns (Mooncake's prefix groups need the order).
    """
    notes = list(notes or [])
    keep, dropped = zero_token_reasons(columns["prompt_tokens"], columns["output_tokens"], failed)
    for reason, count in dropped.items():
        notes.append(f"dropped {count} row(s): {reason.replace('_', ' ')}")
    df = pd.DataFrame({k: v[keep] for k, v in columns.items()})
    df["_row"] = np.flatnonzero(keep)
    arrival = df["arrival_s"].to_numpy(dtype=np.float64)
    if arrival.size and not np.isnan(arrival).all():
        origin = float(arrival.min())
        if origin != 0.0:
            notes.append(
                f"arrival_s counts from the earliest request, at {origin:g} s in the file's clock"
            )
        df["arrival_s"] = arrival - origin
        if (np.diff(arrival) < 0).any():
            notes.append("rows were not in arrival order; sorted by arrival (stable)")
            df = df.sort_values("arrival_s", kind="stable")
    df = df.reset_index(drop=True)
    rows = df.pop("_row").to_numpy()
    if extra is not None:
        for name, values in extra(rows, df["prompt_tokens"].to_numpy()).items():
            df[name] = values
    df.insert(0, "request_id", np.arange(len(df), dtype=np.int64))
    table = validate_request_table(df, path)
    return LoadedTrace(table=table, source=path, format=fmt, dropped=dropped, notes=notes)
