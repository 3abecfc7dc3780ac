"""Automatic prefix caching with a request's own blocks kept as runs: the simulator's cache.

:class:`~simulator.prefix_cache.PrefixBlockManager` names every cached block by its chained
hash and keeps one reference count and one LRU entry per block. That is exact and simple,
and it is the specification this class is checked against (tests/test_prefix_cache_runs.py
drives both with the same operations and compares every answer and counter). But at
SGLang's page size of one token every token is a block: 2,000 requests of a thousand
tokens cost 2M hash, dict and LRU operations, 80% of a simulation's time (stop 43).

What makes a cheaper form exact: a block holding any of a request's *own* tokens (past its
shared segments, ``prefix_cache_chain``) has a hash chained over ``(OWN, request id)``, so
no other request can ever find it. Only the request itself can, re-admitted after a
preemption. So its own cached blocks need no hashes and no reference counts, only
positions. This class keeps them as runs:

- a running request holds its own cached blocks as position ranges ``[lo, hi)``;
- when it is freed each range becomes one :class:`_Run` entry of the LRU, in the order the
  per-block manager would have queued its blocks (last block first), and an eviction takes
  blocks off the top of the oldest entry (``hi`` falls), as the per-block LRU would evict
  them one by one;
- re-admitted, the request finds its free runs from its first own position on (``match``)
  and takes them back from the bottom (``lo`` rises); a run it does not take whole stays
  where it was in the LRU.

Blocks of shared segments are kept exactly as the per-block manager keeps them (hash,
reference count, one LRU entry each). The counts, hits, evictions and admission answers
are the per-block manager's, operation for operation. Not here: the mirror events
(``listener``: the engine's KV store needs every evicted block's hash, so the engine keeps
the per-block manager) and a preempted request's own blocks in ``prompt_chain`` (the router
asks only for arriving requests, which have none cached).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, cast

from simulator.prefix_cache_base import PrefixCacheBase
from simulator.prefix_cache_chain import block_hashes
from simulator.workload.prefixes import PrefixIdentity

if TYPE_CHECKING:
    from simulator.policies.state import Sequence


class _Run:
    """Free cached own blocks ``lo .. hi - 1`` of request ``seq``: one LRU entry."""

    __slots__ = ("seq", "lo", "hi")

    def __init__(self, seq: int, lo: int, hi: int) -> None:
        self.seq = seq
        self.lo = lo
        self.hi = hi


class PrefixRunManager(PrefixCacheBase):
    """A prefix-caching block manager with own blocks as runs (see the module docstring; the
    half it shares with the per-block cache is in prefix_cache_base.py)."""

    __slots__ = ("_full", "_own", "_free_runs", "_own_cached", "_cached_free")

    def __init__(self, num_blocks: int, block_size: int, identity: PrefixIdentity,
                 window_blocks: int = 0) -> None:
        super().__init__(num_blocks, block_size, identity, window_blocks)
        # here _chain holds the shared blocks' hashes only, _mine their positions, and the
        # LRU queues _Run entries of own blocks beside shared hashes
        self._full: dict[int, int] = {}  # request -> full blocks of its stream
        self._own: dict[int, list[list[int]]] = {}  # request -> own cached runs it holds
        self._free_runs: dict[int, list[_Run]] = {}  # request -> its own runs in the LRU
        self._own_cached = 0  # own blocks in the cache (held or free)
        self._cached_free = 0  # cached blocks held by none (shared and own)

    @property
    def num_cached(self) -> int:
        """Blocks in the cache (held or free)."""
        return len(self._refs) + self._own_cached

    @property
    def num_cached_free(self) -> int:
        """Cached blocks no request holds (free, evictable)."""
        return self._cached_free

    def _shared_chain(self, seq_id: int, stream_tokens: int) -> list[int]:
        """Hashes of ``seq_id``'s blocks that hold segment tokens only (as block_hashes)."""
        ids, lens = self.identity.of(seq_id)
        seg_tokens = int(lens.sum()) if len(lens) else 0
        return block_hashes(ids, lens, seq_id, min(stream_tokens, seg_tokens), self.block_size)

    def match(self, seq_id: int, num_tokens: int, stream_tokens: int) -> int:
        """Tokens of ``seq_id``'s first ``num_tokens`` found cached (a multiple of the block
        size, < ``num_tokens``); ``stream_tokens``: its prompt + output. A query."""
        chain = self._chain.get(seq_id)
        if chain is None:
            chain = self._shared_chain(seq_id, stream_tokens)
            self._chain[seq_id] = chain
            self._full[seq_id] = stream_tokens // self.block_size
        limit = min((num_tokens - 1) // self.block_size, self._full[seq_id])
        k = 0
        refs = self._refs
        shared = min(limit, len(chain))
        while k < shared and chain[k] in refs:
            k += 1
        if k == len(chain) and k < limit:
            k = min(self._free_top(seq_id, k), limit)
        self._matched[seq_id] = (k, num_tokens)
        return k * self.block_size

    def _free_top(self, seq_id: int, pos: int) -> int:
        """The end of the free own runs of ``seq_id`` that cover ``pos, pos + 1, ...``."""
        runs = self._free_runs.get(seq_id)
        if not runs:
            return pos
        moved = True
        while moved:
            moved = False
            for run in runs:
                if run.lo <= pos < run.hi:
                    pos = run.hi
                    moved = True
        return pos

    def prompt_chain(self, seq: Sequence) -> list[int]:
        """The hashes of the shared blocks a match of ``seq``'s prompt may find (a query; an
        arriving request has no own block cached)."""
        chain = self._shared_chain(seq.request_id, seq.prompt_tokens + seq.output_tokens)
        return chain[:(seq.prompt_tokens - 1) // self.block_size]

    def _take_hits(self, seq_id: int) -> None:
        k, num_tokens = self._matched.pop(seq_id, (0, 0))
        chain = self._chain.get(seq_id) or []
        refs = self._refs
        shared = min(k, len(chain))
        hits = chain[:shared]
        own = k - shared
        if any(h not in refs for h in hits) or (
                own and self._free_top(seq_id, shared) < k):
            raise RuntimeError(f"seq {seq_id}: matched blocks were evicted before allocate; "
                               "call match again right before allocating")
        self._cached_free -= self._hold(hits)
        self._own[seq_id] = []
        if own:
            self._take_own(seq_id, shared, k)
            self._own[seq_id].append([shared, k])
        self._mine[seq_id] = list(range(shared))
        self._done[seq_id] = k
        self._held[seq_id] = k
        self._count_hits(seq_id, k, num_tokens)

    def _take_own(self, seq_id: int, lo: int, hi: int) -> None:
        """Take ``seq_id``'s free own blocks ``lo .. hi - 1`` back from the LRU (they are the
        bottom of its free runs: its first own position is ``lo``)."""
        runs = self._free_runs[seq_id]
        keep: list[_Run] = []
        for run in runs:
            if run.hi <= hi and run.lo >= lo:  # taken whole
                del self._lru[run]
            elif run.lo < hi and run.hi > hi:  # its bottom taken: the rest stays queued
                run.lo = hi
                keep.append(run)
            else:
                keep.append(run)
        if keep:
            self._free_runs[seq_id] = keep
        else:
            del self._free_runs[seq_id]
        self._cached_free -= hi - lo
        self.used += hi - lo

    def _register(self, seq_id: int, full_blocks: int) -> None:
        """Cache ``seq_id``'s blocks below ``full_blocks`` not yet cached."""
        done = self._done.get(seq_id)
        chain = self._chain.get(seq_id)
        if done is None or chain is None:
            return
        upto = min(full_blocks, self._full[seq_id])
        if upto <= done:
            return
        refs, mine = self._refs, self._mine[seq_id]
        for pos in range(done, min(upto, len(chain))):
            h = chain[pos]
            if h not in refs:  # a block cached already stays private (counted in used)
                refs[h] = 1
                mine.append(pos)
        lo = max(done, len(chain))
        if lo < upto:
            self._register_own(seq_id, lo, upto)
        self._done[seq_id] = upto

    def _register_own(self, seq_id: int, lo: int, hi: int) -> None:
        """Cache own positions ``lo .. hi - 1``, except those whose earlier copy is still
        free in the cache (they stay private, as the per-block manager keeps them)."""
        cuts = sorted((r.lo, r.hi) for r in self._free_runs.get(seq_id, ()) if
                      r.lo < hi and r.hi > lo)
        own = self._own[seq_id]
        pos = lo
        for a, b in (*cuts, (hi, hi)):
            if a > pos:
                end = min(a, hi)
                if own and own[-1][1] == pos:
                    own[-1][1] = end
                else:
                    own.append([pos, end])
                self._own_cached += end - pos
            pos = max(pos, b)
            if pos >= hi:
                break

    def _make_room(self, num_blocks: int, seq_id: int | str) -> None:
        """Evict cached-free blocks, oldest first, until ``num_blocks`` fresh ones are free."""
        plain = self.num_blocks - self.used - self._cached_free
        if num_blocks <= plain:
            return
        if num_blocks > self.num_blocks - self.used:
            raise RuntimeError(f"KV overcommit: seq {seq_id} needs {num_blocks}, "
                               f"{self.num_free} free")
        need = num_blocks - plain
        lru = self._lru
        while need > 0:
            key = next(iter(lru))  # the oldest
            if isinstance(key, _Run):  # off its top; what is left stays oldest
                gone = min(need, key.hi - key.lo)
                key.hi -= gone
                self._own_cached -= gone
                if key.hi == key.lo:
                    del lru[key]
                    runs = self._free_runs[key.seq]
                    runs.remove(key)
                    if not runs:
                        del self._free_runs[key.seq]
            else:
                del lru[key]
                del self._refs[cast(int, key)]
                gone = 1
            need -= gone
            self._cached_free -= gone
            self.stats.evictions += gone

    def _mine_count(self, seq_id: int) -> int:
        """Cached blocks ``seq_id`` holds (shared and own)."""
        return len(self._mine[seq_id]) + sum(b - a for a, b in self._own[seq_id])

    def _drop_own(self, seq_id: int, full: int) -> None:
        """A trim: own blocks from ``full`` on leave the cache (held by this request alone)."""
        own = self._own[seq_id]
        while own and own[-1][1] > full:
            run = own[-1]
            cut = run[1] - max(run[0], full)
            run[1] -= cut
            self._own_cached -= cut
            self.used -= cut
            if run[1] <= run[0]:
                own.pop()

    def _release_own(self, seq_id: int) -> int:
        """A free: each own run becomes one LRU entry, the highest first."""
        own = self._own.pop(seq_id)
        self._full.pop(seq_id, None)
        if not own:
            return 0
        runs = self._free_runs.setdefault(seq_id, [])
        released = 0
        for lo, hi in reversed(own):
            run = _Run(seq_id, lo, hi)
            self._lru[run] = None
            runs.append(run)
            released += hi - lo
        return released

    def _freed(self, released: int) -> None:
        self._cached_free += released

    def check(self) -> None:
        """Assert conservation, reference counts, the runs and the LRU (property tests)."""
        holders: dict[int, int] = {}
        private = 0
        own_held = 0
        for seq_id, held in self._held.items():
            if seq_id not in self._mine:
                private += held
                continue
            count = self._mine_count(seq_id)
            assert count <= held, f"seq {seq_id} lists {count} cached of {held} blocks"
            private += held - count
            own_held += count - len(self._mine[seq_id])
            for pos in self._mine[seq_id]:
                h = self._chain[seq_id][pos]
                holders[h] = holders.get(h, 0) + 1
        assert {h: n for h, n in self._refs.items() if n} == holders, "refcounts != holders"
        shared_free = {k for k in self._lru if not isinstance(k, _Run)}
        assert shared_free == {h for h, n in self._refs.items() if n == 0}, "LRU drifted"
        runs = [k for k in self._lru if isinstance(k, _Run)]
        assert all(r.hi > r.lo for r in runs), "an empty run is queued"
        assert sorted(map(id, runs)) == sorted(
            id(r) for rs in self._free_runs.values() for r in rs), "free runs drifted"
        own_free = sum(r.hi - r.lo for r in runs)
        assert self._cached_free == len(shared_free) + own_free, "free count drifted"
        assert self._own_cached == own_held + own_free, "own count drifted"
        private += self.window_blocks * len(self._held)  # each request's window blocks
        assert self.used == private + len(holders) + own_held, "KV blocks leaked"
        assert 0 <= self.used + self._cached_free <= self.num_blocks, (
            f"KV used {self.used} + cached-free {self._cached_free} of {self.num_blocks}")
