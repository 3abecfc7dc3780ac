"""What the two prefix caches share: admission against cached blocks, growth, the counters.

:class:`PrefixCacheBase` is the part of :class:`~simulator.prefix_cache.PrefixBlockManager`
(every block by hash: the specification, and the engine's) and
:class:`~simulator.prefix_cache_runs.PrefixRunManager` (a request's own blocks as runs: the
simulator's) that does not depend on how cached blocks are stored: shared blocks by
chained hash and reference count (``_refs``), a waiting request's lookup (``_matched``),
``can_allocate`` / ``allocate`` / ``take`` / ``settle`` around the storage's
``_take_hits``, ``_make_room`` and ``_register``, and the hit counters of a first
admission.
"""

from __future__ import annotations

from simulator.kvcache import BlockManager
from simulator.prefix_cache_stats import PrefixStats
from simulator.workload.prefixes import PrefixIdentity


class PrefixCacheBase(BlockManager):
    """The storage-independent half of a prefix-caching block manager (module docstring)."""

    caches_prefixes = True

    __slots__ = ("identity", "stats", "_refs", "_matched")

    def __init__(self, num_blocks: int, block_size: int, identity: PrefixIdentity) -> None:
        super().__init__(num_blocks, block_size)
        self.identity = identity
        self.stats = PrefixStats()
        self._refs: dict[int, int] = {}  # cached shared block hash -> requests holding it
        # waiting request -> (cached leading blocks found, its tokens when looked up)
        self._matched: dict[int, tuple[int, int]] = {}

    def is_cached(self, block_hash: int) -> bool:
        """Whether a block with this hash is in the cache (a mirror stores its KV then)."""
        return block_hash in self._refs

    def cached_prefix_blocks(self, chain: list[int]) -> int:
        """How many leading blocks of ``chain`` are cached here (a query: nothing taken)."""
        refs = self._refs
        k = 0
        while k < len(chain) and chain[k] in refs:
            k += 1
        return k

    def _active_hits(self, seq_id: int) -> int:
        """Blocks ``seq_id``'s match found that some request holds (they cost no free block)."""
        raise NotImplementedError

    def can_allocate(self, seq_id: int, num_tokens: int, reserve_blocks: int = 0) -> bool:
        """As :meth:`BlockManager.can_allocate`, counting a waiting request's hit blocks that
        others hold as already there."""
        extra = self.extra_for(seq_id, num_tokens)
        if seq_id not in self._held and seq_id in self._matched:
            extra -= self._active_hits(seq_id)
        return extra + reserve_blocks <= self.num_blocks - self.used

    def allocate(self, seq_id: int, num_tokens: int) -> None:
        """Grow ``seq_id`` to ``num_tokens`` tokens: first its matched blocks, by reference."""
        if seq_id not in self._held:
            self._take_hits(seq_id)
        held = self._held.get(seq_id, 0)
        extra = -(-num_tokens // self.block_size) - held
        if extra > 0:
            self._make_room(extra, seq_id)
            self._held[seq_id] = held + extra
            self.used += extra
        self._register(seq_id, num_tokens // self.block_size)

    def _take_hits(self, seq_id: int) -> None:
        """Take the blocks :meth:`match` found for ``seq_id`` (the storage's part)."""
        raise NotImplementedError

    def _make_room(self, num_blocks: int, seq_id: int | str) -> None:
        """Evict cached-free blocks until ``num_blocks`` fresh ones are free."""
        raise NotImplementedError

    def _register(self, seq_id: int, full_blocks: int) -> None:
        """Cache ``seq_id``'s blocks below ``full_blocks`` not yet cached."""
        raise NotImplementedError

    def _count_hits(self, seq_id: int, k: int, num_tokens: int) -> None:
        """The counters of an admission that starts from ``k`` cached blocks."""
        st = self.stats
        st.saved_tokens += k * self.block_size
        if num_tokens and seq_id not in st.cached_tokens:  # its first admission
            st.cached_tokens[seq_id] = k * self.block_size
            st.prompt_tokens += num_tokens
            st.prompt_blocks += -(-num_tokens // self.block_size)
            st.hit_tokens += k * self.block_size
            st.hit_blocks += k

    def _uncache_from(self, mine: list[int], chain: list[int], full: int) -> None:
        """Drop a request's cached shared blocks at chain positions ``full`` and on (``mine``:
        the positions it holds, increasing): a trim's rejected tokens were never right."""
        refs = self._refs
        while mine and mine[-1] >= full:
            h = chain[mine.pop()]
            refs[h] -= 1
            if refs[h] == 0:  # it leaves the cache
                del refs[h]
                self.used -= 1

    def take(self, num_blocks: int) -> None:
        """As :meth:`BlockManager.take`, evicting cached-free blocks when it must."""
        self._make_room(num_blocks, "decoding")
        self.used += num_blocks

    def settle(self, seq_id: int, num_tokens: int) -> None:
        """As :meth:`BlockManager.settle`; the full blocks among them join the cache."""
        self._held[seq_id] = -(-num_tokens // self.block_size)
        self._register(seq_id, num_tokens // self.block_size)
