"""Progress of long commands, on stderr only (stdout stays the report or ``--json``).

On a terminal a tqdm bar; otherwise (a log file, a pipe, a test) one plain line per
milestone, so a long run written to a log still shows it is alive. Bars appear only
after ``DELAY_S``: a quick run prints nothing.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TextIO

from tqdm import tqdm

DELAY_S = 2.0  # a bar shows up once a run has taken this long


def _is_tty(stream: TextIO) -> bool:
    isatty = getattr(stream, "isatty", None)
    return bool(isatty and isatty())


@contextmanager
def plan_progress(stream: TextIO | None = None) -> Iterator[Callable[[int, int, int], None]]:
    """A ``progress(points_done, candidates_done, candidates_total)`` for ``plan``.

    On a terminal: a bar over candidates with the points simulated beside it. Otherwise:
    a line each time a candidate's answer is settled.
    """
    out = stream if stream is not None else sys.stderr
    bar: tqdm | None = None
    last = [-1]

    def tell(points: int, done: int, total: int) -> None:
        nonlocal bar
        if _is_tty(out):
            if bar is None:
                bar = tqdm(total=total, desc="planning", unit="candidate", file=out,
                           leave=False, delay=DELAY_S)
            bar.n = done
            bar.set_postfix_str(f"{points} points simulated", refresh=True)
        elif done != last[0]:
            last[0] = done
            print(f"plan: {done}/{total} candidates done, {points} points simulated",
                  file=out, flush=True)

    try:
        yield tell
    finally:
        if bar is not None:
            bar.close()


@contextmanager
def request_progress(stream: TextIO | None = None) -> Iterator[Callable[[int, int], None]]:
    """A ``progress(done, total)`` for one simulated point: requests finished of the total.

    On a terminal a bar (after ``DELAY_S``); otherwise a line at each tenth of the way.
    """
    out = stream if stream is not None else sys.stderr
    bar: tqdm | None = None
    tenth = [0]

    def tell(done: int, total: int) -> None:
        nonlocal bar
        if _is_tty(out):
            if bar is None:
                bar = tqdm(total=total, desc="simulating", unit="req", file=out, leave=False,
                           delay=DELAY_S, unit_scale=True)
            bar.update(done - bar.n)
        elif total >= 100_000 and done * 10 // total > tenth[0]:
            tenth[0] = done * 10 // total
            print(f"simulating: {done:,}/{total:,} requests done", file=out, flush=True)

    try:
        yield tell
    finally:
        if bar is not None:
            bar.close()
