"""Loaders for JSON traces: Mooncake JSONL and vLLM ``bench serve`` result files.

Mooncake errors name the file, the line and the field; vLLM bench errors name the
file and the list element (``input_lens[3]``), since a result file keeps each list
on one line.
"""

from __future__ import annotations

import json
import math
import os
from collections import Counter
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from simulator.errors import TraceError
from simulator.workload.prefixes import START, STOP, PrefixSegments, from_id_lists
from simulator.workload.traces_common import LoadedTrace, finish, zero_token_reasons

MAX_JSON_NUMBER = 2**53  # past it no JSON number is a count or a time a float holds exactly
MOONCAKE_BLOCK_TOKENS = 512  # tokens per hash id in Mooncake's traces (its README)


def _number(value: Any, where: str, integer: bool) -> float:
    """Check one JSON value: a finite number >= 0 (whole if ``integer``)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TraceError(f"{where} = {value!r}: not a number")
    if not (isinstance(value, int) or math.isfinite(value)) or value < 0:
        raise TraceError(f"{where} = {value}: must be a finite number >= 0")
    # JSON allows numbers of any size: past 2**53 none is a count or a time a float holds
    # exactly (and a count past it does not fit the int64 columns)
    if value > MAX_JSON_NUMBER:
        raise TraceError(f"{where} = {value}: too large (at most 2**53)")
    if integer and value != int(value):
        raise TraceError(f"{where} = {value}: must be a whole number")
    return value


def _field(obj: dict[str, Any], key: str, where: str, integer: bool) -> float:
    if key not in obj:
        raise TraceError(f"{where}: field {key!r} is missing")
    return _number(obj[key], f"{where}: field {key!r}", integer)


def _hash_ids(obj: dict[str, Any], where: str) -> list[int]:
    value = obj.get("hash_ids", [])
    if not isinstance(value, list) or any(
        isinstance(h, bool) or not isinstance(h, int) for h in value
    ):
        raise TraceError(f"{where}: field 'hash_ids' = {value!r}: must be a list of integers")
    return value


def _json_lines(path: Path) -> list[tuple[int, dict[str, Any]]]:
    """Parse every non-blank line of a JSONL file into (line number, object)."""
    if not path.is_file():
        raise TraceError(f"{path}: no such file")
    out = []
    try:
        with path.open(encoding="utf-8-sig") as f:
            for line_no, line in enumerate(f, 1):
                if not line.strip():
                    continue
                try:
                    obj = json.loads(line)
                except json.JSONDecodeError as exc:
                    raise TraceError(
                        f"{path} line {line_no}: not valid JSON ({exc.msg}, column {exc.colno})"
                    ) from exc
                if not isinstance(obj, dict):
                    raise TraceError(
                        f"{path} line {line_no}: expected a JSON object, got {type(obj).__name__}"
                    )
                out.append((line_no, obj))
    except UnicodeDecodeError as exc:
        raise TraceError(f"{path}: not UTF-8 text ({exc})") from exc
    return out


def load_mooncake(path: str | os.PathLike[str]) -> LoadedTrace:
    """Mooncake FAST'25 JSONL: ``timestamp`` (ms), ``input_length``, ``output_length``,
    ``hash_ids``.

    arrival_s = timestamp / 1000 (minus the earliest). Prefix sharing from hash_ids
    (one id per 512-token block, equal leading ids = shared KV prefix): requests
    whose first hash id is the same form a prefix group (numbered 0.. in arrival
    order; a first id seen only once gives prefix_group -1). A request's
    prefix_tokens = 512 x the longest run of leading hash ids it shares with any
    earlier request of its group, capped at prompt_tokens - 1 (a request always
    prefills at least one token; the last block may be partial). The first request
    of a group has prefix_tokens 0. A missing hash_ids counts as an empty list.
    The hash ids themselves are kept as the rows' prefix segments (one per 512 tokens,
    simulator/workload/prefixes.py), which the prefix cache turns into block hashes.
    """
    p = Path(path)
    rows = _json_lines(p)
    n = len(rows)
    arrival, prompt, output = np.empty(n), np.empty(n, np.int64), np.empty(n, np.int64)
    hashes: list[list[int]] = []
    for i, (line_no, obj) in enumerate(rows):
        where = f"{p} line {line_no}"
        arrival[i] = _field(obj, "timestamp", where, integer=False) / 1000.0
        prompt[i] = _field(obj, "input_length", where, integer=True)
        output[i] = _field(obj, "output_length", where, integer=True)
        hashes.append(_hash_ids(obj, where))
    segments: list[PrefixSegments] = []

    def extra(order: np.ndarray, lens: np.ndarray) -> dict[str, np.ndarray]:
        seg, start, stop = from_id_lists([hashes[r] for r in order], MOONCAKE_BLOCK_TOKENS)
        segments.append(seg)
        return {**_prefixes(hashes, order, lens), START: start, STOP: stop}

    loaded = finish(
        {"arrival_s": arrival, "prompt_tokens": prompt, "output_tokens": output},
        str(p),
        "mooncake",
        extra=extra,
    )
    loaded = replace(loaded, segments=segments[0])
    groups = loaded.table["prefix_group"]
    loaded.notes.append(
        f"timestamp in ms -> s; {groups.max() + 1 if len(groups) else 0} prefix group(s) "
        f"cover {(groups >= 0).sum()} of {len(groups)} requests; prefix_tokens = "
        f"{MOONCAKE_BLOCK_TOKENS} x leading hash ids shared with an earlier request"
    )
    return loaded


def _prefixes(
    hashes: list[list[int]], order: np.ndarray, prompt: np.ndarray
) -> dict[str, np.ndarray]:
    """prefix_group and prefix_tokens for rows ``order`` (file positions, final order)."""
    firsts = [hashes[r][0] if hashes[r] else None for r in order]
    seen = Counter(f for f in firsts if f is not None)
    group_ids: dict[int, int] = {}
    tries: dict[int, dict[int, Any]] = {}  # first id -> trie of hash-id paths seen so far
    group = np.full(order.size, -1, dtype=np.int64)
    shared_tokens = np.zeros(order.size, dtype=np.int64)
    for i, row in enumerate(order):
        first = firsts[i]
        if first is None or seen[first] < 2:
            continue
        group[i] = group_ids.setdefault(first, len(group_ids))
        node, shared, matching = tries.setdefault(first, {}), 0, True
        for hid in hashes[row]:
            child = node.get(hid) if matching else None
            if child is None:
                matching, child = False, {}
                node[hid] = child
            else:
                shared += 1
            node = child
        shared_tokens[i] = min(shared * MOONCAKE_BLOCK_TOKENS, int(prompt[i]) - 1)
    return {"prefix_group": group, "prefix_tokens": shared_tokens}


BENCH_NO_ARRIVALS = ("a vLLM bench result has no arrival times: arrival_s is NaN; synthesise "
                     "arrivals (workload.arrival = poisson, gamma or constant)")


def load_vllm_bench(path: str | os.PathLike[str]) -> LoadedTrace:
    """A vLLM ``bench serve`` result JSON (saved with ``--save-result --save-detailed``).

    Uses ``input_lens`` and ``output_lens`` (one entry per request, in send order).
    A request failed only where the file says so: its ``errors`` entry is non-empty
    (failed requests are dropped and counted as ``failed_request``). vLLM writes
    ``output_lens`` 0 for a failure *and* for a completion whose text is empty (the
    server stopped at its first token, which the text does not show); a request that
    completed with 0 output tokens is a request: kept, with 1 output token (the one
    that ended it; the contract needs >= 1), and counted in the notes. Only a file
    with no ``errors`` list that records fewer ``completed`` than requests falls back
    to reading 0 output tokens as failures. The file has no per-request arrival times:
    arrival_s is NaN and the notes say to synthesise arrivals; ``request_rate``,
    ``burstiness`` and ``max_concurrency``, when present, are repeated in the notes.
    """
    return load_vllm_bench_result(path)[0]


def load_vllm_bench_result(
    path: str | os.PathLike[str],
) -> tuple[LoadedTrace, dict[str, Any], np.ndarray]:
    """:func:`load_vllm_bench`, plus the parsed JSON object and, for each row of the table,
    its position in the file's per-request lists (to read ``ttfts``/``itls`` beside it)."""
    p = Path(path)
    if not p.is_file():
        raise TraceError(f"{p}: no such file")
    try:
        data = json.loads(p.read_text(encoding="utf-8-sig"))
    except json.JSONDecodeError as exc:
        raise TraceError(f"{p} line {exc.lineno}: not valid JSON ({exc.msg})") from exc
    except UnicodeDecodeError as exc:
        raise TraceError(f"{p}: not UTF-8 text ({exc})") from exc
    if not isinstance(data, dict):
        raise TraceError(f"{p}: expected a JSON object (a vLLM bench result)")
    lens = {}
    for key in ("input_lens", "output_lens"):
        if not isinstance(data.get(key), list):
            raise TraceError(
                f"{p}: field {key!r} is missing or not a list (vLLM writes "
                "per-request lengths only with --save-detailed)"
            )
        lens[key] = np.array(
            [_number(v, f"{p}: field {key}[{i}]", True) for i, v in enumerate(data[key])],
            dtype=np.int64,
        )
    prompt, output = lens["input_lens"], lens["output_lens"]
    if prompt.size != output.size:
        raise TraceError(
            f"{p}: input_lens has {prompt.size} entries but output_lens has {output.size}"
        )
    failed, notes = _bench_failures(data, output, p)
    empty = (output == 0) & ~failed
    if empty.any():
        notes.append(f"{int(empty.sum())} completed request(s) have an empty completion "
                     "(output_lens 0): counted with 1 output token, the one that ended them")
        output = np.where(empty, 1, output)
    notes.append(BENCH_NO_ARRIVALS)
    ran = [
        f"{k} = {data[k]}"
        for k in ("request_rate", "burstiness", "max_concurrency")
        if data.get(k) is not None
    ]
    if ran:
        notes.append("the benchmark ran with " + ", ".join(ran))
    columns = {
        "arrival_s": np.full(prompt.size, np.nan),
        "prompt_tokens": prompt,
        "output_tokens": output,
    }
    trace = finish(columns, str(p), "vllm_bench", failed=failed, notes=notes)
    rows = np.flatnonzero(zero_token_reasons(prompt, output, failed)[0])  # as finish keeps
    return trace, data, rows


