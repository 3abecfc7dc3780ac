"""Automatic prefix caching: KV blocks named by a chained hash, shared, evicted LRU.

:class:`PrefixBlockManager` is a :class:`~simulator.kvcache.BlockManager` that also knows
*which* tokens a full block holds (``prefix_cache_chain.block_hashes``), modelled on vLLM
v1's automatic prefix caching (vllm/v1/core/kv_cache_manager.py, block_pool.py,
kv_cache_utils.py, v0.10)::

    cache:  h0 -> refs 2   h1 -> refs 2   h2 -> refs 1   h5 -> refs 0 (free, cached)
    seq 7:  [h0 |h1 |h2 |b  ]     3 full blocks cached, the last one its own, partly full
    seq 8:  [h0 |h1 |b  ]         hit h0, h1 at admission: prefill starts at token 32
    LRU of cached-free blocks: h5 (oldest first; evicted when a fresh block is needed)

- Only full blocks are cached; a block is registered when its tokens are scheduled
  (vLLM: ``cache_blocks`` in ``allocate_slots``), so a request admitted in a later step
  finds it. If the same hash is cached already the new block stays private.
- :meth:`match` (a query) finds the longest run of a waiting request's leading blocks
  that are cached, at most ``(num_tokens - 1) // block_size`` blocks: a request always
  computes its last prompt token (vLLM ``get_computed_blocks``: ``max_cache_hit_length =
  num_tokens - 1``). :meth:`allocate` then takes references to those blocks; the caller
  starts the request's ``num_computed`` at the hit.
- A block held by nobody stays cached, counted free, in an LRU queue; :meth:`free`
  releases a request's blocks last first, so its first blocks are evicted last (vLLM
  ``free_blocks(reversed(...))``). A fresh block comes from the blocks that cache
  nothing first, then by evicting the oldest cached-free block. vLLM keeps one free queue
  of both kinds and so may evict a cached block while uncached ones sit further back; this
  model evicts only when it must (docs/prefix-caching.md).

Counts, as in the plain manager: ``used`` counts physical blocks held by some request
(a shared block once), ``num_free = num_blocks - used`` includes the cached-free ones, so
admission and the decode fast path read the same numbers. Invariants (:meth:`check`):
``used + len(lru) + plain free == num_blocks``; every cached block's ``refs`` equals the
requests listing it; the LRU holds exactly the cached blocks with ``refs == 0``.

For a mirror (the engine's own cache): ``listener.reused(request_id, hashes)`` is called
with the cached block hashes a request starts from when it is admitted, and
``listener.evicted(hash)`` for each block the manager evicts (:class:`PrefixEvents`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, cast

from simulator.prefix_cache_base import PrefixCacheBase
from simulator.prefix_cache_chain import block_hashes
from simulator.prefix_cache_stats import PrefixEvents
from simulator.workload.prefixes import PrefixIdentity

if TYPE_CHECKING:
    from simulator.policies.state import Sequence


class PrefixBlockManager(PrefixCacheBase):
    """A block manager with automatic prefix caching (see the module docstring; the half it
    shares with the run-based cache is in prefix_cache_base.py)."""

    __slots__ = ("listener",)

    def __init__(self, num_blocks: int, block_size: int, identity: PrefixIdentity,
                 listener: PrefixEvents | None = None, window_blocks: int = 0) -> None:
        super().__init__(num_blocks, block_size, identity, window_blocks)
        self.listener = listener  # _chain: every full block of the stream, own ones too

    @property
    def num_cached(self) -> int:
        """Blocks in the cache (held or free)."""
        return len(self._refs)

    @property
    def num_cached_free(self) -> int:
        """Cached blocks no request holds (free, evictable)."""
        return len(self._lru)

    def match(self, seq_id: int, num_tokens: int, stream_tokens: int) -> int:
        """Tokens of ``seq_id``'s first ``num_tokens`` found cached (a multiple of the block
        size, < ``num_tokens``); ``stream_tokens``: its prompt + output (what the chain
        covers). A query: :meth:`allocate` takes the blocks found."""
        chain = self._chain.get(seq_id)
        if chain is None:
            ids, lens = self.identity.of(seq_id)
            chain = block_hashes(ids, lens, seq_id, stream_tokens, self.block_size)
            self._chain[seq_id] = chain
        limit = min((num_tokens - 1) // self.block_size, len(chain))
        k = 0
        refs = self._refs
        while k < limit and chain[k] in refs:
            k += 1
        self._matched[seq_id] = (k, num_tokens)
        return k * self.block_size

    def prompt_chain(self, seq: Sequence) -> list[int]:
        """The hashes of the full blocks a match of ``seq``'s prompt may find (a query)."""
        ids, lens = self.identity.of(seq.request_id)
        chain = block_hashes(ids, lens, seq.request_id, seq.prompt_tokens + seq.output_tokens,
                             self.block_size)
        return chain[:(seq.prompt_tokens - 1) // self.block_size]

    def _take_hits(self, seq_id: int) -> None:
        k, num_tokens = self._matched.pop(seq_id, (0, 0))
        chain = self._chain.get(seq_id) or []
        refs = self._refs
        hits = chain[:k]
        if any(h not in refs for h in hits):  # the caller starts num_computed at the hit
            raise RuntimeError(f"seq {seq_id}: matched blocks were evicted before allocate; "
                               "call match again right before allocating")
        self._hold(hits)
        self._mine[seq_id] = list(range(k))
        self._done[seq_id] = k
        self._held[seq_id] = k
        self._count_hits(seq_id, k, num_tokens)
        if hits and self.listener is not None:
            self.listener.reused(seq_id, hits)

    def _register(self, seq_id: int, full_blocks: int) -> None:
        """Cache ``seq_id``'s chain blocks below ``full_blocks`` not yet cached."""
        done = self._done.get(seq_id)
        chain = self._chain.get(seq_id)
        if done is None or chain is None:
            return
        upto = min(full_blocks, len(chain))
        if upto <= done:
            return
        refs, mine = self._refs, self._mine[seq_id]
        for pos in range(done, upto):
            h = chain[pos]
            if h not in refs:  # a block cached already stays private (counted in used)
                refs[h] = 1
                mine.append(pos)
        self._done[seq_id] = upto

    def _make_room(self, num_blocks: int, seq_id: int | str) -> None:
        """Evict cached-free blocks, oldest first, until ``num_blocks`` fresh ones are free."""
        plain = self.num_blocks - self.used - len(self._lru)
        if num_blocks <= plain:
            return
        if num_blocks > self.num_blocks - self.used:
            raise RuntimeError(f"KV overcommit: seq {seq_id} needs {num_blocks}, "
                               f"{self.num_free} free")
        for _ in range(num_blocks - plain):
            key, _ = self._lru.popitem(last=False)
            h = cast(int, key)
            del self._refs[h]
            self.stats.evictions += 1
            if self.listener is not None:
                self.listener.evicted(h)

    def check(self) -> None:
        """Assert conservation, reference counts and the LRU (debug runs and property tests)."""
        holders: dict[int, int] = {}
        private = 0
        for seq_id, held in self._held.items():
            mine = self._mine.get(seq_id, [])
            assert len(mine) <= held, f"seq {seq_id} lists {len(mine)} cached of {held} blocks"
            private += held - len(mine)
            for pos in mine:
                h = self._chain[seq_id][pos]
                holders[h] = holders.get(h, 0) + 1
        assert {h: n for h, n in self._refs.items() if n} == holders, "refcounts != holders"
        assert set(self._lru) == {h for h, n in self._refs.items() if n == 0}, "LRU drifted"
        private += self.window_blocks * len(self._held)  # each request's window blocks
        assert self.used == private + len(holders), "KV blocks leaked"
        assert 0 <= self.used + len(self._lru) <= self.num_blocks, (
            f"KV used {self.used} + cached-free {len(self._lru)} of {self.num_blocks}")
