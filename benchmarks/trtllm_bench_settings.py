"""The max batch size and token budget ``trtllm-bench`` picks for a dataset (its heuristic).

A TensorRT-LLM max-throughput table is measured with ``trtllm-bench throughput``, which
sizes the engine (or the PyTorch executor) from the dataset when the command line gives no
``--max_batch_size``/``--max_num_tokens``. NVIDIA's performance overview runs it that way,
so replaying its rows with the llmapi defaults (2048 sequences, 8192 tokens) replays a
different engine: an 8192-token prompt then only fits a step with nothing decoding.

The rule, after ``tensorrt_llm/bench/build/tuning.py`` (``calc_engine_setting`` and
``finetune_setting``; the same in the 0.15-era and the 1.x files, which differ only in
hybrid-model branches and the GiB rounding of the parameter count):

    kv bytes per token = 2 x layers x max(tp, kv heads) x head_dim x KV bytes
    available          = GPU memory x tp - parameters x weight bytes
    max requests       = available x kv fraction / (kv bytes per token x (ISL + OSL))
    raw_bs             = min(max requests, 4096)
    raw_tokens         = min(raw_bs x (1 + ISL / OSL), 32768)
    max_batch_size     = max(64, 32 * ceil(raw_bs / 32))    if raw_bs < 256
                         128 * ceil(raw_bs / 128)           if raw_bs < 1024
                         256 * ceil(raw_bs / 256)           otherwise
    max_num_tokens     = max(2048, 256 * ceil(raw_tokens / 256))  if raw_tokens < 4096
                         512 * ceil(raw_tokens / 512)             if raw_tokens < 8192
                         1024 * ceil(raw_tokens / 1024)           otherwise

with pipeline parallelism 1 (the tables' rows are TP only). Memory is the GPU's in GiB
(``get_device_memory``); the KV fraction is the command's (0.95 for most published rows).
"""

from __future__ import annotations

import math

from simulator.specs.hardware import HardwareSpec
from simulator.specs.model_spec import ModelSpec

GIB = 1024**3
MAX_REQUESTS = 4096  # "cap total batch size to avoid decoder buffer size becoming too large"
MAX_TOKENS = 32768  # "cap num tokens to avoid TRT activation buffer becoming too large"


def engine_settings(model: ModelSpec, hw: HardwareSpec, tp: int, weight_dtype: str,
                    kv_dtype: str, isl: int, osl: int, kv_fraction: float = 0.95
                    ) -> tuple[int, int]:
    """(max_batch_size, max_num_tokens) ``trtllm-bench`` builds for fixed ``isl``/``osl``."""
    kv_bytes = 2 * model.num_layers * max(tp, model.num_kv_heads) * model.head_dim * \
        _bytes(kv_dtype) / GIB
    engine = model.params_total * _bytes(weight_dtype) / GIB
    available = hw.memory_bytes / GIB * tp - engine
    requests = available * kv_fraction / (kv_bytes * (isl + osl))
    return finetune(requests, isl, osl)


def finetune(requests: float, isl: int, osl: int) -> tuple[int, int]:
    """trtllm-bench's rounding of the raw batch size and token budget (pp 1)."""
    raw_bs = min(requests, MAX_REQUESTS)
    raw_tokens = min(raw_bs * (1 + isl / osl), MAX_TOKENS)
    if raw_bs < 256:
        batch = max(64, 32 * math.ceil(raw_bs / 32))
    elif raw_bs < 1024:
        batch = 128 * math.ceil(raw_bs / 128)
    else:
        batch = 256 * math.ceil(raw_bs / 256)
    if raw_tokens < 4096:
        tokens = max(2048, 256 * math.ceil(raw_tokens / 256))
    elif raw_tokens < 8192:
        tokens = 512 * math.ceil(raw_tokens / 512)
    else:
        tokens = 1024 * math.ceil(raw_tokens / 1024)
    return batch, tokens


def _bytes(dtype: str) -> float:
    """Bytes per element as trtllm-bench counts them (``BYTES_PER_ELEM``): fp8 1, anything
    not quantised 2."""
    return 1.0 if dtype.lower() == "fp8" else 2.0
