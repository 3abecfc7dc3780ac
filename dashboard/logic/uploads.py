"""Uploaded files: size limits and saving to disk under their own name.

Trace loaders detect a format from the file name and read from a path, so an upload is
written to ``<folder>/<sha256 prefix>/<name>``: the same bytes give the same path, which
keeps the scenario dict (and so the run cache key) stable across reruns.
"""

from __future__ import annotations

import hashlib
import re
import tempfile
from pathlib import Path

MAX_UPLOAD_BYTES = 50 * 2**20  # 50 MiB: larger uploads are refused with a message
UPLOAD_DIR = Path(tempfile.gettempdir()) / "servesim-dashboard-uploads"


class UploadError(ValueError):
    """An upload that cannot be used; the message names the file and the problem."""


def check_size(name: str, size_bytes: int, limit_bytes: int = MAX_UPLOAD_BYTES) -> None:
    """Raise UploadError when ``size_bytes`` exceeds ``limit_bytes``."""
    if size_bytes > limit_bytes:
        raise UploadError(
            f"{name}: {size_bytes / 2**20:.1f} MiB is over the {limit_bytes / 2**20:.0f} MiB "
            "upload limit; trim the file (e.g. the first rows of a trace)"
        )


def safe_name(name: str) -> str:
    """The file name without folders or odd characters (``../x y.csv`` -> ``x_y.csv``)."""
    base = Path(name).name or "upload"
    return re.sub(r"[^A-Za-z0-9._-]", "_", base)


def save_upload(name: str, data: bytes, folder: Path = UPLOAD_DIR) -> Path:
    """Write ``data`` under a content-addressed folder, keeping the name; return the path."""
    check_size(name, len(data))
    digest = hashlib.sha256(data).hexdigest()[:16]
    path = folder / digest / safe_name(name)
    if not path.is_file():
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(path.suffix + ".part")
        tmp.write_bytes(data)
        tmp.replace(path)
    return path
