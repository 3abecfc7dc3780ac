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
"Parameters" are the checkpoint's safetensors elements (:func:`checkpoint_elements`) and
"layers" every layer, sliding-window ones too (the tool's ``num_attention_layers``).

The rule has no branch for latent attention (DeepSeek-V3/R1) through the 1.x releases the
tables name: the tool's ``ModelConfig`` reads the config's ``num_key_value_heads`` (128)
and, with no ``head_dim`` key, ``hidden_size // num_attention_heads`` (56), so it sizes
DeepSeek-R1 for 2 x 61 x 128 x 56 bytes of FP8 cache a token, about 25 times the latent
cache (NVIDIA/TensorRT-LLM#16707 later added an MLA branch, whose thread says "~25x"):
:func:`engine_settings` does the same for a latent-attention spec.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from simulator.specs.hardware import HardwareSpec, get_hardware
from simulator.specs.model_spec import ModelSpec
from simulator.specs.models import catalogue_name, get_model

if TYPE_CHECKING:
    from benchmarks.published_cases import Case

GIB = 1024**3
MAX_REQUESTS = 4096  # "cap total batch size to avoid decoder buffer size becoming too large"
MAX_TOKENS = 32768  # "cap num tokens to avoid TRT activation buffer becoming too large"
DEFAULT_MAX_NUM_TOKENS = 8192  # TensorRT-LLM's default max_num_tokens
DEFAULT_MAX_BATCH_SIZE = 2048  # and max_batch_size (llmapi BuildConfig)
# The sizing above is read from trtllm-bench's 0.15-era and 1.x sources; the 0.12-0.14 tool
# read a per-model table (benchmarks/trtllm_bench_table.py: 0.12's, carried forward to 0.13
# and 0.14); rows it has no entry for keep the older rule in bench_limits.
HEURISTIC_FROM = (0, 15)
THROUGHPUT_TOOL = re.compile(r"trtllm-bench\b[^;]*\bthroughput\b")


def bench_limits(case: Case, prompt: Mapping[str, Any], output: Mapping[str, Any],
                 policy: dict[str, Any]) -> list[str]:
    """Set in ``policy`` the limits trtllm-bench ran a published case with, where the case
    states none; return notes saying so. Fixed lengths only (the tool reads the dataset)."""
    if "trtllm-bench" not in case.notes or prompt.get("dist") != "fixed":
        return []
    if _sized_by_heuristic(case, output) and not {"max_num_seqs",
                                                  "max_num_batched_tokens"} & set(policy):
        # its own sizing from the dataset, with chunked context on (its
        # --enable_chunked_context default; tensorrt_llm/bench/benchmark/throughput.py)
        batch, tokens = engine_settings(get_model(str(catalogue_name(case.model))),
                                        get_hardware(case.gpu), case.tp, case.weight_dtype,
                                        case.kv_dtype, int(prompt["tokens"]),
                                        int(output["tokens"]))
        policy.update(max_num_seqs=batch, max_num_batched_tokens=tokens)
        policy.setdefault("chunked_prefill", True)
        return [f"max_num_seqs {batch}, max_num_batched_tokens {tokens}, chunked context: "
                "trtllm-bench's sizing for the dataset (benchmarks/trtllm_bench_settings.py)"]
    if "max_num_batched_tokens" not in policy and prompt["tokens"] > DEFAULT_MAX_NUM_TOKENS:
        # A prompt over the 8192-token default could not have been served without
        # chunking. In-flight batching counts the running requests' decode tokens in the
        # same budget (mixed_prefill), so the prompt must fit beside up to max_batch_size.
        budget = int(prompt["tokens"]) + DEFAULT_MAX_BATCH_SIZE
        policy["max_num_batched_tokens"] = budget
        return [f"max_num_batched_tokens {budget} = prompt + max_batch_size "
                f"{DEFAULT_MAX_BATCH_SIZE} (trtllm-bench sizes its token budget for the "
                "dataset; assumed)"]
    return []


def engine_context(case: Case, prompt: Mapping[str, Any], output: Mapping[str, Any],
                   policy: dict[str, Any]) -> list[str]:
    """Serve a TensorRT-LLM case's whole requests where ISL + OSL exceeds the model's own
    context: its engine was built for the dataset (``trtllm-bench build`` sets
    ``max_seq_len`` from it, and 0.12's per-model table has a 4,224-token entry for
    Llama-2-70B, whose config stops at 4,096), so the published run served 5,000-token
    prompts that servesim would otherwise cut to fit. Sets ``policy.max_model_len``."""
    if (case.stack != "trtllm" or prompt.get("dist") != "fixed"
            or output.get("dist") != "fixed" or "max_model_len" in policy):
        return []
    name = catalogue_name(case.model)
    if name is None:
        return []
    seq = int(prompt["tokens"]) + int(output["tokens"])
    own = get_model(name).max_context_tokens
    if seq <= own:
        return []
    policy["max_model_len"] = seq
    return [f"max_model_len {seq} = ISL + OSL: the engine was built for the dataset, past "
            f"the model's {own}-token context (benchmarks/trtllm_bench_settings.py)"]


def _sized_by_heuristic(case: Case, output: Mapping[str, Any]) -> bool:
    """Whether ``case`` ran trtllm-bench throughput at a version whose sizing is known."""
    version = re.match(r"(\d+)\.(\d+)", case.stack_version.replace(".2x", ".20").replace(
        ".x", ".0"))
    return (case.stack == "trtllm" and version is not None
            and catalogue_name(case.model) is not None
            and (int(version[1]), int(version[2])) >= HEURISTIC_FROM
            and THROUGHPUT_TOOL.search(case.notes) is not None
            and output.get("dist") == "fixed")


def engine_settings(model: ModelSpec, hw: HardwareSpec, tp: int, weight_dtype: str,
                    kv_dtype: str, isl: int, osl: int, kv_fraction: float = 0.95
                    ) -> tuple[int, int]:
    """(max_batch_size, max_num_tokens) ``trtllm-bench`` builds for fixed ``isl``/``osl``."""
    heads, head_size = model.num_kv_heads, model.head_dim
    if model.kv_lora_rank:  # what the tool reads from a latent-attention config (docstring)
        heads, head_size = model.num_heads, model.hidden_size // model.num_heads
    kv_bytes = 2 * model.num_layers * max(tp, heads) * head_size * _bytes(kv_dtype) / GIB
    engine = checkpoint_elements(model, weight_dtype) * _bytes(weight_dtype) / GIB
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


def checkpoint_elements(model: ModelSpec, weight_dtype: str) -> float:
    """The parameter count trtllm-bench reads: the elements of the checkpoint's safetensors
    tensors (``ModelConfig.get_param_count``: the metadata's ``parameter_count`` summed over
    dtypes). An MXFP4 checkpoint (gpt-oss) stores its experts as bytes of two four-bit
    weights plus one scale byte per 32 weights, so they count 17/32 of their weights; every
    other checkpoint here counts its weights."""
    if weight_dtype.lower() != "mxfp4":
        return float(model.params_total)
    return model.params_shared + model.params_experts * (1 / 2 + 1 / 32)


def _bytes(dtype: str) -> float:
    """Bytes per element as trtllm-bench counts them (``BYTES_PER_ELEM``): fp8 1, anything
    else 2 (NVFP4's 0.5 has no dtype here; MXFP4, W4A16_MXFP4 to the tool, is not in its
    table, so 2)."""
    return 1.0 if dtype.lower() == "fp8" else 2.0
