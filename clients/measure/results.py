"""A measured run as tables: request records (contract 4), token times, summary (contract 5).

Request records, as the client sees them (client clock, seconds from the start):

- ``arrival_s``: just before the request was sent; ``first_token_s``: first streamed
  chunk; ``finish_s``: last streamed chunk (the last token, as the engine's records
  define it; the usage chunk and ``[DONE]`` follow at once).
- ``scheduled_s`` is NaN and ``preemptions`` 0: a client cannot see them (so the queue
  figures of the summary are null).
- ``status`` is ``finished`` or ``rejected`` with the ``reason`` (HTTP error, refused
  connection, timeout, broken stream, short answer); ``replica`` is 0, or -1 for a
  request that did not finish.

The summary is :func:`simulator.metrics.summarize` over those records, except ITL, which
comes from the gaps between consecutive chunks of finished requests (vLLM's client-side
definition; the step log it is otherwise computed from is the server's), and
``utilisation``, which a client cannot know (null).
"""

from __future__ import annotations

import json
import math
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from clients.measure.client import Outcome
from clients.measure.workload import MeasureWorkload
from simulator.atomic import atomic_write
from simulator.metrics import summarize, to_json_safe
from simulator.metrics_stats import describe
from simulator.records import REQUEST_COLUMNS, STEP_COLUMNS, conform, empty_table, token_table
from simulator.results_manifest import ENDPOINT, begin_writing, seal_results

if TYPE_CHECKING:
    from clients.measure.loops import LoopConfig

PERCENTILES = (50, 90, 99)


@dataclass(slots=True)
class MeasureRun:
    """Everything one measurement saw."""

    outcomes: list[Outcome]  # one per request, in request order
    workload: MeasureWorkload
    mode: str  # open or closed loop, in words
    endpoint: str  # API base URL
    model: str
    config: LoopConfig
    wall_s: float  # from the first send to the last answer
    fingerprint: dict[str, Any] | None = None  # the server's machine, if it said

    def records(self) -> pd.DataFrame:
        """Request records (contract 4) of every request sent."""
        if not self.outcomes:
            return empty_table(REQUEST_COLUMNS)
        rows = []
        for o in self.outcomes:
            first = o.token_times[0] if o.token_times else math.nan
            last = o.token_times[-1] if o.finished else math.nan
            rows.append({
                "request_id": o.request_id, "arrival_s": o.arrival_s, "scheduled_s": math.nan,
                "first_token_s": first, "finish_s": last, "prompt_tokens": o.prompt_tokens,
                "output_tokens": o.output_tokens, "preemptions": 0,
                "replica": 0 if o.finished else -1,
                "status": "finished" if o.finished else "rejected", "reason": o.reason})
        return conform(pd.DataFrame(rows), REQUEST_COLUMNS, "request records")

    def tokens(self) -> pd.DataFrame:
        """request_id, token_index, time_s: one row per streamed chunk received."""
        return token_table({o.request_id: o.token_times for o in self.outcomes})

    def summary(self) -> dict[str, Any]:
        """Summary JSON (contract 5) with what was measured and how."""
        records = self.records()
        out = summarize(records, empty_table(STEP_COLUMNS), percentiles=PERCENTILES)
        gaps = [np.diff(o.token_times) for o in self.outcomes if o.finished]
        itl_ms = np.concatenate(gaps) * 1000.0 if gaps else np.array([])
        for stat, value in describe(itl_ms, PERCENTILES).items():
            out[f"{stat}_itl_ms"] = value
        for key in [k for k in out if k.endswith("_queue_ms")]:
            out[key] = None  # not visible to a client
        out["utilisation"] = None
        reasons = Counter(o.reason for o in self.outcomes if o.reason)
        cfg = self.config
        meta = {
            "endpoint": self.endpoint, "model": self.model, "workload": self.workload.source,
            "mode": self.mode, "num_requests": len(self.outcomes),
            "timeout_s": cfg.timeout_s, "max_concurrency": cfg.max_concurrency,
            "prompt_format": cfg.prompt_format, "wall_s": self.wall_s,
            "itl_source": "client: gaps between streamed chunks of finished requests",
            "rejection_reasons": dict(reasons.most_common(20)),
            "workload_notes": self.workload.notes,
        }
        if self.fingerprint is not None:
            meta["fingerprint"] = self.fingerprint  # validate --measured checks profiles
        return to_json_safe({**out, **meta})


def write_run(run: MeasureRun, out_dir: str | Path) -> list[Path]:
    """requests.parquet, tokens.parquet and summary.json in ``out_dir``, each atomically,
    then ``manifest.json`` (kind ``endpoint-measured``, the endpoint, the server's machine
    fingerprint when it said; simulator/results_manifest.py). Result files of another
    run that this one does not write (a simulation's ``steps.parquet``) are removed.

    The layout of ``servesim run`` results (a one-point run: ``summary.json`` holds a list
    of one summary, the tables a ``point`` column of 0), so ``servesim validate --measured
    DIR`` and the dashboard read a measurement like a simulated or engine run. The caller
    checks the folder first (``prepare_results``), before sending anything.
    """
    out = Path(out_dir)
    records = run.records()
    records.insert(0, "point", 0)
    tokens = run.tokens().assign(point=0)
    text = json.dumps([run.summary()], indent=2, allow_nan=False) + "\n"
    out.mkdir(parents=True, exist_ok=True)
    begin_writing(out)
    paths = [
        atomic_write(out / "requests.parquet", lambda p: records.to_parquet(p)),
        atomic_write(out / "tokens.parquet", lambda p: tokens.to_parquet(p)),
        atomic_write(out / "summary.json", lambda p: p.write_text(text)),
    ]
    source = run.workload.source
    seal_results(out, ENDPOINT, paths, machine=run.fingerprint, endpoint=run.endpoint,
                 scenario=Path(source).stem, scenario_file=source, points=1)
    return paths
