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
