"""ITL samples from one replica's steps: each token's gap since its request's previous token.

A step that emits tokens after some request's first ("decode tokens", the step log's
``num_decode_tokens``) gives those tokens the step's duration as their ITL, when the
requests also emitted in the step just before. Where steps that emitted nothing lie in
between (a stack that runs prefill batches on their own: SGLang, vLLM V0, TensorRT-LLM's
static batching), the requests that were decoding waited through them as well: their
next token's gap is the time since the last emitting step ended, as a streaming client
measures it (vLLM's and SGLang's ``bench_serving`` take ITL as the gaps between a
request's streamed chunks). A 4,000-token prefill of 60 ms between two 21 ms decode
steps makes the 63 running requests' next gaps 81 ms, not 21.

The step log does not say whose tokens a step emitted, so the tokens carried over such a
gap are counted as ``min(d_j, d_k, running_k)``: the tokens of step ``j``, those of the
last emitting step ``k``, and the requests still holding KV cache after ``k`` (so a
request that finished at ``k`` carries nothing, and an engine that went idle carries
nothing across its idle time). The rest of step ``j``'s tokens (requests whose first
token came between ``k`` and ``j``) keep step ``j``'s duration. Where no time lies
between ``k`` and ``j`` (``start_j == end_k``) every token keeps step ``j``'s duration.
"""

from __future__ import annotations

import numpy as np

LastEmit = tuple[float, int, int]
"""The latest step that emitted decode tokens: its end, its tokens, requests running after."""


def carried_gaps(start_s: np.ndarray, end_s: np.ndarray, tokens: np.ndarray,
                 running: np.ndarray, last: LastEmit | None = None,
                 ) -> tuple[np.ndarray, np.ndarray, np.ndarray, LastEmit | None]:
    """``(own, gap_ms, gap_tokens, last)`` for one replica's steps given in time order
    (``last``: the emitting step before them, if any): each step's tokens that keep its own
    duration (``tokens`` less those carried across a gap), the gaps of the carried tokens
    and how many each has (only gaps with some), and the last emitting step after them."""
    tokens = np.asarray(tokens, dtype=np.int64)
    emit = np.flatnonzero(tokens > 0)
    if not len(emit):
        return tokens, np.empty(0), np.empty(0, np.int64), last
    e_start = np.asarray(start_s, dtype=float)[emit]
    e_end = np.asarray(end_s, dtype=float)[emit]
    e_tok = tokens[emit]
    e_run = np.asarray(running, dtype=np.int64)[emit]
    before_end = np.empty(len(emit))
    before_tok = np.empty(len(emit), np.int64)
    before_run = np.empty(len(emit), np.int64)
    before_end[1:], before_tok[1:], before_run[1:] = e_end[:-1], e_tok[:-1], e_run[:-1]
    if last is None:
        before_end[0], before_tok[0], before_run[0] = e_start[0], 0, 0
    else:
        before_end[0], before_tok[0], before_run[0] = last
    carried = np.where(e_start > before_end,
                       np.minimum(e_tok, np.minimum(before_tok, before_run)), 0)
    own = tokens.copy()
    own[emit] -= carried
    gaps = carried > 0
    return (own, (e_end[gaps] - before_end[gaps]) * 1000.0, carried[gaps],
            (float(e_end[-1]), int(e_tok[-1]), int(e_run[-1])))


def itl_gaps(start_s: np.ndarray, end_s: np.ndarray, tokens: np.ndarray, running: np.ndarray,
             last: LastEmit | None = None) -> tuple[np.ndarray, np.ndarray, LastEmit | None]:
    """``(values_ms, weights, last)``: the ITL samples of one replica's steps given in time
    order (``last``: the emitting step before them, if any) and the last emitting step
    after them: each step's duration for its own tokens, then the carried tokens' gaps
    (:func:`carried_gaps`). Values whose weight is 0 are left out."""
    own, gap_ms, gap_tokens, after = carried_gaps(start_s, end_s, tokens, running, last)
    keep = own > 0
    duration_ms = (np.asarray(end_s, dtype=float) - np.asarray(start_s, dtype=float)) * 1000.0
    return (np.concatenate((duration_ms[keep], gap_ms)),
            np.concatenate((own[keep], gap_tokens)), after)
