"""TensorRT-LLM's KV-cache size for an engine of the 2024 releases (0.11-0.17), from sourced
figures for the memory an engine holds besides its KV cache.

TensorRT-LLM sizes its paged KV cache from the memory still *free* once the engine and its
runtime buffers are loaded: ``KVCacheManager::calculateMaxNumBlocks``
(``cpp/tensorrt_llm/batch_manager/kvCacheManager.cpp``, search-index file id 36927720914)
takes ``fraction x (free + pool free) / KV bytes per token`` per rank. servesim's ``[kv]``
rule is vLLM's (a fraction of the *whole* memory less the weights and a reserve), so the
replay passes the engine's count as ``[kv] num_blocks``.

Per GPU, in bytes (every term below has a source; docs/gpu-profiles.md, "TensorRT-LLM's KV
rule from sourced non-KV memory"):

    free = total                      what CUDA reports (HardwareSpec.memory_bytes)
         - weights / tp               servesim's weight bytes
         - activations                TensorRT's execution context, sized for max_num_tokens
         - slot buffers               runtime and decoder buffers, max_batch_size x vocab
         - context                    CUDA context, cuBLAS and what no counter logs
         - nccl                       communicators, tp > 1
    KV tokens per GPU = floor(fraction x free / KV bytes per token per GPU)

- ``activations = 2 bytes x max_num_tokens x hidden x c(tp)``, at least 70 MiB, with c =
  11 / 6.5 / 5 / 5 at TP 1 / 2 / 4 / 8 for Llama-family models and 22 / 13 / 10 / 10 for
  mixture-of-experts ones: AIConfigurator's memory model, "measured ... based on trt
  workflow" (github:ai-dynamo/aiconfigurator ``src/aiconfigurator/sdk/backends/
  trtllm_backend.py`` ``_get_memory_usage``, commit 00ae653b, search-index file id
  57006961489).
- ``nccl``: the same model's ``misc.nccl_mem`` (342 MiB at TP 2, 392 MiB at TP 4 and 8; 0 at
  TP 1), as its ``a100_sxm.yaml`` gives it (search-index file id 66583092604).
- ``slot buffers`` and ``context``: two logs TensorRT-LLM publishes, both Llama-2-7B FP8 on
  one H100 (``total: 79.10 GiB``):
  * ``docs/source/performance/perf-benchmarking.md`` (commit ac643b66, file id
    6161481015), ``trtllm-bench`` of 0.12.0.dev2024073000 with max_batch_size 4096 and
    max_num_tokens 8192: "Allocated 1.14 GB GPU memory for runtime buffers", "Allocated
    4.35 GB GPU memory for decoder" (``MemoryCounters::bytesToString`` divides by 1024, so
    GB are GiB: ``cpp/tensorrt_llm/runtime/memoryCounters.cpp``, commit 027cd518, file id
    5462651739). The decoder's largest buffers are [max_batch_size, vocab]: the top-p
    sampling workspace (``getTopPWorkspaceSizes``: sorted log-probs and ids, B x V each),
    the penalty workspace (``PenaltyLayer::allocateWorkspace``: B x V int32) and the
    logits. So the two are read as bytes per batch slot and vocabulary entry:
    5.49 GiB / (4096 x 32000) = 44.97 B (SLOT_VOCAB_BYTES).
  * ``docs/source/reference/memory.md``'s FAQ log (file id 5516360): engine 6695 MiB,
    execution context 1134.01 MiB, runtime buffers 43.29 MiB, decoder 180.30 MiB,
    available 70.48 of 79.10 GiB. What no line accounts for, 0.756 GiB, is the context
    term (CONTEXT_GIB).
  The model does not reproduce the first log whole. Of the 15.48 GiB that engine used,
  its own engine (6.07), activations (0.91), buffers (5.49) and the context term (0.76)
  leave 2.26 GiB unexplained; with servesim's weights and AIConfigurator's activations the
  model leaves 65.65 GiB free where the log has 63.62 GiB available (+3.2%). No source
  here splits that remainder (part may grow with max_seq_len: github:NVIDIA/TensorRT-LLM
  issue 2317 says the runtime and decoder buffers do).
- ``total``: CUDA's total memory per GPU (``HardwareSpec.memory_bytes``: its
  ``cuda_total_gib``, sources in simulator/specs/hardware.py).

The fraction is each release's (``--kv_cache_free_gpu_mem_fraction`` or the "KV Memory
Percentage" trtllm-bench prints), read from the case's notes. 0.12-0.14's commands set none,
so they ran ``trtllm-bench throughput``'s default, 0.90 (``tensorrt_llm/bench/run/run.py``
and ``run/dataclasses.py`` at the 0.12.0 release, file ids 2923257844 and 3127467211); 0.15
says it used 0.95 "in majority of cases" (file id 5939417815). The "KV Memory Percentage:
99.0%" those pages print is one 0.12.0.dev2024073000 log copied into each of them
(docs/gpu-profiles.md, "The 2024 engines' KV fraction").
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from benchmarks.trtllm_bench_settings import DEFAULT_MAX_BATCH_SIZE, DEFAULT_MAX_NUM_TOKENS
from simulator.specs.hardware import HardwareSpec, get_hardware
from simulator.specs.model_spec import ModelSpec
from simulator.specs.models import catalogue_name, get_model
from simulator.stack_presets import STACKS

if TYPE_CHECKING:
    from benchmarks.published_cases import Case

GIB = 2**30
MIB = 2**20
# The GPUs of the replayed tables, whose CUDA totals the memory model reads
# (HardwareSpec.memory_bytes: cuda_total_gib, with sources in simulator/specs/hardware.py)
TABLE_GPUS = ("a100-80gb", "h100-sxm", "h200", "l40s")
# AIConfigurator's activation factor c(tp) (module docstring), Llama family and MoE
ACTIVATION_FACTOR: Mapping[int, float] = {1: 11, 2: 6.5, 4: 5, 8: 5}
ACTIVATION_FACTOR_MOE: Mapping[int, float] = {1: 22, 2: 13, 4: 10, 8: 10}
ACTIVATION_MIN = 70 * MIB
NCCL_BYTES: Mapping[int, int] = {1: 0, 2: 358612992, 4: 411041792, 8: 411041792}
# perf-benchmarking.md's 0.12 trtllm-bench log: runtime buffers + decoder, GiB, at
# max_batch_size 4096 and Llama-2's vocabulary of 32000
BENCH_LOG_BUFFERS_GIB = 1.14 + 4.35
BENCH_LOG_BATCH, BENCH_LOG_VOCAB = 4096, 32000
SLOT_VOCAB_BYTES = BENCH_LOG_BUFFERS_GIB * GIB / (BENCH_LOG_BATCH * BENCH_LOG_VOCAB)
# The runtime and decoder buffers as 2024's code allocates them, for a greedy trtllm-bench
# engine (beam 1, float32 logits), bytes with B = max_batch_size, V = the padded vocabulary
# and S = max_seq_len (docs/gpu-profiles.md, "The runtime and decoder buffers, term by
# term", names each term's file): runtime 4 B V + 24 B S; decoder c B V + 65,536 B + 16 B S,
# c = 20 while the draft logits were allocated unconditionally, 16 after. It gives two
# logs (memory.md's FAQ, a November 2024 one) within 0.1%, but not the 0.12 log above (1.68
# GiB short), and applied to the replay it reads worse (69.1% -> 66.6% within 15%): not the
# default, ``python benchmarks/published.py --trtllm-buffers sourced`` runs it.
BUFFER_READINGS = ("log", "sourced")
RUNTIME_SLOT_VOCAB, RUNTIME_SLOT_SEQ = 4, 24
DECODER_SLOT, DECODER_SLOT_SEQ = 1024 * 8 * 8, 16
DECODER_SLOT_VOCAB = {"0.15": 16, "0.17": 16}  # else 20 (module docstring's caveat)
# memory.md's log: total - available - engine - context memory - runtime - decoder
CONTEXT_GIB = 79.10 - 70.48 - (6695 + 1134.01 + 43.29 + 180.30) / 1024
# The replayed releases (the performance overviews of benchmarks/published_cases_*.toml)
VERSIONS = ("0.11", "0.12", "0.13", "0.14", "0.15", "0.17")
TOOLS = ("trtllm-bench", "gptManagerBenchmark")
FRACTION = re.compile(r"kv_cache_free_gpu_mem_fraction (0\.\d+)|KV Memory Percentage: "
                      r"(\d+(?:\.\d+)?)%")


@dataclass(frozen=True, slots=True)
class EngineMemory:
    """One GPU of a TensorRT-LLM engine: where its memory goes, bytes."""

    total: float
    weights: float
    activations: float
    slot_buffers: float
    context: float
    nccl: float
    fraction: float
    kv_bytes_per_token: float  # on this GPU

    @property
    def free(self) -> float:
        """What is left for the KV cache before the fraction."""
        return (self.total - self.weights - self.activations - self.slot_buffers
                - self.context - self.nccl)

    @property
    def kv_tokens(self) -> int:
        """Tokens the paged KV cache holds (0 when nothing is free)."""
        return max(0, math.floor(self.fraction * self.free / self.kv_bytes_per_token))


def sourced_buffers(max_batch_size: int, vocab_padded: int, max_seq_len: int,
                    version: str) -> tuple[int, int]:
    """(runtime, decoder) buffer bytes per GPU by the sourced formula (BUFFER_READINGS)."""
    b, v, seq = max_batch_size, vocab_padded, max_seq_len
    c = DECODER_SLOT_VOCAB.get(version, 20)
    return (RUNTIME_SLOT_VOCAB * b * v + RUNTIME_SLOT_SEQ * b * seq,
            c * b * v + DECODER_SLOT * b + DECODER_SLOT_SEQ * b * seq)


def engine_memory(model: ModelSpec, hw: HardwareSpec, tp: int, weight_dtype: str,
                  kv_dtype: str, max_batch_size: int, max_num_tokens: int,
                  fraction: float, sourced: tuple[int, str] | None = None) -> EngineMemory:
    """Per-GPU memory of ``model`` built for ``max_batch_size`` and ``max_num_tokens``;
    ``sourced`` = (max_seq_len, version) takes the buffers from :func:`sourced_buffers`
    instead of the 0.12 log's reading."""
    factors = ACTIVATION_FACTOR_MOE if model.num_experts > 1 else ACTIVATION_FACTOR
    activations = max(2.0 * max_num_tokens * model.hidden_size * factors[min(tp, 8)],
                      ACTIVATION_MIN)
    vocab_padded = math.ceil(model.vocab_size / tp) * tp
    kv_heads_per_gpu = max(model.num_kv_heads / tp, 1.0)
    kv_per_token = model.kv_bytes_per_token(kv_dtype) / model.num_kv_heads * kv_heads_per_gpu
    buffers = SLOT_VOCAB_BYTES * max_batch_size * vocab_padded if sourced is None else \
        sum(sourced_buffers(max_batch_size, vocab_padded, *sourced))
    return EngineMemory(
        total=hw.memory_bytes, weights=model.weight_bytes(weight_dtype) / tp,
        activations=activations, slot_buffers=buffers,
        context=CONTEXT_GIB * GIB, nccl=NCCL_BYTES[min(tp, 8)], fraction=fraction,
        kv_bytes_per_token=kv_per_token)


