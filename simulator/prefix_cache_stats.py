"""What a prefix cache counts (:class:`PrefixStats`) and tells a mirror (:class:`PrefixEvents`).

See simulator/prefix_cache.py for the cache, simulator/prefix_cache_run.py for the summary
keys made of these counters.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol


class PrefixEvents(Protocol):
    """What a mirror of the cache (the engine's KV) is told."""

    def reused(self, request_id: int, hashes: list[int]) -> None: ...

    def evicted(self, block_hash: int) -> None: ...


@dataclass(slots=True)
class PrefixStats:
    """Counters of one replica's prefix cache (summed over replicas for the summary)."""

    prompt_tokens: int = 0  # tokens of requests at their first admission (their prompts)
    hit_tokens: int = 0  # of those, found cached (the requests' cached_tokens, summed)
    prompt_blocks: int = 0  # blocks_for(prompt) at first admission
    hit_blocks: int = 0  # of those, found cached
    saved_tokens: int = 0  # prefill tokens skipped, every admission (re-admissions too)
    evictions: int = 0  # cached blocks evicted for a fresh block
    cached_tokens: dict[int, int] = field(default_factory=dict)  # request -> first hit
