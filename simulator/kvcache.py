"""The paged KV cache: which of a replica's blocks each request holds.

How many blocks there are is ``[kv]``'s (:mod:`simulator.kv_config`).
"""

from __future__ import annotations

from collections.abc import Iterable
from itertools import accumulate

import numpy as np

_CYCLE_STEPS = 128  # from here blocks_used_after_steps counts in numpy (fewer: in Python)


class BlockManager:
    """Paged KV cache bookkeeping: ``num_blocks`` blocks of ``block_size`` tokens.

    Each sequence holds the blocks covering the tokens in its cache::

        seq 7:  [b3 |b9 |b4 ]      tokens 0..47 with block_size 16, last block partly full
        seq 8:  [b1 ]
        free:   b0 b2 b5 b6 b7 b8 ...

    Only counts matter for timing, so blocks are counted, not named. Queries and
    commands come in pairs (``can_allocate``/``allocate``); ``free`` returns all of a
    sequence's blocks. Invariant: ``used + num_free == num_blocks``.

    ``window_blocks``: blocks a sequence holds besides its context's from its first
    allocation to its ``free``, for a model's sliding-window layers when they draw from
    the same pool (vLLM's hybrid KV-cache manager keeps each request's last window there:
    ``KVCacheConfig.window_blocks``). ``held`` and ``blocks_for`` count the context's
    blocks only; ``used`` counts both.
    """

    __slots__ = ("num_blocks", "block_size", "window_blocks", "used", "_held")
    caches_prefixes = False  # True for prefix_cache.PrefixBlockManager (it has ``match``)

    def __init__(self, num_blocks: int, block_size: int, window_blocks: int = 0) -> None:
        self.num_blocks = num_blocks
        self.block_size = block_size
        self.window_blocks = window_blocks
        self.used = 0
        self._held: dict[int, int] = {}

    @property
    def num_free(self) -> int:
        """Blocks not held by any sequence."""
        return self.num_blocks - self.used

    def blocks_for(self, num_tokens: int) -> int:
        """Blocks needed to cache ``num_tokens`` tokens."""
        return -(-num_tokens // self.block_size)

    def request_blocks(self, num_tokens: int) -> int:
        """Blocks a request of ``num_tokens`` tokens takes in all: its context's and its
        window's (:attr:`window_blocks`)."""
        return -(-num_tokens // self.block_size) + self.window_blocks

    def blocks_in_use(self, seq_ids: list[int]) -> int:
        """Blocks the sequences ``seq_ids`` hold between them (a shared block once)."""
        held = self._held
        return sum(held[i] + self.window_blocks for i in seq_ids if i in held)

    def match(self, seq_id: int, num_tokens: int, stream_tokens: int) -> int:
        """Tokens found in a prefix cache: none here (prefix_cache.PrefixBlockManager)."""
        return 0

    def held(self, seq_id: int) -> int:
        """Blocks held by ``seq_id``."""
        return self._held.get(seq_id, 0)

    def extra_for(self, seq_id: int, num_tokens: int) -> int:
        """More blocks ``seq_id`` needs to cache ``num_tokens`` tokens in all (a new
        sequence: its window's too)."""
        held = self._held.get(seq_id, -1)
        need = -(-num_tokens // self.block_size)
        if held < 0:
            return need + self.window_blocks if need > 0 else 0
        return need - held if need > held else 0

    def can_allocate(self, seq_id: int, num_tokens: int, reserve_blocks: int = 0) -> bool:
        """Whether ``seq_id`` can grow to ``num_tokens`` tokens leaving ``reserve_blocks`` free."""
        return self.extra_for(seq_id, num_tokens) + reserve_blocks <= self.num_blocks - self.used

    def allocate(self, seq_id: int, num_tokens: int) -> None:
        """Grow ``seq_id``'s blocks to cover ``num_tokens`` tokens (a new sequence takes its
        window's blocks too)."""
        held = self._held.get(seq_id, -1)
        need = -(-num_tokens // self.block_size)
        extra = need - held if held >= 0 else need + self.window_blocks
        if need <= held or need == 0:
            return
        if extra > self.num_blocks - self.used:
            raise RuntimeError(f"KV overcommit: seq {seq_id} needs {extra}, {self.num_free} free")
        self._held[seq_id] = need
        self.used += extra

    def take(self, num_blocks: int) -> None:
        """Count ``num_blocks`` more blocks as used by lazily decoding sequences.

        Their per-sequence records catch up in :meth:`settle` (see ``policies.lazy``).
        """
        if num_blocks > self.num_blocks - self.used:
            raise RuntimeError(f"KV overcommit: {num_blocks} blocks wanted, {self.num_free} free")
        self.used += num_blocks

    def settle(self, seq_id: int, num_tokens: int) -> None:
        """Record that ``seq_id`` holds the blocks for ``num_tokens`` tokens, already counted
        in ``used`` by :meth:`take`."""
        self._held[seq_id] = -(-num_tokens // self.block_size)

    def trim(self, seq_id: int, num_tokens: int) -> None:
        """Give back ``seq_id``'s blocks beyond those covering ``num_tokens`` tokens (the
        rejected positions of a speculative step: policies/speculative.py)."""
        held = self._held.get(seq_id, 0)
        keep = -(-num_tokens // self.block_size)
        if keep < held:
            self._held[seq_id] = keep
            self.used -= held - keep

    def free(self, seq_id: int) -> None:
        """Return every block ``seq_id`` holds (its window's too)."""
        held = self._held.pop(seq_id, -1)
        if held >= 0:
            self.used -= held + self.window_blocks

    def check(self) -> None:
        """Assert the conservation invariant (debug runs and property tests)."""
        assert self.used == sum(self._held.values()) + self.window_blocks * len(self._held), \
            "KV blocks leaked"
        assert 0 <= self.used <= self.num_blocks, f"KV used {self.used} of {self.num_blocks}"


def new_block_counts(num_cached: Iterable[int], block_size: int) -> list[int]:
    """``counts[t]``: sequences that open a KV block at their ``t``-th next token (mod block_size).

    A sequence with ``n`` tokens cached holds ``blocks_for(n)`` blocks. Its next tokens go
    to positions ``n, n + 1, ...`` and position ``p`` opens a block when
    ``p % block_size == 0``, so it needs one new block at decode steps ``t``,
    ``t + block_size``, ... (0-based) with ``t = -n mod block_size``::

        block_size 4, n = 6:  [0 1 2 3][4 5 . .][. . . .]   positions 6, 7 fit; 8 opens: t = 2
    """
    counts = [0] * block_size
    for n in num_cached:
        counts[-n % block_size] += 1
    return counts


def decode_steps_fitting(counts: list[int], num_free: int) -> int:
    """Most one-token decode steps the sequences behind ``counts`` can take in ``num_free`` blocks.

    Each run of ``block_size`` steps opens one block per sequence, so whole cycles come
    first and the rest is a walk through one cycle's step offsets.
    """
    block_size = len(counts)
    cycles, left = divmod(num_free, sum(counts))
    for offset, opening in enumerate(counts):
        if opening > left:
            return cycles * block_size + offset
        left -= opening
    raise AssertionError("unreachable: left < sum(counts)")


def blocks_opened(counts: list[int], num_steps: int) -> int:
    """New blocks the sequences behind ``counts`` need in all over ``num_steps`` steps.

    A plain loop: compiled, it adds native ints (``sum`` is a generic call, and the slice
    a new list). No counts: nobody opens a block."""
    m = len(counts)
    if m == 0:
        return 0
    cycles, rest = divmod(num_steps, m)
    total = head = 0
    for i in range(m):
        c = counts[i]
        total += c
        if i < rest:
            head += c
    return cycles * total + head


def used_after_steps(counts: list[int], num_steps: int, used: int) -> list[int]:
    """Blocks in use now (``used``) and after each of ``num_steps`` one-token decode steps
    of the sequences behind ``counts`` (step ``t`` opens ``counts[t % len(counts)]``), as a
    list: ``num_steps + 1`` values (only ``used`` when ``counts`` is empty). A plain loop:
    compiled, cheaper than an ``itertools`` chain (a short decode run's log values)."""
    out = [used]
    m = len(counts)
    if m == 0:
        return out
    i = 0
    for _ in range(num_steps):
        used += counts[i]
        out.append(used)
        i += 1
        if i == m:
            i = 0
    return out


def used_sum_after_steps(counts: list[int], num_steps: int, used: int) -> tuple[int, int]:
    """The sum and the last of :func:`used_after_steps`'s ``num_steps + 1`` values, without
    the list (no openings: ``used`` every step). A plain loop over native ints, compiled."""
    total = last = used
    m = len(counts)
    if m == 0:
        return used * (num_steps + 1), used
    i = 0
    for _ in range(num_steps):
        last += counts[i]
        total += last
        i += 1
        if i == m:
            i = 0
    return total, last


def blocks_used_after_steps(counts: list[int], num_steps: int, used: int) -> np.ndarray:
    """:func:`used_after_steps` as an array (``num_steps + 1`` values)."""
    if num_steps < _CYCLE_STEPS or not counts:  # a few steps: numpy's calls cost more
        opened = used_after_steps(counts, num_steps, used)
        return np.fromiter(opened, np.int64, len(opened))
    # the same integers in a few array operations: after t steps, t // L whole cycles of
    # L = len(counts) steps (each opens sum(counts)) and the first t % L of one more
    within = np.fromiter(accumulate(counts, initial=used), np.int64, len(counts) + 1)
    cycles, offset = np.divmod(np.arange(num_steps + 1), len(counts))
    out = within[offset]
    cycles *= within[-1] - used
    out += cycles
    return out