def kv_fraction(notes: str) -> float | None:
    """The KV fraction a case's notes state (the first one given), else None."""
    m = FRACTION.search(notes)
    if m is None:
        return None
    return float(m[1]) if m[1] is not None else float(m[2]) / 100


def trtllm_kv(case: Case, prompt: Mapping[str, Any], output: Mapping[str, Any],
              policy: Mapping[str, Any], buffers: str = "log"
              ) -> tuple[dict[str, Any], list[str]]:
    """The ``[kv]`` section replaying ``case``'s engine by TensorRT-LLM's rule and a note;
    ``({}, [])`` for a case this does not cover (another stack or release, lengths not
    fixed, a GPU without a CUDA total, no stated fraction). ``buffers``: which reading of
    the runtime and decoder buffers (BUFFER_READINGS); where the log's reading leaves no
    free memory, the engine still ran, so the sourced reading sizes its cache."""
    if buffers not in BUFFER_READINGS:
        raise ValueError(f"trtllm_kv: buffers {buffers!r}: one of {BUFFER_READINGS}")
    name = catalogue_name(case.model)
    fraction = kv_fraction(case.notes)
    if (case.stack != "trtllm" or case.stack_version not in VERSIONS or name is None
            or not any(tool in case.notes for tool in TOOLS) or fraction is None
            or case.gpu not in TABLE_GPUS or prompt.get("dist") != "fixed"
            or output.get("dist") != "fixed"):
        return {}, []
    batch = int(policy.get("max_num_seqs", DEFAULT_MAX_BATCH_SIZE))
    tokens = int(policy.get("max_num_batched_tokens", DEFAULT_MAX_NUM_TOKENS))
    seq = int(prompt["tokens"]) + int(output["tokens"])  # the build's max_seq_len
    model, hw = get_model(name), get_hardware(case.gpu)
    sourced = (seq, case.stack_version)
    mem = engine_memory(model, hw, case.tp, case.weight_dtype, case.kv_dtype, batch, tokens,
                        fraction, sourced if buffers == "sourced" else None)
    block = trtllm_block_tokens()
    blocks = mem.kv_tokens // block
    prefix = ""
    if blocks < 1 and buffers == "log":  # the engine ran, so it had a cache: the log's
        # reading overstates its buffers here; the term-by-term reading of the same engine
        prefix = (f"the log's buffer reading leaves no KV cache ({mem.free / GIB:.2f} GiB "
                  "free per GPU), so the sourced one: ")
        mem = engine_memory(model, hw, case.tp, case.weight_dtype, case.kv_dtype, batch,
                            tokens, fraction, sourced)
        blocks = mem.kv_tokens // block
    if blocks < 1:
        return {}, [f"TensorRT-LLM's KV rule leaves no KV cache ({mem.free / GIB:.2f} GiB free "
                    "per GPU): the [kv] rule kept (benchmarks/trtllm_kv_memory.py)"]
    return {"num_blocks": blocks, "block_size": block}, [
        f"{prefix}[kv] num_blocks {blocks}: TensorRT-LLM's rule, {fraction:g} x "
        f"{mem.free / GIB:.2f} "
        f"GiB free per GPU after weights {mem.weights / GIB:.2f}, activations "
        f"{mem.activations / GIB:.2f}, runtime+decoder buffers {mem.slot_buffers / GIB:.2f} "
        f"(max_batch_size {batch}), context {mem.context / GIB:.2f}, NCCL "
        f"{mem.nccl / GIB:.2f} of {mem.total / GIB:.2f} GiB (benchmarks/trtllm_kv_memory.py)"]


