"""Atomic file writes: results are written to a temporary file beside the target, then renamed.

A crash or Ctrl-C mid-write leaves either the old file or the new one, never half of one.
The file ends with the mode ``open()`` would give it (0666 less the umask), not
``mkstemp``'s private 0600: results are meant to be read by others where the umask says so.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable
from pathlib import Path


def atomic_write(path: str | os.PathLike[str], write: Callable[[Path], object]) -> Path:
    """Call ``write(tmp)`` on a temporary path in ``path``'s folder, then rename it to ``path``."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    os.close(fd)
    try:
        write(Path(tmp))
        os.chmod(tmp, 0o666 & ~_umask())
        os.replace(tmp, target)
    finally:
        Path(tmp).unlink(missing_ok=True)
    return target


def _umask() -> int:
    """The process umask: from /proc (Linux) without touching it; elsewhere by setting it
    and setting it back at once (a moment another thread could see)."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask
