"""Refusing, before any is built, a simulated point whose tables cannot fit in memory.

A point's memory grows with its requests: the request table, one ``Sequence`` per
request while it runs, the request records, and, with ``[run] step_log = "full"``, the
step log (a few rows per request: 4.3 on scenarios/chat.toml at 15 req/s; "summary" and
"none" keep a bounded part of it). Figures measured with ``benchmarks/sim_memory.py``
(CPython 3.11.7, x86-64, peak RSS over the process's RSS before the run, divided by the
requests or the step rows; 2026-12-01, after the columnar request records):

- ``--case chat1m --scale 0.2``: 200,000 requests of chat.toml (continuous, 15 req/s,
  859,205 step rows). ``full``: 254 MiB over the start (360 MiB in all), 1,332 bytes per
  request; ``summary``: 119 MiB, 624 bytes; ``none``: 124 MiB, 650 bytes.
  ``BYTES_PER_REQUEST`` (full) rounds 1,332 up to 1,536 and
  ``BYTES_PER_REQUEST_NO_STEP_LOG`` (summary, none) 650 up to 768: the estimate errs
  towards refusing a little early rather than dying late. (Before the columnar records:
  357 MB, 1.79 kB per request, rounded to 2,048; before the packed step log, 3.2 kB.)
- ``--case mg1 --scale 0.1``: 20,000 requests alone (1,332,800 step rows). ``full``
  peaked 313 MiB above ``summary``: 246 bytes per step row, under ``BYTES_PER_STEP_ROW``
  (3 x 88 = 264).
- Requests beyond ``run.horizon_s`` are only drawn into the request table:
  ``TABLE_BYTES_PER_REQUEST`` (its columns and the draws that build them).

The check compares the estimate with the memory the system says is available
(``MemAvailable`` in /proc/meminfo, else ``os.sysconf``) and refuses with both figures
and what to change.

Step-log rows per request are what the estimate cannot know ahead: 4.3 at 15 req/s, but
at light load each request decodes alone and logs a row per output token (265 on
average for chat traffic). So the run also gets a budget of step rows
(:func:`step_row_budget`: the memory left after the requests, over
``BYTES_PER_STEP_ROW``), and a replica whose log outgrows it stops the run with
:func:`step_log_full`'s error instead of exhausting the machine. In "summary" mode the
rows held are the few waiting to be folded (simulator/steplog_summary.py); in "none" none.
"""

from __future__ import annotations

import os
from pathlib import Path

from simulator.errors import ConfigError
from simulator.steplog_summary import _FOLD_ROWS

BYTES_PER_REQUEST = 1536
"""Peak bytes one simulated request costs with ``step_log = "full"``, its step-log rows
included (1,332 measured, rounded up)."""

BYTES_PER_REQUEST_NO_STEP_LOG = 768
"""Peak bytes one simulated request costs with ``step_log = "summary"`` or ``"none"``
(624 and 650 measured, rounded up)."""

BYTES_PER_STEP_ROW = 3 * 88
"""Peak bytes of one step-log row: 88 packed (11 columns of 8 bytes), times 3 while the
table is built from the packed parts (parts, columns, DataFrame); 246 measured."""

ROWS_PER_REQUEST = 4
"""Step-log rows per request that ``BYTES_PER_REQUEST`` covers (4.3 measured, rounded down);
none in the other modes."""

SUMMARY_ROWS_HELD = 2 * _FOLD_ROWS
"""Step rows a "summary" log may hold at once per replica: those waiting to be folded and
one fast-forwarded run past them (its bytes are in ``BYTES_PER_REQUEST_NO_STEP_LOG``)."""

TABLE_BYTES_PER_REQUEST = 128
"""Bytes a request costs in the request table alone (8 columns of 8 bytes, and draws)."""


def available_bytes() -> int | None:
    """Memory the system can give this process now, in bytes (None if it will not say)."""
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, AttributeError):
        return None


def request_bytes(step_log: str = "full") -> int:
    """Peak bytes of one simulated request when ``[run] step_log`` is ``step_log``."""
    return BYTES_PER_REQUEST if step_log == "full" else BYTES_PER_REQUEST_NO_STEP_LOG