def trtllm_block_tokens() -> int:
    """Tokens a KV block holds in the replayed engines (the trtllm presets' block size)."""
    return int(STACKS["trtllm"][-1].kv["block_size"])


def static_session_kv(case: Case, prompt: Mapping[str, Any], output: Mapping[str, Any],
                      policy: Mapping[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """The ``[kv]`` section of a static-batch row (the pre-0.10 tables' gptSessionBenchmark,
    one batch run whole) and a note: the session held its whole batch, batch x (input +
    output) tokens, so the replay gets exactly that many blocks, whatever a memory rule
    would give; ``({}, [])`` for any other case."""
    if (case.stack != "trtllm" or "static batching" not in case.notes
            or prompt.get("dist") != "fixed" or output.get("dist") != "fixed"
            or "max_num_seqs" not in policy):
        return {}, []
    batch = int(policy["max_num_seqs"])
    block = trtllm_block_tokens()
    per_request = math.ceil((int(prompt["tokens"]) + int(output["tokens"])) / block)
    return {"num_blocks": batch * per_request, "block_size": block}, [
        f"[kv] num_blocks {batch * per_request}: a static batch of {batch} ran whole, so its "
        f"cache held {batch} x {per_request} blocks of {block} tokens "
        "(benchmarks/trtllm_kv_memory.py static_session_kv)"]