def _bench_failures(
    data: dict[str, Any], output: np.ndarray, p: Path
) -> tuple[np.ndarray, list[str]]:
    """Which requests failed, by the file's own word, and notes on how that was read."""
    errors, completed = data.get("errors"), data.get("completed")
    if isinstance(errors, list):
        if len(errors) != output.size:
            raise TraceError(f"{p}: errors has {len(errors)} entries but output_lens has "
                             f"{output.size}")
        failed = np.array([bool(e) for e in errors], dtype=bool)
        notes = []
        if isinstance(completed, int) and completed != output.size - int(failed.sum()):
            notes.append(f"the file records completed = {completed}, but its errors list "
                         f"marks {int(failed.sum())} of {output.size} failed: read the errors")
        return failed, notes
    if isinstance(completed, int) and not isinstance(completed, bool) and completed < output.size:
        return output == 0, [f"no errors list and completed = {completed} of {output.size}: "
                             "requests with 0 output tokens read as failed"]
    return np.zeros(output.size, dtype=bool), []


def bench_latencies(data: dict[str, Any], rows: np.ndarray, p: Path
                    ) -> tuple[np.ndarray, list[np.ndarray]]:
    """``ttfts`` (s) and ``itls`` (s, one array per request) of the file's requests ``rows``.

    The rows are those :func:`load_vllm_bench_result` keeps (its third value). A request
    with 0 or 1 output tokens has no inter-token gaps (an empty ``itls`` entry).
    """
    ttfts, itls = data.get("ttfts"), data.get("itls")
    n = len(data["input_lens"])
    for key, value in (("ttfts", ttfts), ("itls", itls)):
        if not isinstance(value, list):
            raise TraceError(f"{p}: field {key!r} is missing or not a list (vLLM writes "
                             "per-request times only with --save-detailed)")
        if len(value) != n:
            raise TraceError(f"{p}: {key} has {len(value)} entries, input_lens has {n}")
    first = np.empty(len(rows))
    gaps = []
    for j, r in enumerate(rows):
        first[j] = _number(ttfts[r], f"{p}: field ttfts[{r}]", False)  # type: ignore[index]
        row = itls[r]  # type: ignore[index]
        if not isinstance(row, list):
            raise TraceError(f"{p}: field itls[{r}] = {row!r}: must be a list of seconds")
        gaps.append(np.array([_number(g, f"{p}: field itls[{r}][{k}]", False)
                              for k, g in enumerate(row)], dtype=np.float64))
    return first, gaps
