"""The files a scenario point reads, by content: what keys a cached point besides its dict.

A point names files by path (``cost.profile``, ``workload.trace``, a trace-based length
distribution's ``path``, ``model.name`` when it is a ``config.json`` or a folder holding
one), so a key on the dict alone serves a stale result after the file changes (issue 11:
a profile's coefficients tripled, the cached 1,733 ms mean E2E came back instead of 6,041
ms). :func:`input_hashes` walks the point for strings naming an existing file or folder,
tried from the current folder and from the point's ``_base_dir`` (the scenario's folder:
each field resolves from one of the two), and hashes each file's size and bytes. It does
not know the scenario's schema, so a field added later is covered without a change here;
a string that names a file the simulator does not read only makes the key stricter.

The profile a point resolves to without naming one (a shipped profile, or one in the
per-user cache) is covered by :func:`simulator.point_cache.code_version` and
:func:`cached_profile_hashes`.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

# (path, size, mtime_ns) -> digest, kept by one caller for one batch of points
HashMemo = dict[tuple[str, int, int], str]
MAX_NAME = 4096  # longer strings are not paths (an inline prompt, say)


def file_digest(path: Path, memo: HashMemo) -> str:
    """SHA-256 (16 hex digits) of the file's size and bytes; reused while its stat holds."""
    st = path.stat()
    stamp = (str(path), st.st_size, st.st_mtime_ns)
    if stamp not in memo:
        h = hashlib.sha256(str(st.st_size).encode() + b"\0")
        with path.open("rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                h.update(block)
        memo[stamp] = h.hexdigest()[:16]
    return memo[stamp]


def _strings(value: Any, where: str = "", base: str | None = None
             ) -> Iterator[tuple[str, str, str | None]]:
    """(field path, string, scenario folder) for every string in a nested point, private
    keys left out; the folder is the nearest enclosing ``_base_dir`` (a point may sit
    inside a caller's record, such as a sweep's ``{"labels", "point"}``)."""
    if isinstance(value, str):
        yield where, value, base
    elif isinstance(value, dict):
        own = value.get("_base_dir")
        base = own if isinstance(own, str) else base
        for k, v in value.items():
            if not str(k).startswith("_"):
                yield from _strings(v, f"{where}.{k}" if where else str(k), base)
    elif isinstance(value, list | tuple):
        for i, v in enumerate(value):
            yield from _strings(v, f"{where}[{i}]", base)


def _files(path: Path) -> list[Path]:
    """The files a named path stands for: itself, or a model folder's ``config.json``
    (never a folder's weights: the simulator reads only the config)."""
    if path.is_file():
        return [path]
    config = path / "config.json"
    return [config] if path.is_dir() and config.is_file() else []


def input_hashes(point: dict[str, Any], memo: HashMemo | None = None) -> dict[str, str]:
    """``{"<field>@<resolved path>": digest}`` for every file the point's strings name."""
    memo = {} if memo is None else memo
    out: dict[str, str] = {}
    for where, text, base in _strings(point):
        if not text or len(text) > MAX_NAME or "\0" in text:
            continue
        raw = Path(text).expanduser()
        tries = [raw] if raw.is_absolute() else [raw, *([Path(base, raw)] if base else [])]
        for candidate in tries:
            try:
                found = _files(candidate)
                for f in found:
                    out[f"{where}@{f.resolve()}"] = file_digest(f, memo)
            except OSError:
                continue  # unreadable or vanished: the run itself will say so
    return out


def cached_profile_hashes(root: Path, memo: HashMemo | None = None) -> list[tuple[str, str]]:
    """(relative path, digest) of every profile in the per-user cache under ``root``."""
    memo = {} if memo is None else memo
    files = sorted(root.glob("*/*.json")) if root.is_dir() else []
    return [(str(f.relative_to(root)), file_digest(f, memo)) for f in files]
