"""The prefix-caching block manager on hand-built chains: hits, refcounts, LRU eviction."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from simulator.kvcache import BlockManager
from simulator.prefix_cache import PrefixBlockManager
from simulator.prefix_cache_chain import block_hashes
from simulator.workload.prefixes import PrefixIdentity, PrefixSegments


class Mirror:
    """A mirror of the cache that writes down what the manager tells it."""

    def __init__(self) -> None:
        self.reused_list: list[tuple[int, list[int]]] = []
        self.evicted_list: list[int] = []

    def reused(self, request_id: int, hashes: list[int]) -> None:
        self.reused_list.append((request_id, hashes))

    def evicted(self, block_hash: int) -> None:
        self.evicted_list.append(block_hash)


def identity(rows: dict[int, list[tuple[int, int]]]) -> PrefixIdentity:
    """Request id -> its segments [(id, tokens)], as a workload would give them."""
    ids, lens, start, stop = [], [], [], []
    for segs in rows.values():
        start.append(len(ids))
        ids += [i for i, _ in segs]
        lens += [n for _, n in segs]
        stop.append(len(ids))
    table = pd.DataFrame({"request_id": list(rows), "segments_start": start,
                          "segments_stop": stop})
    return PrefixIdentity(table, PrefixSegments(np.array(ids, np.int64),
                                                np.array(lens, np.int64)))


# Block size 4. Requests 0 and 1 start with the same 14-token segment 7: blocks 0-2
# (tokens 0..11) are the same content, block 3 mixes segment 7's last 2 tokens with each
# request's own tokens, so it differs.
IDENT = identity({0: [(7, 14)], 1: [(7, 14)], 2: []})


def test_two_requests_share_three_full_blocks_and_not_the_partial_one() -> None:
    a = block_hashes(np.array([7]), np.array([14]), 0, 20, 4)
    b = block_hashes(np.array([7]), np.array([14]), 1, 20, 4)
    assert len(a) == len(b) == 5  # 20 // 4 full blocks
    assert a[:3] == b[:3] and a[3] != b[3] and a[4] != b[4]
    assert block_hashes(np.array([7]), np.array([14]), 0, 13, 4) == a[:3]  # a chain's prefix


def test_hit_refcounts_and_free_blocks() -> None:
    mirror = Mirror()
    kv = PrefixBlockManager(10, 4, IDENT, mirror)
    assert kv.match(0, 14, 16) == 0  # nothing cached yet
    kv.allocate(0, 14)  # 4 blocks; 14 // 4 = 3 full ones join the cache
    assert (kv.used, kv.num_cached) == (4, 3)
    assert kv.match(1, 20, 24) == 12  # 3 full blocks; the 4th block differs
    # 5 blocks for 20 tokens, 3 of them held by request 0 already: 2 fresh ones
    assert kv.can_allocate(1, 20, reserve_blocks=4) and not kv.can_allocate(1, 20, 5)
    kv.allocate(1, 20)
    assert kv.used == 4 + 2 and kv.blocks_in_use([0, 1]) == 6
    assert kv.num_cached == 5  # request 1's blocks 3 and 4 (20 // 4 = 5 full)
    a = block_hashes(np.array([7]), np.array([14]), 0, 16, 4)
    assert mirror.reused_list == [(1, a[:3])]
    kv.check()
    kv.free(0)  # its own partial block goes back; the shared three stay with request 1
    assert (kv.used, kv.num_cached_free) == (5, 0)
    kv.free(1)
    assert (kv.used, kv.num_cached_free, kv.num_free) == (0, 5, 10)
    kv.check()
    assert kv.stats.cached_tokens == {0: 0, 1: 12}
    assert (kv.stats.prompt_tokens, kv.stats.hit_tokens) == (14 + 20, 12)
    assert (kv.stats.prompt_blocks, kv.stats.hit_blocks) == (4 + 5, 3)


def test_lru_evicts_the_oldest_freed_last_block_first() -> None:
    mirror = Mirror()
    kv = PrefixBlockManager(6, 4, IDENT, mirror)
    kv.match(0, 14, 16)
    kv.allocate(0, 14)
    kv.match(1, 20, 24)
    kv.allocate(1, 20)
    kv.free(0)
    kv.free(1)  # LRU, oldest first: request 1's blocks last to first: 4, 3, 2, 1, 0
    b = block_hashes(np.array([7]), np.array([14]), 1, 20, 4)
    assert kv.num_cached_free == 5 and kv.num_free == 6  # 1 plain free block
    kv.match(2, 12, 12)
    kv.allocate(2, 12)  # 3 fresh blocks: the plain one, then evict b[4], b[3]
    assert mirror.evicted_list == [b[4], b[3]] and kv.stats.evictions == 2
    assert kv.match(1, 20, 24) == 12  # blocks 0-2 survive
    kv.check()


def test_a_request_always_computes_its_last_token() -> None:
    kv = PrefixBlockManager(10, 4, identity({0: [(3, 16)], 1: [(3, 16)]}))
    kv.match(0, 16, 17)
    kv.allocate(0, 16)
    assert kv.match(1, 16, 17) == 12  # all 4 blocks cached, but (16 - 1) // 4 = 3 reused
    kv.allocate(1, 16)
    kv.check()  # the recomputed 4th block stays private: cached once
    assert kv.used == 5 and kv.num_cached == 4


def test_preempted_blocks_stay_cached_and_are_found_again() -> None:
    kv = PrefixBlockManager(8, 4, identity({0: []}))
    kv.match(0, 10, 12)
    kv.allocate(0, 10)
    kv.settle(0, 11)
    kv.free(0)  # preempted: blocks 0 and 1 (full) stay cached, free
    assert (kv.used, kv.num_cached_free) == (0, 2)
    assert kv.match(0, 11, 12) == 8
    kv.allocate(0, 11)
    assert kv.stats.saved_tokens == 8 and kv.stats.cached_tokens == {0: 0}
    kv.check()


def test_trim_takes_rejected_positions_out_of_the_cache() -> None:
    kv = PrefixBlockManager(8, 4, identity({0: []}))
    kv.match(0, 6, 20)
    kv.allocate(0, 13)  # 4 blocks, 3 full ones cached
    kv.trim(0, 7)  # only 7 tokens are right: blocks 0 stays, 1 (partial) is kept private
    assert (kv.held(0), kv.num_cached, kv.used) == (2, 1, 2)
    kv.check()


def test_the_plain_manager_finds_nothing() -> None:
    kv = BlockManager(4, 4)
    assert not kv.caches_prefixes and kv.match(0, 10, 12) == 0


def test_overcommit_is_refused() -> None:
    kv = PrefixBlockManager(2, 4, identity({0: []}))
    kv.match(0, 8, 9)
    with pytest.raises(RuntimeError, match="KV overcommit"):
        kv.allocate(0, 12)
