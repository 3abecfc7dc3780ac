"""Chained block hashes of a request's tokens, from the workload's prefix segments.

A workload says what a request's tokens *are* without listing them: its prompt starts with
**segments**, each ``(segment id, tokens)``; equal ids mean equal token content (for the
length both cover), and the tokens after the segments (the rest of the prompt, then the
output) are the request's own. A Mooncake request's segments are its ``hash_ids``, 512
tokens each; a shared system prompt is one segment; a multi-turn session is one long
segment that every turn of the session starts with (simulator/workload/prefixes.py).

The prefix cache names a KV block by a hash chained over the blocks before it, as vLLM's
automatic prefix caching does (vllm/v1/core/kv_cache_utils.py ``hash_block_tokens``:
``hash((parent_block_hash, block_token_ids, extra_keys))``). Here a block's "token ids" are
the pieces of segments it covers, ``(key, start, end)``::

    block_size 16, segments [(7, 40)] then own tokens of request 3:
    block 0: ((0, 7), 0, 16)                    h0 = hash((ROOT, pieces0))
    block 1: ((0, 7), 16, 32)                   h1 = hash((h0, pieces1))
    block 2: ((0, 7), 32, 40), ((1, 3), 0, 8)   h2 = hash((h1, pieces2))

Two requests get the same hash for block ``j`` exactly when their first ``(j + 1) x
block_size`` tokens are the same content (up to a 64-bit hash collision, about ``n^2 /
2^65`` for ``n`` distinct blocks). Keys are tuples of ints, whose hashes do not depend on
``PYTHONHASHSEED``, so runs repeat exactly.
"""

from __future__ import annotations

import numpy as np

ROOT_HASH = 0  # the parent of a request's first block (vLLM: NONE_HASH)
SEGMENT = 0  # key kind: a workload segment id, shared by every request that names it
OWN = 1  # key kind: tokens of one request alone (the rest of its prompt, its output)


def block_hashes(ids: np.ndarray, lens: np.ndarray, request_id: int, num_tokens: int,
                 block_size: int) -> list[int]:
    """Hashes of the full blocks among a request's first ``num_tokens`` tokens.

    ``ids`` and ``lens``: the request's segments (token content ``ids[k]`` for ``lens[k]``
    tokens), covering the start of its stream; tokens past them are its own.
    """
    full = num_tokens // block_size
    out: list[int] = []
    parent = ROOT_HASH
    pieces: list[tuple[tuple[int, int], int, int]] = []
    need = block_size  # tokens still missing from the block being built
    for seg_id, seg_len in zip(ids.tolist(), lens.tolist(), strict=True):
        key, start = (SEGMENT, seg_id), 0
        while start < seg_len and len(out) < full:
            if not pieces and seg_len - start >= block_size:  # whole blocks of one segment
                n = min((seg_len - start) // block_size, full - len(out))
                for s in range(start, start + n * block_size, block_size):
                    parent = hash((parent, ((key, s, s + block_size),)))
                    out.append(parent)
                start += n * block_size
                continue
            take = min(need, seg_len - start)
            pieces.append((key, start, start + take))
            start += take
            need -= take
            if need == 0:
                parent = hash((parent, tuple(pieces)))
                out.append(parent)
                pieces, need = [], block_size
        if len(out) >= full:
            return out
    own, start = (OWN, int(request_id)), 0
    if len(out) < full:  # the first own block completes any partial one
        pieces.append((own, start, start + need))
        start += need
        parent = hash((parent, tuple(pieces)))
        out.append(parent)
    for s in range(start, start + (full - len(out)) * block_size, block_size):
        parent = hash((parent, ((own, s, s + block_size),)))
        out.append(parent)
    return out
