"""Finished scenario points on disk, so an interrupted sweep or plan loses nothing.

A point is keyed by a hash of its resolved scenario: the SHA-256 of the canonical JSON
(sorted keys, no whitespace) of ``{"kind", "point", "code", "inputs", "measured_here"}``,
where ``code`` is :func:`code_version`, a hash of the simulator's own source files and
shipped profiles, so a change to the simulator never serves a stale result; ``inputs`` is
the content hash of every file the point names (cost profiles, traces, model configs:
:mod:`simulator.point_inputs`), so an edited file is never answered from the cache; and
``measured_here`` the contents of the per-user profile cache (a re-calibrated machine
recomputes its points). Each entry is
``<folder>/<hash>.json`` (the summary and the point it came from) plus, for sweeps,
``<hash>.<table>.parquet``; the JSON is written last, atomically, and is the mark that the
entry is complete. :func:`map_cached` runs only the points that are missing and saves
each one as soon as it finishes.
"""

from __future__ import annotations

import functools
import hashlib
import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

import pandas as pd

from simulator.atomic import atomic_write
from simulator.executors import Executor
from simulator.point_inputs import HashMemo, cached_profile_hashes, input_hashes
from simulator.profile_cache import cache_root

CACHE_VERSION = 2  # 2: keys hold the content hash of every file a point reads
_SIM_ROOT = Path(__file__).resolve().parent
T = TypeVar("T")
R = TypeVar("R")


@functools.lru_cache(maxsize=1)
def code_version() -> str:
    """Hash of ``simulator/**/*.py`` and the shipped JSON specs/profiles (16 hex digits)."""
    h = hashlib.sha256()
    files = sorted([*_SIM_ROOT.rglob("*.py"), *_SIM_ROOT.rglob("*.json")])
    for path in files:
        if "__pycache__" in path.parts:
            continue
        h.update(str(path.relative_to(_SIM_ROOT)).encode())
        h.update(path.read_bytes())
    return h.hexdigest()[:16]


def canonical_json(value: Any) -> str:
    """Sorted keys, no spaces, no NaN: one text per value (``workload.rate = inf``, the one
    infinite value a scenario takes, is written as the string "inf")."""
    return json.dumps(_inf_as_text(value), sort_keys=True, separators=(",", ":"),
                      allow_nan=False)


def _inf_as_text(value: Any) -> Any:
    if isinstance(value, float) and value in (float("inf"), float("-inf")):
        return str(value)
    if isinstance(value, dict):
        return {k: _inf_as_text(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_inf_as_text(v) for v in value]
    return value


def point_key(point: dict[str, Any], kind: str,
              measured_here: list[tuple[str, str]] | None = None,
              memo: HashMemo | None = None) -> str:
    """The cache key of one scenario point for one kind of job (``sweep``, ``summary``).

    ``measured_here`` is :func:`profile_cache_state` (read here when not given: a caller
    keying many points reads it once, and shares ``memo`` so a file named by every point
    of a sweep is hashed once)."""
    memo = {} if memo is None else memo
    state = profile_cache_state(memo) if measured_here is None else measured_here
    text = canonical_json({"kind": kind, "point": point, "code": code_version(),
                           "cache_version": CACHE_VERSION, "measured_here": state,
                           "inputs": input_hashes(point, memo)})
    return hashlib.sha256(text.encode()).hexdigest()


def profile_cache_state(memo: HashMemo | None = None) -> list[tuple[str, str]]:
    """(path, content hash) of every profile in the per-user cache: a point that resolves to
    one (``servesim calibrate --here``) is recomputed when it is measured again."""
    return cached_profile_hashes(cache_root(), memo)


class PointCache:
    """Summaries (and tables) of finished points in ``folder``; ``folder=None`` disables it.

    ``computed`` and ``reused`` count the points run and the points read back.
    """

    def __init__(self, folder: str | Path | None) -> None:
        self.folder = None if folder is None else Path(folder)
        self.computed = 0
        self.reused = 0

    def load(self, key: str) -> dict[str, Any] | None:
        """The summary stored under ``key``, or None (absent, disabled or unreadable)."""
        if self.folder is None:
            return None
        path = self.folder / f"{key}.json"
        try:
            entry = json.loads(path.read_text())
        except (OSError, ValueError):
            return None  # absent, or a torn file from an older crash: recompute
        summary = entry.get("summary") if isinstance(entry, dict) else None
        return summary if isinstance(summary, dict) else None

    def table(self, key: str, name: str) -> pd.DataFrame:
        """A table saved with the entry ``key``."""
        assert self.folder is not None
        return pd.read_parquet(self.folder / f"{key}.{name}.parquet")

    def save(self, key: str, point: dict[str, Any], summary: dict[str, Any],
             tables: dict[str, pd.DataFrame] | None = None) -> None:
        """Store one finished point: its tables first, then the JSON that marks it done."""
        if self.folder is None:
            return
        self.folder.mkdir(parents=True, exist_ok=True)
        for name, frame in (tables or {}).items():
            atomic_write(self.folder / f"{key}.{name}.parquet", frame.to_parquet)
        text = json.dumps({"cache_version": CACHE_VERSION, "code": code_version(),
                           "point": point, "summary": summary}, indent=1)
        atomic_write(self.folder / f"{key}.json", lambda p: p.write_text(text))


def map_cached(
    ex: Executor,
    job: Callable[[T], R],
    items: Sequence[T],
    points: Sequence[dict[str, Any]],
    cache: PointCache,
    kind: str,
    save: Callable[[int, str, R], None],
    load: Callable[[int, str, dict[str, Any]], R],
) -> list[R]:
    """``job`` over ``items`` (``points[i]``: what item i's result depends on), reusing
    cached results.

    ``load(i, key, summary)`` rebuilds a result from the cache; ``save(i, key, result)``
    stores a fresh one (called as each finishes). Results come back in the items' order.
    """
    memo: HashMemo = {}
    state = profile_cache_state(memo)
    keys = [point_key(p, kind, state, memo) for p in points]
    out: list[Any] = [None] * len(items)
    todo = []
    for i, key in enumerate(keys):
        hit = cache.load(key)
        if hit is None:
            todo.append(i)
        else:
            out[i] = load(i, key, hit)
            cache.reused += 1

    def done(j: int, result: R) -> None:
        save(todo[j], keys[todo[j]], result)
        cache.computed += 1

    fresh = ex.map(job, [items[i] for i in todo], on_done=done)
    for i, result in zip(todo, fresh, strict=True):
        out[i] = result
    return out
