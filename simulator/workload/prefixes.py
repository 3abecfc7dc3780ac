"""Prefix identity: which requests' tokens begin alike, kept as columns.

A request's stream (prompt, then output) starts with **segments**: ``(segment id,
tokens)`` pairs, equal ids meaning equal token content; the tokens after them are the
request's own. The segments of every request lie in two flat arrays
(:class:`PrefixSegments`: ``ids``, ``lens``) and the request table's optional columns
``segments_start`` / ``segments_stop`` give each row its slice, so rows can be sorted,
cut and renumbered without touching the arrays, and no object exists per token or block.
simulator/prefix_cache_chain.py turns a slice into chained block hashes.

Three workloads carry identity:

- Mooncake traces: each ``hash_ids`` entry is one segment of 512 tokens (the trace's
  block size; traces_json.load_mooncake).
- A shared system prompt (``workload.system_prompt_tokens = N``): a share
  ``system_prompt_share`` of the requests (of the sessions, with sessions) start with one
  of ``system_prompts`` distinct N-token prompts, drawn uniformly; N is added to their
  prompt (the drawn prompt length is the user's message). Segment ids ``0 ..
  system_prompts - 1``.
- Multi-turn sessions (``workload.session_turns = T``, closed loop): a client's requests
  form sessions of T turns; turn t's prompt is turn t-1's prompt and output followed by a
  new message (the drawn prompt length), so every turn of a session is a prefix of one
  stream, a segment of its own (id ``system_prompts + session``), after the session's
  system prompt if it has one. The client's think time separates the turns.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from simulator.errors import ConfigError

START, STOP = "segments_start", "segments_stop"  # the request table's columns


@dataclass(slots=True, frozen=True)
class PrefixSegments:
    """Every request's segments, flat: request rows slice them with START/STOP."""

    ids: np.ndarray  # int64: segment id (equal id = equal token content)
    lens: np.ndarray  # int64: tokens the segment covers, >= 1


class PrefixIdentity:
    """Each request's segments by request id, for the prefix cache (empty when unknown)."""

    __slots__ = ("_segments", "_rows")

    def __init__(self, table: pd.DataFrame, segments: PrefixSegments | None) -> None:
        self._segments = segments
        self._rows: dict[int, tuple[int, int]] = {}
        if segments is not None and START in table:
            ids = table["request_id"].to_numpy(np.int64).tolist()
            lo = table[START].to_numpy(np.int64).tolist()
            hi = table[STOP].to_numpy(np.int64).tolist()
            self._rows = {i: (a, b) for i, a, b in zip(ids, lo, hi, strict=True) if b > a}

    def of(self, request_id: int) -> tuple[np.ndarray, np.ndarray]:
        """(ids, lens) of ``request_id``'s segments."""
        span = self._rows.get(request_id)
        seg = self._segments
        if span is None or seg is None:
            return _EMPTY, _EMPTY
        return seg.ids[span[0]:span[1]], seg.lens[span[0]:span[1]]


_EMPTY = np.zeros(0, dtype=np.int64)


def from_lists(per_row: list[list[tuple[int, int]]]) -> tuple[PrefixSegments, np.ndarray,
                                                                 np.ndarray]:
    """Flat segments and each row's (start, stop) from per-row ``[(id, tokens), ...]``."""
    counts = np.fromiter((len(r) for r in per_row), np.int64, len(per_row))
    stop = np.cumsum(counts)
    ids = np.fromiter((i for r in per_row for i, _ in r), np.int64, int(counts.sum()))
    lens = np.fromiter((n for r in per_row for _, n in r), np.int64, int(counts.sum()))
    return PrefixSegments(ids, lens), stop - counts, stop


def from_id_lists(per_row: list[list[int]], tokens_per_id: int) -> tuple[PrefixSegments,
                                                                         np.ndarray, np.ndarray]:
    """Flat segments and each row's (start, stop) from per-row id lists, every id
    covering ``tokens_per_id`` tokens (Mooncake's hash_ids)."""
    counts = np.fromiter((len(r) for r in per_row), np.int64, len(per_row))
    stop = np.cumsum(counts)
    ids = np.fromiter((i for r in per_row for i in r), np.int64, int(counts.sum()))
    return PrefixSegments(ids, np.full(ids.size, tokens_per_id, np.int64)), stop - counts, stop


def session_prompts(table: pd.DataFrame, clients: int, turns: int,
                    where: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(session of each row, its turn, its prompt) for sessions of ``turns`` turns.

    Rows are a closed loop's requests, client ``i % clients`` (clients.closed_loop_table):
    a client's j-th request is turn ``j % turns`` of its session ``j // turns``. Turn t's
    prompt = turn t-1's prompt + its output + this row's drawn prompt (the new message).
    """
    if turns < 1:
        raise ConfigError(f"{where}.session_turns = {turns}: must be >= 1")
    n = len(table)
    row = np.arange(n, dtype=np.int64)
    client, j = row % clients, row // clients
    per_client = -(-np.bincount(client, minlength=clients) // turns)  # sessions per client
    first = np.concatenate([[0], np.cumsum(per_client)[:-1]])
    session = first[client] + j // turns
    turn = j % turns
    new = table["prompt_tokens"].to_numpy(np.int64)
    out = table["output_tokens"].to_numpy(np.int64)
    order = np.lexsort((turn, session))  # rows by session, then turn
    frame = pd.DataFrame({"s": session[order], "u": new[order], "o": out[order]})
    grouped = frame.groupby("s", sort=False)
    before = grouped["u"].cumsum() + grouped["o"].cumsum() - frame["o"]
    prompt = np.empty(n, dtype=np.int64)
    prompt[order] = before.to_numpy(np.int64)
    return session, turn, prompt


def identity_segments(prompt: np.ndarray, output: np.ndarray, system: np.ndarray,
                      system_tokens: int, num_system: int,
                      session: np.ndarray | None) -> tuple[PrefixSegments, np.ndarray,
                                                            np.ndarray]:
    """Segments for system prompts (``system[i]``: row i's prompt, -1 for none) and
    sessions (``session[i]``, or None): see the module docstring for the ids."""
    rows: list[list[tuple[int, int]]] = []
    stream: dict[int, int] = {}
    if session is not None:  # a session's stream covers its longest turn
        for s, p, o, g in zip(session.tolist(), prompt.tolist(), output.tolist(),
                              system.tolist(), strict=True):
            own = p + o - (system_tokens if g >= 0 else 0)
            stream[s] = max(stream.get(s, 0), own)
    for i, g in enumerate(system.tolist()):
        segs = [(g, system_tokens)] if g >= 0 else []
        if session is not None:
            s = int(session[i])
            segs.append((num_system + s, stream[s]))
        rows.append(segs)
    return from_lists(rows)