def estimate_bytes(num_requests: int, simulated: int | None = None,
                   step_log: str = "full") -> int:
    """Peak bytes a point of ``num_requests`` requests takes when ``simulated`` of them
    (default: all) arrive before the horizon, keeping ``step_log`` (module docstring)."""
    n = int(num_requests)
    sim = n if simulated is None else min(n, int(simulated))
    return n * TABLE_BYTES_PER_REQUEST + sim * request_bytes(step_log)


def check_fits(num_requests: int | None, simulated: int | None = None, *,
               available: int | None = None, parallel: int = 1,
               step_log: str = "full") -> None:
    """Raise ConfigError when the point would not fit in memory (before anything is built).

    ``simulated``: how many of the requests arrive before ``run.horizon_s`` (default all).
    ``available`` defaults to :func:`available_bytes`; nothing is checked when neither it
    nor ``num_requests`` is known (a trace gives its own count, read as it loads).
    ``parallel`` points running at once share it equally. ``step_log``: the point's
    ``[run] step_log`` (only "full" keeps a step log that grows with the requests).
    """
    if num_requests is None:
        return
    free = available_bytes() if available is None else available
    if free is None:
        return
    free //= max(1, parallel)
    need = estimate_bytes(num_requests, simulated, step_log)
    if need <= free:
        return
    where = "this machine has" if parallel <= 1 else f"each of {parallel} points run at once has"
    per_request = request_bytes(step_log)
    fits = free // (TABLE_BYTES_PER_REQUEST + per_request)
    sim = num_requests if simulated is None else min(num_requests, simulated)
    kept = "step log included" if step_log == "full" else f"step_log = {step_log!r}"
    hint = "" if step_log != "full" else ", or set run.step_log = 'summary' (no step rows)"
    raise ConfigError(
        f"workload.num_requests = {num_requests:,}: simulating {sim:,} of them needs about "
        f"{_size(need)} ({per_request + TABLE_BYTES_PER_REQUEST:,} bytes per request, "
        f"{kept}) and {where} {_size(free)} available; lower "
        f"workload.num_requests to at most about {fits:,}, or set run.horizon_s so that fewer "
        f"arrive before it{hint}")


def step_row_budget(num_requests: int | None, simulated: int | None = None, *,
                    available: int | None = None, step_log: str = "full",
                    replicas: int = 1) -> int | None:
    """Step-log rows the run may hold before it is stopped (None: no limit known): the
    rows the request estimate already holds (``ROWS_PER_REQUEST`` each with "full"; with
    "summary", ``SUMMARY_ROWS_HELD`` per replica, which it holds whatever the memory), plus
    what the memory left after that estimate holds at ``BYTES_PER_STEP_ROW``."""
    free = available_bytes() if available is None else available
    if free is None:
        return None
    if num_requests is None:
        return max(1, free // BYTES_PER_STEP_ROW)
    sim = num_requests if simulated is None else min(num_requests, simulated)
    spare = max(0, free - estimate_bytes(num_requests, simulated, step_log))
    held = sim * ROWS_PER_REQUEST if step_log == "full" else max(1, replicas) * SUMMARY_ROWS_HELD
    return max(1, held + spare // BYTES_PER_STEP_ROW)


def step_log_full(rows: int, now_s: float) -> ConfigError:
    """The error that stops a run whose step log reached its budget of ``rows`` rows."""
    return ConfigError(
        f"the step log reached {rows:,} rows at simulated time {now_s:,.1f} s, about "
        f"{_size(rows * BYTES_PER_STEP_ROW)} with the table to build, all the memory this "
        "machine has left for it (light load logs a step per output token); lower "
        "workload.num_requests or set run.horizon_s to stop earlier")


def _size(num_bytes: float) -> str:
    for unit in ("bytes", "KiB", "MiB", "GiB", "TiB"):
        if num_bytes < 1024 or unit == "TiB":
            return f"{num_bytes:,.0f} {unit}" if unit == "bytes" else f"{num_bytes:,.1f} {unit}"
        num_bytes /= 1024
    return f"{num_bytes:,.1f} TiB"
