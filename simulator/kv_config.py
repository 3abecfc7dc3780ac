"""``[kv]``: how a replica carves its memory into KV blocks (the scenario's section).

Capacity follows vLLM: the GPU memory we may use (``memory x utilisation``, per GPU
times tensor-parallel degree) minus the weights and a fixed reserve for activations and
the CUDA context, divided into blocks of ``block_size`` tokens for every layer.

Kept apart from :mod:`simulator.kvcache` (the block manager, compiled by
:mod:`simulator.accel`): a compiled class checks its attributes' types as they are set,
so a wrong ``[kv]`` value would fail there with a bare TypeError before this class's own
check names the field.
"""

from __future__ import annotations

from dataclasses import dataclass

from simulator.errors import CapacityError
from simulator.scenario_fields import check_fields, spec
from simulator.specs.model_spec import ModelSpec

MEMORY_SHARES = ("total", "free")  # what [kv] gpu_memory_utilization is a share of


@dataclass(slots=True, frozen=True)
class KVCacheConfig:
    """How a replica carves its memory into KV blocks."""

    block_size: int = spec(16, unit="tokens per block", low=1)  # vLLM's default
    # fraction of each GPU's memory the engine may use (of what, memory_share says)
    gpu_memory_utilization: float = spec(0.9, low=0, low_open=True, high=1)
    # what that fraction is of: "total" memory, weights and reserve then taken out (vLLM's
    # gpu_memory_utilization, SGLang's mem_fraction_static), or the memory still "free"
    # after the weights and reserve (TensorRT-LLM's free_gpu_memory_fraction)
    memory_share: str = spec("total", choices=MEMORY_SHARES)
    # per GPU: activations, CUDA graphs, context (not for KV)
    reserve_gb: float = spec(2.0, unit="GB", low=0)
    num_blocks: int | None = spec(None, unit="blocks", low=1)  # overrides the derived capacity
    # reuse the KV of cached prompt prefixes (vLLM enable_prefix_caching; prefix_cache.py)
    prefix_caching: bool = spec(False)
    # Sliding-window layers' cache set aside up front, in tokens a full-layer token: SGLang's
    # --swa-full-tokens-ratio (0.8), whose window layers get a pool of their own that size.
    # 0: they take blocks as needed from the one pool (vLLM) or a pool sized by the window
    # (TensorRT-LLM), and the pool's tokens are the full layers' (ModelSpec.kv_bytes_per_token)
    window_share: float = spec(0.0, low=0, high=1)

    def __post_init__(self) -> None:
        check_fields(self, "kv")

    def pool_bytes_per_token(self, model: ModelSpec, kv_dtype: str, tp: int = 1) -> float:
        """Memory a token of the pool takes on ``tp`` tensor-parallel GPUs together: the full
        layers' KV, plus ``window_share`` of a token of the sliding-window layers' (none
        without them); times tp / min(tp, KV heads), as a KV head is copied to every GPU
        once the GPUs outnumber the heads (Qwen3-235B's 4 at TP 8: twice; latent
        attention's one latent: every GPU holds the whole cache)."""
        per_token = (model.kv_bytes_per_token(kv_dtype)
                     + self.window_share * model.window_kv_bytes_per_token(kv_dtype))
        return per_token * (tp / min(tp, model.num_kv_heads))  # x 1.0 (exact) without copies

    def capacity_blocks(
        self, *, memory_bytes: float, tp: int, weight_bytes: float, kv_bytes_per_token: float
    ) -> int:
        """Blocks that fit; raises :class:`CapacityError` with the numbers when none do."""
        if self.num_blocks is not None:
            return self.num_blocks
        util = self.gpu_memory_utilization
        reserve = self.reserve_gb * 1e9 * tp
        if self.memory_share == "free":
            usable = memory_bytes * tp
            left = util * (usable - weight_bytes - reserve)
        else:
            usable = memory_bytes * tp * util
            left = usable - weight_bytes - reserve
        block_bytes = kv_bytes_per_token * self.block_size
        blocks = int(left // block_bytes) if left > 0 else 0
        if blocks < 1:
            raise CapacityError(
                f"model does not fit: weights {weight_bytes / 1e9:.1f} GB + reserve "
                f"{reserve / 1e9:.1f} GB > usable {usable / 1e9:.1f} GB "
                f"({'' if self.memory_share == 'free' else f'{util} x '}{tp} GPU(s) x "
                f"{memory_bytes / 1e9:.1f} GB, {memory_bytes / 2**30:.2f} GiB each as CUDA "
                "reports it); "
                "use more tensor parallelism, a smaller dtype or a bigger GPU"
            )
        return blocks
