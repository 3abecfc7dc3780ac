"""SGLang's KV pool: ``mem_fraction_static`` by release, tensor parallelism and GPU, the
memory its startup holds before the weights load, and the requests the pool lets it run
at once (:func:`request_slots`).

SGLang sizes its KV pool at startup (``ModelRunner.profile_max_num_token``)::

    rest = free_after_weights - free_at_start x (1 - mem_fraction_static)

``free_at_start`` is the memory free once the CUDA context and ``torch.distributed`` are up
("Load weight begin. avail mem=...": 78.32-78.81 GB of an H100's 79.10 on one GPU, 77.17
and 77.43 GB on two and eight, GB meaning GiB there), so the pool is
``f x (total - startup) - weights``: the activations and CUDA graphs live in the
``1 - f`` left over, outside it. servesim's ``[kv]`` rule (``f x total - weights -
reserve``) gives the same pool with ``reserve_gb = f x startup`` (:func:`sglang_kv`).

``f`` by release, when the user sets none (``server_args.py``):

- 0.2-0.4: by TP only: 0.88 on one GPU, 0.87 from 2, 0.85 from 4, 0.81 from 8 (0.83 in
  0.2-0.3), 0.79 from 16;
- 0.5: from the GPU's capacity ``C`` (MiB) and what it reserves for activations and graphs,
  ``reserved = 512 + 1.5 x max(chunked_prefill_size, 2048) + 2 x cuda_graph_max_bs +
  1024 x TP / 8`` MiB, at least 10,240 on GPUs over 60 GiB; ``f = round((C - reserved) /
  C, 3)``. ``chunked_prefill_size`` and ``cuda_graph_max_bs`` by memory (:data:`TIERS_05`):
  2048 and 8 under 20 GiB, 2048 and 24 (80 at TP >= 4) under 35, 4096 and 32 (160) under
  60, 8192 and 256 (512) under 160, else 16384 and 512.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from simulator.errors import ConfigError
from simulator.specs.hardware import HardwareSpec

GIB = 2**30
# Memory in use before the weights load (CUDA context, torch.distributed's buffers), GiB a
# GPU: an 80 GB GPU's 79.10 GiB (the H100's CUDA total) minus "Load weight begin. avail
# mem" in SGLang logs. One GPU: 78.81, 78.43 and 78.32 (search-index file ids 18084549501,
# 14968382678, 66584923754), the median 0.67 GiB. More: 77.17 (TP 2, 71258027165) and 77.43
# (TP 8, 45518106035), the mean 1.80 GiB
STARTUP_GIB_ONE = 0.67
STARTUP_GIB_MANY = 1.80
SGLANG_MEMORY_SOURCE = (
    "kv: SGLang's pool is mem_fraction_static x the memory free at startup less the weights "
    "(model_runner profile_max_num_token: rest = available after load - total at start x "
    f"(1 - f); search-index file id 2093463969): [kv] reserve_gb = f x {STARTUP_GIB_ONE} GiB "
    f"on one GPU, f x {STARTUP_GIB_MANY} GiB on more (the context and torch.distributed "
    "before the weights: SGLang logs' 'Load weight begin. avail mem', simulator/"
    "sglang_memory.py)")
SGLANG_05_FRACTION_SOURCE = (
    "kv: mem_fraction_static = round((C - reserved) / C, 3), C the GPU's memory in MiB, "
    "reserved = 512 + 1.5 x max(chunked_prefill_size, 2048) + 2 x cuda_graph_max_bs + 1024 x "
    "TP / 8 MiB, at least 10,240 over 60 GiB (a 0.5-line server_args.py, search-index file "
    "id 8356329)")


def fraction_by_tp(tp: int, eight: float) -> float:
    """0.2-0.4's ``mem_fraction_static`` on ``tp`` GPUs (``eight``: the release's at 8)."""
    return 0.79 if tp >= 16 else eight if tp >= 8 else 0.85 if tp >= 4 else \
        0.87 if tp >= 2 else 0.88


# 0.5's settings by the GPU's memory (server_args.py _handle_gpu_memory_settings, file id
# 8356329): below each bound (GiB), the prefill chunk and cuda_graph_max_bs below TP 4 and
# from TP 4; one table, as the file sets both in one ladder
TIERS_05: tuple[tuple[float, int, int, int], ...] = (
    (20, 2048, 8, 8), (35, 2048, 24, 80), (60, 4096, 32, 160), (160, 8192, 256, 512),
    (math.inf, 16384, 512, 512))


def _tier_05(hw: HardwareSpec) -> tuple[float, int, int, int]:
    gib = hw.memory_bytes / GIB
    return next(tier for tier in TIERS_05 if gib < tier[0])


def chunk_05(hw: HardwareSpec) -> int:
    """0.5's ``chunked_prefill_size`` by the GPU's memory."""
    return _tier_05(hw)[1]


def graph_max_bs_05(hw: HardwareSpec, tp: int) -> int:
    """0.5's ``cuda_graph_max_bs`` by the GPU's memory and TP."""
    tier = _tier_05(hw)
    return tier[2] if tp < 4 else tier[3]


def fraction_05(hw: HardwareSpec, tp: int, chunk: int) -> float:
    """0.5's ``mem_fraction_static`` on ``tp`` GPUs of ``hw`` with prefill chunks of
    ``chunk`` tokens (the module docstring's rule); a GPU that the reserve fills is
    refused, as SGLang refuses to start there."""
    capacity = hw.memory_bytes / 2**20  # MiB
    reserved = 512 + 1.5 * max(chunk, 2048) + 2 * graph_max_bs_05(hw, tp) + 1024 * tp / 8
    if capacity > 60 * 1024:
        reserved = max(reserved, 10 * 1024)
    fraction = round((capacity - reserved) / capacity, 3)
    if fraction <= 0:
        raise ConfigError(
            f"stack sglang 0.5 on {hw.name}: it reserves {reserved:,.0f} MiB of the GPU's "
            f"{capacity:,.0f} for activations and CUDA graphs, which leaves no memory for "
            "the weights and the KV cache; set [kv] gpu_memory_utilization yourself")
    return fraction


def sglang_kv(fraction: float, tp: int) -> dict[str, Any]:
    """``[kv]`` defaults for a pool of ``fraction`` of what is free at startup on ``tp``
    GPUs: the fraction, and the startup memory's share of it as the reserve (GB a GPU)."""
    startup = STARTUP_GIB_ONE if tp == 1 else STARTUP_GIB_MANY
    return {"gpu_memory_utilization": fraction,
            "reserve_gb": round(fraction * startup * GIB / 1e9, 4)}


@dataclass(frozen=True, slots=True)
class FractionByTP:
    """0.2-0.4's ``[kv]`` rule: ``mem_fraction_static`` by TP only (``eight``: the
    release's at TP 8; ``file_ids``: the ``server_args.py`` files read), and its source."""

    eight: float
    releases: str
    file_ids: str

    @property
    def source(self) -> str:
        return (f"kv: mem_fraction_static 0.88 at TP 1, 0.87 from 2, 0.85 from 4, {self.eight:g} "
                f"from 8, 0.79 from 16 ({self.releases} server_args.py, search-index file ids "
                f"{self.file_ids})")

    def __call__(self, hw: HardwareSpec, tp: int, policy: dict[str, Any],
                 fraction: float | None = None) -> dict[str, Any]:
        """The ``[kv]`` defaults on ``tp`` GPUs (``fraction``: the scenario's own, whose
        share of the startup memory is then the reserve)."""
        return sglang_kv(fraction_by_tp(tp, self.eight) if fraction is None else fraction, tp)


KV_02 = FractionByTP(0.83, "0.2-0.3", "151270057, 455044790")
KV_04 = FractionByTP(0.81, "0.4", "309022971, 26596591, 483039325")


# SGLang 0.5 gives a model's sliding-window layers (gpt-oss) a pool of their own,
# --swa-full-tokens-ratio (0.8) of the full layers' tokens, and solves the two so that
# they fill the memory: full tokens = tokens x L / (0.8 L_swa + L_full) (server_args.py,
# search-index file id 8356329; model_runner.py, ids 51824532752, 20394803172)
SWA_FULL_TOKENS_RATIO = 0.8


def kv_05(hw: HardwareSpec, tp: int, policy: dict[str, Any],
          fraction: float | None = None) -> dict[str, Any]:
    """SGLang 0.5's ``[kv]`` defaults on ``tp`` GPUs of ``hw``, from the chunk size the
    stack defaults to there (``policy``: the stack's ``[policy]`` defaults; a scenario that
    sets its own chunk keeps this fraction unless it sets ``[kv]`` too); ``fraction`` as
    :class:`FractionByTP`'s (no rule to refuse a GPU then)."""
    if fraction is None:
        chunk = policy.get("max_num_batched_tokens")
        chunk = chunk if isinstance(chunk, int) and chunk > 0 else 8192
        fraction = fraction_05(hw, tp, chunk)
    return {**sglang_kv(fraction, tp), "window_share": SWA_FULL_TOKENS_RATIO}


# SGLang's request slots: the req_to_token pool holds clamp(pool / context x 512, 2048,
# 4096) requests (model_runner.py init_memory_pool, unchanged from the 0.2 router's
# ``max_requests`` to 0.5: search-index file ids 30619244531, 432591181), and the
# scheduler runs at most min(pool // 2, those slots) at once (scheduler.py / 0.2-0.3's
# tp_worker.py, ids 74498457, 5861334175; 0.2-0.3 keep one slot back: not modelled).
SLOTS_LOW, SLOTS_HIGH, SLOTS_PER_CONTEXT = 2048, 4096, 512
REQUEST_SLOTS_SOURCE = (
    "max_num_seqs: SGLang's max_running_requests when unset, min(KV tokens // 2, "
    "clamp(KV tokens / context_len x 512, 2048, 4096)) (model_runner.py init_memory_pool, "
    "scheduler.py; search-index file ids 432591181, 74498457): 4096 for Llama-3.1-70B on "
    "4 x H200 (1,106,960 tokens), 2048 for Llama-3.1-8B on one H100 (413,311)")


def request_slots(pool_tokens: int, context: int) -> int:
    """The requests SGLang runs at once by default, for a KV pool of ``pool_tokens`` tokens
    and a served context of ``context`` tokens (see :data:`REQUEST_SLOTS_SOURCE`)."""
    if pool_tokens < 2 or context < 1:
        raise ValueError(f"{pool_tokens=} and {context=} must be >= 2 and >= 1")
    slots = min(max(int(pool_tokens / context * SLOTS_PER_CONTEXT), SLOTS_LOW), SLOTS_HIGH)
    return min(pool_tokens // 2, slots)
