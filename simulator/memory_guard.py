"""Refusing, before any is built, a simulated point whose tables cannot fit in memory.

A point's memory grows with its requests: the request table, one ``Sequence`` per
request while it runs, the request records, and the step log (a few rows per request:
4.3 on scenarios/chat.toml at 15 req/s). Figures measured with
``benchmarks/sim_memory.py`` (CPython 3.11, x86-64, peak RSS over the process's RSS
before the run, divided by the requests):

- 200,000 requests of chat.toml (continuous, 15 req/s, 859,205 step rows) peaked at
  357 MB over the start (462 MB in all), 1.79 kB per request; 648 MB (753 MB in all),
  3.2 kB per request, before the step log was packed into arrays (470 bytes a row then,
  88 now) and built without extra copies. ``BYTES_PER_REQUEST`` rounds 1.79 kB up to
  2 kB: the estimate errs towards refusing a little early rather than dying late.
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
:func:`step_log_full`'s error instead of exhausting the machine.
"""

from __future__ import annotations

import os
from pathlib import Path

from simulator.errors import ConfigError

BYTES_PER_REQUEST = 2048
"""Peak bytes one simulated request costs, step-log rows included (measured, rounded up)."""

BYTES_PER_STEP_ROW = 3 * 88
"""Peak bytes of one step-log row: 88 packed (11 columns of 8 bytes), times 3 while the
table is built from the packed parts (parts, columns, DataFrame)."""

ROWS_PER_REQUEST = 4
"""Step-log rows per request that ``BYTES_PER_REQUEST`` covers (4.3 measured, rounded down)."""

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


def estimate_bytes(num_requests: int, simulated: int | None = None) -> int:
    """Peak bytes a point of ``num_requests`` requests takes when ``simulated`` of them
    (default: all) arrive before the horizon (see the module docstring)."""
    n = int(num_requests)
    sim = n if simulated is None else min(n, int(simulated))
    return n * TABLE_BYTES_PER_REQUEST + sim * BYTES_PER_REQUEST


def check_fits(num_requests: int | None, simulated: int | None = None, *,
               available: int | None = None, parallel: int = 1) -> None:
    """Raise ConfigError when the point would not fit in memory (before anything is built).

    ``simulated``: how many of the requests arrive before ``run.horizon_s`` (default all).
    ``available`` defaults to :func:`available_bytes`; nothing is checked when neither it
    nor ``num_requests`` is known (a trace gives its own count, read as it loads).
    ``parallel`` points running at once share it equally.
    """
    if num_requests is None:
        return
    free = available_bytes() if available is None else available
    if free is None:
        return
    free //= max(1, parallel)
    need = estimate_bytes(num_requests, simulated)
    if need <= free:
        return
    where = "this machine has" if parallel <= 1 else f"each of {parallel} points run at once has"
    fits = free // (TABLE_BYTES_PER_REQUEST + BYTES_PER_REQUEST)
    sim = num_requests if simulated is None else min(num_requests, simulated)
    raise ConfigError(
        f"workload.num_requests = {num_requests:,}: simulating {sim:,} of them needs about "
        f"{_size(need)} ({BYTES_PER_REQUEST + TABLE_BYTES_PER_REQUEST:,} bytes per request, "
        f"step log included) and {where} {_size(free)} available; lower "
        f"workload.num_requests to at most about {fits:,}, or set run.horizon_s so that fewer "
        "arrive before it")


def step_row_budget(num_requests: int | None, simulated: int | None = None, *,
                    available: int | None = None) -> int | None:
    """Step-log rows the run may write before it is stopped (None: no limit known): the
    ``ROWS_PER_REQUEST`` the request estimate already holds, plus what the memory left
    after that estimate holds at ``BYTES_PER_STEP_ROW``."""
    free = available_bytes() if available is None else available
    if free is None:
        return None
    if num_requests is None:
        return max(1, free // BYTES_PER_STEP_ROW)
    sim = num_requests if simulated is None else min(num_requests, simulated)
    spare = max(0, free - estimate_bytes(num_requests, simulated))
    return max(1, sim * ROWS_PER_REQUEST + spare // BYTES_PER_STEP_ROW)


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
