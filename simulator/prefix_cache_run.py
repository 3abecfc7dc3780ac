"""Prefix caching in a simulation: the block managers, their counters, the summary keys.

With ``[kv] prefix_caching = true`` each replica gets a
:class:`~simulator.prefix_cache_runs.PrefixRunManager` over the workload's prefix identity
(the engine, whose KV store mirrors the cache block by block, the per-block
:class:`~simulator.prefix_cache.PrefixBlockManager` it is checked against); without it the
plain counting :class:`~simulator.kvcache.BlockManager`, untouched. The
summary keys (docs/metrics.md, docs/prefix-caching.md):

``prefix_hit_rate``         cached prompt tokens / prompt tokens, each request counted at
                            its first admission (vLLM's prefix cache hit rate)
``prefix_block_hit_rate``   cached blocks / blocks_for(prompt), likewise
``prefix_cached_tokens``    the cached prompt tokens (the records' ``cached_tokens``, summed)
``prefill_tokens_saved``    prefill tokens not computed thanks to a hit, re-admissions
                            after a preemption included
``prefix_evictions``        cached blocks evicted to make room for fresh ones
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from simulator.kvcache import BlockManager
from simulator.prefix_cache import PrefixBlockManager
from simulator.prefix_cache_base import PrefixCacheBase
from simulator.prefix_cache_runs import PrefixRunManager
from simulator.prefix_cache_stats import PrefixStats
from simulator.workload.prefixes import PrefixIdentity


def block_manager(num_blocks: int, block_size: int, identity: PrefixIdentity | None, *,
                  mirrored: bool = False, window_blocks: int = 0) -> BlockManager:
    """A replica's KV manager: prefix caching over ``identity``, or plain counting (None).
    ``mirrored``: a KV store mirrors the cache block by block (the engine's), so every
    block keeps its hash (:class:`PrefixBlockManager`). ``window_blocks``: the blocks each
    request's sliding-window layers hold in the same pool (``BlockManager``)."""
    if identity is None:
        return BlockManager(num_blocks, block_size, window_blocks)
    if mirrored:
        return PrefixBlockManager(num_blocks, block_size, identity,
                                  window_blocks=window_blocks)
    return PrefixRunManager(num_blocks, block_size, identity, window_blocks)


def combine(managers: list[BlockManager]) -> PrefixStats | None:
    """The replicas' prefix-cache counters summed (None when none caches prefixes)."""
    parts = [m.stats for m in managers if isinstance(m, PrefixCacheBase)]
    if not parts:
        return None
    out = PrefixStats()
    for st in parts:
        out.prompt_tokens += st.prompt_tokens
        out.hit_tokens += st.hit_tokens
        out.prompt_blocks += st.prompt_blocks
        out.hit_blocks += st.hit_blocks
        out.saved_tokens += st.saved_tokens
        out.evictions += st.evictions
        out.cached_tokens.update(st.cached_tokens)
    return out


def with_cached_tokens(requests: pd.DataFrame, stats: PrefixStats) -> pd.DataFrame:
    """``requests`` with ``cached_tokens``: prompt tokens found cached at each request's
    first admission (0 for one never admitted)."""
    hits = stats.cached_tokens
    ids = requests["request_id"].to_numpy(np.int64).tolist()
    col = np.fromiter((hits.get(i, 0) for i in ids), np.int64, len(ids))
    return requests.assign(cached_tokens=col)


def prefix_summary(stats: PrefixStats) -> dict[str, Any]:
    """The summary keys of the module docstring."""
    return {
        "prefix_hit_rate": stats.hit_tokens / stats.prompt_tokens if stats.prompt_tokens
        else 0.0,
        "prefix_block_hit_rate": stats.hit_blocks / stats.prompt_blocks if stats.prompt_blocks
        else 0.0,
        "prefix_cached_tokens": stats.hit_tokens,
        "prefill_tokens_saved": stats.saved_tokens,
        "prefix_evictions": stats.evictions,
    }
