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

import math
from dataclasses import dataclass, replace

from simulator.errors import CapacityError, ConfigError
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
    # --swa-full-tokens-ratio (0.8), whose window layers get a pool of their own that size;
    # 1.0: they cost as full layers (vLLM v0 and V1 before its hybrid manager). 0: a pool
    # sized by the window (TensorRT-LLM) or blocks from the one pool (window_held: vLLM V1),
    # and the pool's tokens are the full layers' (ModelSpec.kv_bytes_per_token)
    window_share: float = spec(0.0, low=0, high=1)
    # The sliding-window layers take their blocks from the one pool as requests need them,
    # and a running request holds its last window there besides its context (vLLM V1's
    # hybrid KV-cache manager, from 0.9.1: window_blocks). [disaggregated] pools take
    # window_share 1.0 instead (without_held_windows)
    window_held: bool = spec(False)

    def __post_init__(self) -> None:
        check_fields(self, "kv")
        if self.window_held and self.window_share > 0:
            raise ConfigError(f"[kv] window_held = true and window_share = {self.window_share}: "
                              "the window layers have a pool of their own (window_share) or "
                              "take blocks from the one pool (window_held), not both")

    def without_held_windows(self) -> KVCacheConfig:
        """This config for a ``[disaggregated]`` pool: vLLM turns its hybrid manager off
        with a KV connector (vllm-project/vllm#17996), so held windows become window layers
        that cost as full ones (``window_share`` 1.0); unchanged without ``window_held``."""
        if not self.window_held:
            return self
        return replace(self, window_held=False, window_share=1.0)

    def window_blocks(self, model: ModelSpec, kv_dtype: str) -> int:
        """Blocks of the pool (each ``block_size`` tokens of the full layers' KV) a running
        request's sliding-window layers hold besides its context when ``window_held``: the
        window's last ``sliding_window - 1`` tokens and the one being written, ``ceil((W -
        1) / block) + 1`` blocks of the window layers (vLLM ``SlidingWindowManager.
        remove_skipped_blocks`` frees the blocks before them), counted in the pool's blocks
        by the two kinds of layers' KV a token. gpt-oss (W 128, as many window layers as
        full ones) at block 16: 9. 0 when not held or without window layers.

        Charged from a request's first block to its last, whatever its length: a request
        shorter than the window holds fewer, so it is charged up to the whole window over
        (gpt-oss: 8 blocks; a 5:1 model with a 1,024-token window: 325 for a request of a
        few tokens); and a prefill step holds its whole chunk in the window layers until
        the next step frees it (vLLM allocates, then frees), which is not charged."""
        if not self.window_held or not model.sliding_layers:
            return 0
        window = -(-(model.sliding_window - 1) // self.block_size) + 1
        ratio = model.window_kv_bytes_per_token(kv_dtype) / model.kv_bytes_per_token(kv_dtype)
        return math.ceil(window * ratio - 1e-9)

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
