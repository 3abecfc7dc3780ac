"""What the two prefix caches share: admission against cached blocks, growth, the counters.

:class:`PrefixCacheBase` is the part of :class:`~simulator.prefix_cache.PrefixBlockManager`
(every block by hash: the specification, and the engine's) and
:class:`~simulator.prefix_cache_runs.PrefixRunManager` (a request's own blocks as runs: the
simulator's) that does not depend on how cached blocks are stored: shared blocks by
chained hash and reference count (``_refs``), each request's chain of shared hashes and the
positions it holds cached (``_chain``, ``_mine``, ``_done``), a waiting request's lookup
(``_matched``), the queue of cached blocks held by none (``_lru``), ``can_allocate`` /
``allocate`` / ``take`` / ``settle`` / ``trim`` / ``free`` / ``blocks_in_use`` around the
storage's ``_take_hits``, ``_make_room``, ``_register`` and its own-block hooks
(``_mine_count``, ``_drop_own``, ``_release_own``, ``_freed``), and the hit counters of a
first admission.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import TYPE_CHECKING

from simulator.kvcache import BlockManager
from simulator.prefix_cache_stats import PrefixStats
from simulator.workload.prefixes import PrefixIdentity

if TYPE_CHECKING:
    from simulator.policies.state import Sequence


class PrefixCacheBase(BlockManager):
    """The storage-independent half of a prefix-caching block manager (module docstring)."""

    caches_prefixes = True

    __slots__ = ("identity", "stats", "_refs", "_matched", "_lru", "_chain", "_mine", "_done")

    def __init__(self, num_blocks: int, block_size: int, identity: PrefixIdentity,
                 window_blocks: int = 0) -> None:
        super().__init__(num_blocks, block_size, window_blocks)
        self.identity = identity
        self.stats = PrefixStats()
        self._refs: dict[int, int] = {}  # cached shared block hash -> requests holding it
        # waiting request -> (cached leading blocks found, its tokens when looked up)
        self._matched: dict[int, tuple[int, int]] = {}
        # cached blocks held by none, oldest first (a shared block's hash; the run-based
        # cache also queues runs of a request's own blocks)
        self._lru: OrderedDict[object, None] = OrderedDict()
        self._chain: dict[int, list[int]] = {}  # request -> hashes of its chain's blocks
        self._mine: dict[int, list[int]] = {}  # request -> chain positions of the cached
        # blocks it holds, increasing
        self._done: dict[int, int] = {}  # request -> chain blocks already registered or skipped

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

    def prompt_chain(self, seq: Sequence) -> list[int]:
        """The hashes of the blocks a match of ``seq``'s prompt may find (a query)."""
        raise NotImplementedError

    def _active_hits(self, seq_id: int) -> int:
        """Blocks ``seq_id``'s match found that some request holds (they cost no free block):
        its chain's blocks only (a run-based cache's own blocks past the chain are held by
        no other request)."""
        chain = self._chain[seq_id]
        k = min(self._matched[seq_id][0], len(chain))
        refs = self._refs
        return sum(1 for h in chain[:k] if refs.get(h, 0) > 0) if k else 0

    def _hold(self, hits: list[int]) -> int:
        """A reference on each matched block of ``hits`` (one held by none leaves the LRU
        and counts as used); how many were held by none."""
        refs, revived = self._refs, 0
        for h in hits:
            n = refs[h]
            if n == 0:
                del self._lru[h]
                self.used += 1
                revived += 1
            refs[h] = n + 1
        return revived

    def can_allocate(self, seq_id: int, num_tokens: int, reserve_blocks: int = 0) -> bool:
        """As :meth:`BlockManager.can_allocate`, counting a waiting request's hit blocks that
        others hold as already there."""
        extra = self.extra_for(seq_id, num_tokens)
        if seq_id not in self._held and seq_id in self._matched:
            extra -= self._active_hits(seq_id)
        return extra + reserve_blocks <= self.num_blocks - self.used

    def allocate(self, seq_id: int, num_tokens: int) -> None:
        """Grow ``seq_id`` to ``num_tokens`` tokens: first its matched blocks, by reference
        (and its window's blocks, private: ``window_blocks``)."""
        window = 0
        if seq_id not in self._held:
            self._take_hits(seq_id)
            window = self.window_blocks
        held = self._held.get(seq_id, 0)
        extra = -(-num_tokens // self.block_size) - held
        extra = extra if extra > 0 else 0
        if extra + window > 0:
            self._make_room(extra + window, seq_id)
            self._held[seq_id] = held + extra
            self.used += extra + window
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

    def _mine_count(self, seq_id: int) -> int:
        """Cached blocks ``seq_id`` holds (its chain positions; the run-based cache adds its
        own-block runs)."""
        return len(self._mine[seq_id])

    def _drop_own(self, seq_id: int, full: int) -> None:
        """A trim: drop ``seq_id``'s own cached blocks from ``full`` on (none kept apart here)."""

    def _release_own(self, seq_id: int) -> int:
        """A free: queue ``seq_id``'s own cached blocks (its last ones, so queued first);
        how many (none kept apart here)."""
        return 0

    def _freed(self, released: int) -> None:
        """A free queued ``released`` blocks (the run-based cache counts them)."""

    def trim(self, seq_id: int, num_tokens: int) -> None:
        """As :meth:`BlockManager.trim` (a speculative step's rejected positions): blocks from
        the first one not full of ``num_tokens`` tokens on leave the cache."""
        mine = self._mine.get(seq_id)
        if mine is None:
            super().trim(seq_id, num_tokens)
            return
        held = self._held.get(seq_id, 0)
        keep = -(-num_tokens // self.block_size)
        full = num_tokens // self.block_size
        private_before = held - self._mine_count(seq_id)
        self._drop_own(seq_id, full)
        self._uncache_from(mine, self._chain[seq_id], full)
        self._done[seq_id] = min(self._done[seq_id], full)
        held = min(held, keep)
        self._held[seq_id] = held
        self.used += (held - self._mine_count(seq_id)) - private_before

    def free(self, seq_id: int) -> None:
        """Return ``seq_id``'s blocks: its cached ones to the LRU (last block first) when no
        one else holds them, the rest to the plain free blocks."""
        if seq_id in self._held:
            self.used -= self.window_blocks
        held = self._held.pop(seq_id, 0)
        self._matched.pop(seq_id, None)
        if seq_id not in self._mine:
            self.used -= held
            return
        self._register(seq_id, held - 1)  # every block but the last is full
        count = self._mine_count(seq_id)
        released = self._release_own(seq_id)
        mine = self._mine.pop(seq_id)
        del self._done[seq_id]
        chain = self._chain.pop(seq_id, [])
        refs, lru = self._refs, self._lru
        for pos in reversed(mine):
            h = chain[pos]
            n = refs[h] - 1
            refs[h] = n
            if n == 0:
                lru[h] = None
                released += 1
        self._freed(released)
        self.used -= held - count + released

    def blocks_in_use(self, seq_ids: list[int]) -> int:
        """Blocks the sequences ``seq_ids`` hold between them (a shared block once)."""
        private = 0
        own = 0
        cached: set[int] = set()
        for i in seq_ids:
            if i not in self._held:
                continue
            held = self._held[i]
            private += self.window_blocks
            mine = self._mine.get(i)
            if mine is None:
                private += held
                continue
            count = self._mine_count(i)
            private += held - count
            own += count - len(mine)
            chain = self._chain[i]
            cached.update(chain[pos] for pos in mine)
        return private + len(cached) + own

    def take(self, num_blocks: int) -> None:
        """As :meth:`BlockManager.take`, evicting cached-free blocks when it must."""
        self._make_room(num_blocks, "decoding")
        self.used += num_blocks

    def settle(self, seq_id: int, num_tokens: int) -> None:
        """As :meth:`BlockManager.settle`; the full blocks among them join the cache."""
        self._held[seq_id] = -(-num_tokens // self.block_size)
        self._register(seq_id, num_tokens // self.block_size)
