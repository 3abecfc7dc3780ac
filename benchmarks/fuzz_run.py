"""One ``servesim`` command run in this process for the fuzz scripts (cli_fuzz.py,
file_fuzz.py): its outcome (``exit N``, ``timeout`` or ``crash``) and what it said last
(the error line, or the traceback of a crash), and the error line with its numbers,
quoted values and paths blanked, for counting error kinds."""

from __future__ import annotations

import contextlib
import io
import re
import signal
import traceback
from collections import Counter
from typing import Any

from servesim.cli import main as servesim_main

TIMEOUT_S = 90  # a run past this is a hang to report


class _Timeout(Exception):
    """A run went past its time."""


def _alarm(*_: Any) -> None:
    raise _Timeout


def run_cli(argv: list[str], timeout_s: int = TIMEOUT_S) -> tuple[str, str]:
    """(outcome, last stderr line or a crash's traceback) of ``servesim argv``."""
    err, sink = io.StringIO(), io.StringIO()
    previous = signal.signal(signal.SIGALRM, _alarm)
    signal.alarm(timeout_s)
    try:
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(sink):
            rc = servesim_main(argv)
        outcome = f"exit {rc}"
    except _Timeout:
        return "timeout", ""
    except SystemExit as e:
        outcome = f"exit {e.code}"
    except BaseException:  # noqa: BLE001 - a crash is what the fuzz looks for
        return "crash", traceback.format_exc()
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)
    lines = err.getvalue().replace("\r", "\n").strip().splitlines()
    return outcome, lines[-1] if lines else ""


def error_kind(line: str) -> str:
    """``line`` with numbers, quoted values and file paths blanked (for counting kinds)."""
    line = re.sub(r"(?:/[\w.+-]+)+\.\w+|\S+\.toml", "<file>", line)
    return re.sub(r"-?\d[\d.]*(?:e[-+]?\d+)?|'[^']*'", "#", line)[:120]


def report(runs: int, seed: int, outcomes: Counter[str], bad: list[str],
           errors: Counter[str], show_errors: bool) -> int:
    """Print the crash and timeout lines, the error kinds if asked, then the counts; the
    exit status (1 if any run crashed or hung)."""
    for line in bad:
        print(line)
    if show_errors:
        for kind, n in errors.most_common():
            print(f"{n:5d}  {kind}")
    print(f"{runs} runs (seed {seed}): " + ", ".join(
        f"{k} {v}" for k, v in sorted(outcomes.items())))
    return 1 if bad else 0
