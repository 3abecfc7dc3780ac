"""Prompt token ids that honour a workload's prefix identity (shared segments).

A request table says which requests begin alike as segments, ``(segment id, tokens)``
(simulator/workload/prefixes.py): equal ids mean equal token content. The engine serves
token ids, so every request naming segment ``s`` must get the same ids for it, or a prefix
hit would reuse KV of other tokens. Here segment ``s``'s ids are drawn from ``(seed, 1,
s)`` (the same stream whatever length is asked, so a shorter use is a prefix of a longer
one), and the rest of the prompt from ``(seed, request_id)`` as
:func:`engine.serving.prompt_ids` draws a prompt without segments::

    request 7, segments [(0, 40)], prompt 55:  ids = seg0[:40] + own(7)[:15]

A prompt shorter than its segments (a prompt cut to the model's context) is their first
``prompt_tokens`` ids.

A segment may also cover a request's *output*: a multi-turn session is one segment, the
whole conversation, and turn t's answer lies in it before turn t+1's new message. There the
segment's ids are what the engine generated: :meth:`SegmentPrompts.finished` writes a
request's outputs over the positions of its segments they cover, and the next turn (sent
after this one ends, a closed loop) reads them in its prompt. So the blocks a turn filled
by decoding, which the prefix cache names by the session's segment, hold the KV of exactly
the ids the next turn's prompt has there, and a session hit is exact too. Ids a prompt has
used already are never overwritten (the first use fixes them): where a workload lets one
request decode over positions of a segment another request's prompt has read (a Mooncake
block past one prompt's end and inside another's), the decoder's blocks hold other
tokens' KV, a limit of naming output by segment rather than of the engine.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from simulator.workload.prefixes import PrefixIdentity, PrefixSegments

_SEGMENT_STREAM = 1  # the middle word of a segment's seed, apart from requests' (seed, id)


class SegmentPrompts:
    """Prompt ids for the rows of one table (see the module docstring)."""

    def __init__(self, table: pd.DataFrame, segments: PrefixSegments, vocab_size: int,
                 seed: int = 0) -> None:
        self.identity = PrefixIdentity(table, segments)
        self.vocab_size = vocab_size
        self.seed = seed
        self._drawn: dict[int, np.ndarray] = {}  # segment id -> its longest draw so far
        self._read: dict[int, int] = {}  # segment id -> positions some prompt already used

    def segment(self, seg_id: int, length: int) -> np.ndarray:
        """The first ``length`` ids of segment ``seg_id``."""
        have = self._drawn.get(seg_id)
        if have is None or len(have) < length:
            rng = np.random.default_rng([self.seed, _SEGMENT_STREAM, seg_id])
            drawn = rng.integers(1, self.vocab_size, size=length)
            if have is not None:  # keep what was written (outputs) over the draw
                drawn[:len(have)] = have
            have = self._drawn[seg_id] = drawn
        return have[:length]

    def finished(self, request_id: int, prompt_tokens: int, outputs: list[int]) -> None:
        """Write ``request_id``'s ``outputs`` (stream positions ``prompt_tokens ..``) over
        the segment positions they cover (module docstring)."""
        ids, lens = self.identity.of(request_id)
        lo, hi = prompt_tokens, prompt_tokens + len(outputs)
        at = 0  # stream position where the segment starts
        for seg_id, n in zip(ids.tolist(), lens.tolist(), strict=True):
            a = max(lo, at, at + self._read.get(seg_id, 0))  # ids a prompt used stay
            b = min(hi, at + n)
            if a < b:
                content = self.segment(seg_id, b - at)  # a view of the stored draw
                content[a - at:b - at] = outputs[a - lo:b - lo]
            at += n

    def prompt(self, request_id: int, prompt_tokens: int) -> list[int]:
        """``request_id``'s prompt ids: its segments' ids, then its own."""
        ids, lens = self.identity.of(request_id)
        parts = []
        used = 0
        for seg_id, n in zip(ids.tolist(), lens.tolist(), strict=True):
            take = min(n, prompt_tokens - used)
            if take <= 0:
                break
            parts.append(self.segment(seg_id, take))
            self._read[seg_id] = max(self._read.get(seg_id, 0), take)
            used += take
        rest = prompt_tokens - used
        if rest > 0:
            rng = np.random.default_rng([self.seed, request_id])
            parts.append(rng.integers(1, self.vocab_size, size=rest))
        return np.concatenate(parts).tolist() if parts else []
