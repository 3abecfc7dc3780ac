"""A disaggregated deployment as the simulator runs it: two pools and the link between them.

Built from ``[disaggregated]`` by simulator/fleet/disagg_build.py; carried by
``ClusterSpec.disaggregated`` to simulator/fleet/disagg.py.
"""

from __future__ import annotations

from dataclasses import dataclass

from simulator.costs.base import CostModel
from simulator.policies import ContinuousPolicy
from simulator.specs.links import LinkSpec

# when the decode side reserves a prompt's KV blocks (simulator/fleet/disagg_reserve.py)
RESERVE_MODES = ("before_transfer", "before_prefill", "on_arrival")


@dataclass(frozen=True, slots=True)
class PoolSpec:
    """One pool of identical replicas (prefill or decode)."""

    gpu: str  # catalogue name of its GPU
    tp: int  # GPUs per replica
    replicas: int
    policy: ContinuousPolicy  # the continuous or chunked policy (disagg_build.py)
    cost: CostModel
    kv_blocks: int  # per replica
    router: str  # which replica of the pool gets each request (simulator/router.py)
    cost_source: str = ""  # which profile priced its steps ("": the [hardware] one's)

    @property
    def num_gpus(self) -> int:
        """GPUs in the pool."""
        return self.replicas * self.tp


@dataclass(frozen=True, slots=True)
class DisaggSpec:
    """Prefill pool, decode pool and the KV link (docs/fleet.md)."""

    prefill: PoolSpec
    decode: PoolSpec
    link: LinkSpec
    link_scope: str  # "replica": one link per prefill replica; "pool": one for all
    kv_bytes_per_token: int  # K and V of every layer, in the KV dtype (ModelSpec)
    decode_reserve: str = "before_transfer"  # one of RESERVE_MODES

    @property
    def lanes(self) -> int:
        """Links a transfer uses at once: each GPU sends its shard over its own, and the
        smaller tensor-parallel side bounds how many pairs there are."""
        return min(self.prefill.tp, self.decode.tp)

    def transfer_s(self, prompt_tokens: int) -> float:
        """Seconds a prompt's KV takes on a free link: latency + bytes / bandwidth."""
        return self.link.transfer_s(self.kv_bytes(prompt_tokens), self.lanes)

    def kv_bytes(self, prompt_tokens: int) -> int:
        """Bytes of KV a request's prompt moves."""
        return self.kv_bytes_per_token * prompt_tokens

    @property
    def num_links(self) -> int:
        """Links transfers queue on."""
        return self.prefill.replicas if self.link_scope == "replica" else 1


def blocks_by_replica(spec: DisaggSpec) -> dict[int, int]:
    """KV blocks of each replica by index (prefill first, then decode)."""
    p = spec.prefill
    return {i: p.kv_blocks if i < p.replicas else spec.decode.kv_blocks
            for i in range(p.replicas + spec.decode.replicas)}
