"""Where results go: a safe default folder for a scenario, checked writable before any work.

A scenario's ``name`` is free text, and ``results/<name>`` with ``name = "../../x"`` would
write outside ``results/``; :func:`default_out` keeps letters, digits, ``.``, ``_`` and
``-`` and turns every other run (separators included) into one ``_``. :func:`check_writable`
is called before a command measures or simulates anything, so a read-only ``--out`` costs a
second, not the run (issue 11, item 8).
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from simulator.errors import ConfigError

RESULTS_ROOT = Path("results")
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


def safe_name(name: object, fallback: str = "scenario") -> str:
    """``name`` as one path component: no separators, no leading dots (so never ``..``)."""
    cleaned = _UNSAFE.sub("_", str(name)).strip("._-")
    return cleaned or fallback


def default_out(name: object, suffix: str = "") -> Path:
    """``results/<safe name><suffix>``: the folder a command writes to without ``--out``."""
    return RESULTS_ROOT / f"{safe_name(name)}{suffix}"


def check_writable(folder: str | os.PathLike[str], flag: str = "--out") -> Path:
    """Create ``folder`` and write then remove a probe file in it; a ConfigError naming the
    folder (and ``flag``, the option that chose it) when that fails."""
    path = Path(folder)
    probe = path / f".servesim-write-check-{os.getpid()}"
    try:
        path.mkdir(parents=True, exist_ok=True)
        probe.write_bytes(b"")
        probe.unlink()
    except OSError as e:
        reason = e.strerror or str(e)
        raise ConfigError(f"{flag} {str(path)!r}: cannot write there ({reason}); nothing was "
                          "run. Choose a folder you can write to") from e
    return path
