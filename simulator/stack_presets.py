"""Each serving stack's out-of-the-box behaviour, version by version (``[stack]`` presets).

A :class:`StackPreset` is what a stack does without flags: its ``[policy]`` (the scheduler
rules and the defaults of its OpenAI-compatible server: ``vllm serve``, ``python -m
sglang.launch_server``, ``trtllm-serve``), its ``[kv]`` layout, its host costs and the
kernel tables that price its steps. Defaults that depend on the model (context length)
or the GPU (memory size) come from its ``adapt`` function. Every value names where it was
read (``sources``); docs/stacks.md gives the table. simulator/stacks.py applies a preset
under a scenario's own values.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from simulator.costs.collectives import allreduce_curve
from simulator.costs.moe_tables import MARLIN_KIND
from simulator.sglang_memory import (
    KV_02,
    KV_04,
    REQUEST_SLOTS_SOURCE,
    SGLANG_05_FRACTION_SOURCE,
    SGLANG_MEMORY_SOURCE,
    chunk_05,
    kv_05,
    request_slots,
)
from simulator.specs.hardware import BOOST_CLOCK_GHZ, HardwareSpec
from simulator.specs.model_spec import ModelSpec

# (GPU, TP, the stack's [policy] defaults, the scenario's own fraction or None) -> [kv]
KVRule = Callable[[HardwareSpec, int, dict[str, Any], float | None], dict[str, Any]]


@dataclass(frozen=True, slots=True)
class StackPreset:
    """One stack at one version: the tables it fills in and where its numbers come from."""

    stack: str  # vllm-v0 | vllm-v1 | sglang | trtllm
    version: str  # the release whose defaults these are
    policy: Mapping[str, Any]  # [policy] defaults: name and knobs
    kv: Mapping[str, Any] = field(default_factory=dict)  # [kv] defaults
    overhead: Mapping[str, float] = field(default_factory=dict)  # host costs, s
    # host costs that grow with the model's depth: s per layer (times num_layers)
    overhead_per_layer: Mapping[str, float] = field(default_factory=dict)
    # host costs only a deployment of more than one GPU pays, s (vLLM V0's driver sends
    # every step's batch to the other workers)
    overhead_multi_gpu: Mapping[str, float] = field(default_factory=dict)
    # kernel tables: simulator/profiles/stacks/<profiles>/, and generic profiles composed
    # from that AIConfigurator backend (simulator/costs/lookup.py tables_of)
    profiles: str | None = None
    sources: tuple[str, ...] = ()  # where each default was read
    # [policy] defaults that depend on the model and the GPU (context length, memory size)
    adapt: Callable[[ModelSpec, HardwareSpec], dict[str, Any]] | None = None
    # Decode attention over a 16-bit KV cache read 1 + kv16_reread x (G - 1) times a step,
    # G = query heads per KV head on one GPU (0: once, as the kernel tables measured it;
    # a fitted term: docs/stacks.md, "TensorRT-LLM 0.11 to 0.17")
    kv16_reread: float = 0.0
    # The token budget the stack defaults to for a chunked-prefill setting the scenario
    # chose itself (vLLM v0: 512 with chunked prefill, else max(max_model_len, 2048));
    # None: the budget does not follow that setting
    budget_rule: Callable[[ModelSpec, bool], int] | None = None
    # The weight dtypes whose checkpoints come with an FP8 KV cache, for a scenario that
    # sets none: a checkpoint of another quantised dtype keeps a bf16 cache. vLLM and
    # SGLang (``--kv-cache-dtype auto``: the model's dtype): none; TensorRT-LLM: fp8 (its
    # ModelOpt FP8 checkpoints set ``kv_cache_quant_algo`` FP8; int4 AWQ ones do not).
    # None: servesim's own default (fp8 KV for every quantised weight dtype)
    fp8_kv_with: tuple[str, ...] | None = None
    # FP8 weights or an FP8 KV cache run only where the GPU has FP8 tensor cores
    # (TensorRT-LLM's support matrix: Ampere has FP32, FP16, BF16, INT8, INT4); False: the
    # stack runs FP8 weights elsewhere too, as weight-only kernels (vLLM's FP8 Marlin)
    fp8_needs_fp8_math: bool = False
    # The query-heads-per-KV-head group sizes the release's XQA decode kernel covers (None:
    # every size, as the kernel tables measured); any other runs the masked MHA kernel, G
    # reads of an FP8 cache a step (benchmarks/trtllm_xqa.py). TensorRT-LLM 0.10: 1 and 8
    # (DecoderXQARunner::shouldUse refuses other sizes; JIT XQA, off on SM90 and behind an
    # env var elsewhere, became the default for every size in 0.11)
    xqa_groups: frozenset[int] | None = None
    # Decode attention without multi-block mode (TensorRT-LLM engines before 0.12): SM
    # cycles one thread block takes per context token and layer to walk a sequence's cache
    # (simulator/costs/decode_walk.py); 0: the kernel tables' multi-block kernels
    decode_walk_cycles: float = 0.0
    # The 2024 TensorRT engines' custom all-reduce: a copy and a cross-GPU handshake per
    # all-reduce beyond the kernel tables' 1.x kernel, in multiples of the GPU's NCCL
    # small-message latency at that TP (simulator/costs/allreduce_sync.py); 0: none
    allreduce_sync: float = 0.0
    # The masked MHA kernel's re-read term over a 16-bit cache, for the group sizes outside
    # ``xqa_groups`` (0: ``kv16_reread`` there too): 1 + beta (G - 1) reads a step
    kv16_masked_reread: float = 0.0
    # Passes over the weights a step that prefills takes beyond the kernel tables
    # (simulator/costs/prefill_pass.py: k x weight bytes per GPU / HBM bandwidth); 0: none
    prefill_weight_passes: float = 0.0
    # And a factor on those steps' own time (simulator/costs/prefill_pass.py); 1: none
    prefill_scale: float = 1.0

    # the largest decode batch the stack replays as a captured CUDA graph, by GPU and TP
    # (the host term graph_max_rows: past it a decode step pays eager_s); None: no limit
    graph_rows: Callable[[HardwareSpec, int], int] | None = None
    # [kv] defaults that depend on the GPU, the TP, the [policy] defaults and the scenario's
    # own memory fraction, if it sets one (SGLang's mem_fraction_static and the startup
    # memory outside its pool: simulator/sglang_memory.py); None: ``kv``'s
    kv_rule: KVRule | None = None
    # max_num_seqs from the KV pool (tokens) and the served context, where the stack sizes
    # its running batch so (SGLang's max_running_requests: sglang_memory.request_slots);
    # None: ``policy``'s
    slots_rule: Callable[[int, int], int] | None = None
    # whose measured MoE kernels a prior's experts read where not the stack's own tables
    # (``profiles``): "vllm-marlin" for vLLM before 0.12, whose Hopper MXFP4 experts ran on
    # Marlin (simulator/costs/moe_tables.py); None: the stack's own
    moe_kind: str | None = None
    # the GPUs on which the release runs MXFP4 experts on vLLM's Marlin kernel, which pads
    # them in memory (MARLIN_ALIGN; :meth:`weight_bytes`); None: on none
    marlin_mxfp4: Callable[[HardwareSpec], bool] | None = None
    # The attention kernel's compute efficiency, as a share of the matmuls', that the
    # release runs for a model on a GPU (the prior's ``attention_efficiency``: vLLM V1's
    # Triton attention for sink models below SM90); None: 1, the kernel tables' and the
    # prior's own
    attention_rule: Callable[[ModelSpec, HardwareSpec], float] | None = None

    def attention_efficiency(self, model: ModelSpec, hardware: HardwareSpec) -> float:
        """The prior's ``attention_efficiency`` for ``model`` on ``hardware`` under this
        release (1.0 without a rule)."""
        return 1.0 if self.attention_rule is None else self.attention_rule(model, hardware)

    def allreduce_sync_s(self, hardware: HardwareSpec, tp: int) -> float:
        """Seconds each all-reduce adds on ``tp`` GPUs of ``hardware`` (0 on one GPU, when
        the stack adds none, or when no NCCL curve is listed for the GPU at that TP)."""
        if self.allreduce_sync <= 0 or tp < 2:
            return 0.0
        curve = allreduce_curve(hardware.name, tp)
        return 0.0 if curve is None else self.allreduce_sync * curve.latency_s

    def decode_walk_s(self, hardware: HardwareSpec) -> float:
        """Seconds per context token and layer of one decode walk on ``hardware`` (0 when
        the stack splits walks, or the GPU's clock is not listed)."""
        clock = BOOST_CLOCK_GHZ.get(hardware.name)
        if self.decode_walk_cycles <= 0 or clock is None:
            return 0.0
        return self.decode_walk_cycles / (clock * 1e9)

    def decode_kv_reads(self, model: ModelSpec, tp: int, kv_dtype: str) -> float:
        """How many times a step this stack's decode attention reads the KV cache, in units
        of the kernel tables' one read (``[cost] decode_kv_reads``): G, the query heads per
        KV head, over an FP8 cache where the release has no XQA kernel for G
        (``xqa_groups``: the masked MHA kernel reads the cache once per query head); over a
        16-bit cache 1 + beta (G - 1), beta the masked kernel's ``kv16_masked_reread``
        there (L2 serves some of its G reads) and ``kv16_reread`` elsewhere; else 1
        (docs/stacks.md, "TensorRT-LLM 0.10"). Latent attention (DeepSeek's MLA) runs its
        own kernels, which read each latent once: 1."""
        if model.kv_lora_rank:
            return 1.0
        group = query_group(model, tp)
        masked = self.xqa_groups is not None and group not in self.xqa_groups
        if masked and kv_dtype.lower() == "fp8":
            return float(group)
        beta = (self.kv16_masked_reread if masked and self.kv16_masked_reread > 0
                else self.kv16_reread)
        if beta <= 0 or kv_dtype.lower() not in ("fp16", "bf16"):
            return 1.0
        return 1.0 + beta * (group - 1)

    def policy_for(self, model: ModelSpec, hardware: HardwareSpec,
                   own: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """The ``[policy]`` defaults for this model on this GPU; ``own``: the scenario's own
        knobs, when a default follows one of them (the budget follows ``chunked_prefill``
        under ``budget_rule``, as vLLM v0's ``SchedulerConfig`` picks it)."""
        extra = self.adapt(model, hardware) if self.adapt is not None else {}
        own = own or {}
        if (self.budget_rule is not None and isinstance(own.get("chunked_prefill"), bool)
                and "max_num_batched_tokens" not in own):
            extra["max_num_batched_tokens"] = self.budget_rule(model, own["chunked_prefill"])
        return {**self.policy, **extra}

    def host_costs(self, num_layers: int, gpus: int = 1,
                   hardware: HardwareSpec | None = None) -> dict[str, float]:
        """Host costs (s) for a model of ``num_layers`` layers on ``gpus`` GPUs (tensor
        parallel): fixed, plus per-layer terms, plus the multi-GPU terms when ``gpus`` > 1;
        and, on a known GPU, the CUDA-graph limit (``graph_max_rows``, rows)."""
        out = dict(self.overhead)
        for key, per_layer in self.overhead_per_layer.items():
            out[key] = out.get(key, 0.0) + per_layer * num_layers
        if gpus > 1:
            for key, value in self.overhead_multi_gpu.items():
                out[key] = out.get(key, 0.0) + value
        if self.graph_rows is not None and hardware is not None:
            out["graph_max_rows"] = float(self.graph_rows(hardware, gpus))
        return out

    def kv_for(self, hardware: HardwareSpec | None, tp: int, policy: Mapping[str, Any],
               fraction: float | None = None) -> dict[str, Any]:
        """The ``[kv]`` defaults on ``tp`` x ``hardware``: ``kv``, with ``kv_rule``'s by GPU
        and TP where there is one and the GPU is known (``policy``: the stack's ``[policy]``
        defaults there; ``fraction``: the scenario's own memory fraction, if it sets one)."""
        out = dict(self.kv)
        if self.kv_rule is not None and hardware is not None:
            out.update(self.kv_rule(hardware, tp, dict(policy), fraction))
        return out

    def weight_bytes(self, model: ModelSpec, hardware: HardwareSpec, tp: int,
                     weight_dtype: str) -> int:
        """The weights' bytes in memory under this stack: the checkpoint's, plus the
        padding vLLM's Marlin MXFP4 MoE kernel gives the experts (hidden to a multiple of
        256, each GPU's expert inter to 128: ``Mxfp4MoEMethod.create_weights``, 0.10.2 and
        0.11.0) on the GPUs where the release runs it (``marlin_mxfp4``). Other kernels'
        padding is not counted."""
        own = model.weight_bytes(weight_dtype)
        if weight_dtype != "mxfp4" or self.marlin_mxfp4 is None or not self.marlin_mxfp4(
                hardware):
            return own
        return own + model.expert_pad_bytes(weight_dtype, tp, *MARLIN_ALIGN)

    def describe(self) -> str:
        """``vllm-v1 0.9``: the preset's name, for cost sources and summaries."""
        return f"{self.stack} {self.version}"


MARLIN_ALIGN = (256, 128)  # vLLM's Marlin MoE: hidden and each GPU's expert inter padded to
SM90_PREFIXES = ("h100", "h200", "b200")  # the catalogue's GPUs of compute capability 9.0 up


def _sm90_or_newer(hw: HardwareSpec) -> bool:
    """Hopper or Blackwell data-centre GPUs (compute capability 9.0 and up), by name: vLLM's
    MXFP4 MoE runs Marlin below that (``get_device_capability()[0] < 9``)."""
    return hw.name.startswith(SM90_PREFIXES)


def _marlin_below_sm90(hw: HardwareSpec) -> bool:
    """vLLM from 0.12 (``triton_kernels`` in the wheel): Marlin below SM90 only."""
    return not _sm90_or_newer(hw)


def _marlin_but_blackwell(hw: HardwareSpec) -> bool:
    """vLLM before 0.12: Marlin below SM90 and on Hopper (no ``triton_kernels``); Blackwell
    runs FlashInfer's kernels."""
    return not _sm90_or_newer(hw) or _hopper_name(hw)


def cost_args(preset: StackPreset | None, model: ModelSpec, hardware: HardwareSpec, tp: int,
              kv_dtype: str) -> dict[str, Any]:
    """What a stack gives ``cost_model_from_config`` for a deployment: its kernel tables'
    folder, its decode attention's KV reads and walk time, its all-reduce handshake, its
    prefill steps' extra weight passes and their scale, whose MoE kernels its experts
    read where not its own, and its prior's attention efficiency (none, 1, 0, 0, 0, 1,
    none and 1 without a stack)."""
    if preset is None:
        return {"stack": None, "stack_kv_reads": 1.0, "stack_walk_s": 0.0,
                "stack_sync_s": 0.0, "stack_prefill_passes": 0.0, "stack_prefill_scale": 1.0,
                "stack_moe_kind": None, "stack_attention_efficiency": 1.0}
    return {"stack": preset.profiles, "stack_moe_kind": preset.moe_kind,
            "stack_attention_efficiency": preset.attention_efficiency(model, hardware),
            "stack_kv_reads": preset.decode_kv_reads(model, tp, kv_dtype),
            "stack_walk_s": preset.decode_walk_s(hardware),
            "stack_sync_s": preset.allreduce_sync_s(hardware, tp),
            "stack_prefill_passes": preset.prefill_weight_passes,
            "stack_prefill_scale": preset.prefill_scale}


def stack_weight_bytes(preset: StackPreset | None, model: ModelSpec, hardware: HardwareSpec,
                       tp: int, weight_dtype: str) -> int:
    """:meth:`StackPreset.weight_bytes`, the checkpoint's own without a stack."""
    if preset is None:
        return model.weight_bytes(weight_dtype)
    return preset.weight_bytes(model, hardware, tp, weight_dtype)


def query_group(model: ModelSpec, tp: int) -> int:
    """Query heads per KV head on one of ``tp`` GPUs (a KV head is copied to every GPU
    once the GPUs outnumber the KV heads: Llama-3-70B at TP 16 has 4 query heads and 1 KV
    head per GPU)."""
    q = max(1, model.num_heads // tp)
    kv = max(1, model.num_kv_heads // tp)
    return max(1, q // kv)


def _preset(stack: str, version: str, policy: dict[str, Any], kv: dict[str, Any],
            sources: tuple[str, ...], *, profiles: str | None = None,
            per_layer: dict[str, float] | None = None,
            overhead: dict[str, float] | None = None,
            multi_gpu: dict[str, float] | None = None, **rest: Any) -> StackPreset:
    """A :class:`StackPreset` with its mappings frozen; ``rest``: its other fields by name
    (``adapt``, ``kv16_reread``, ``xqa_groups``, ``decode_walk_cycles``, ...)."""
    return StackPreset(stack, version, MappingProxyType(policy), MappingProxyType(kv),
                       MappingProxyType(overhead or {}), MappingProxyType(per_layer or {}),
                       MappingProxyType(multi_gpu or {}), profiles, sources, **rest)


GIB = 2**30
LONG_CONTEXT = 32_768  # vLLM v0 turns chunked prefill on above this max_model_len


def _gib(hw: HardwareSpec) -> float:
    return hw.memory_bytes / GIB


def _context(model: ModelSpec, hw: HardwareSpec) -> dict[str, Any]:
    """Every stack serves up to the model's own context (vLLM max_model_len, SGLang
    context_length, TensorRT-LLM max_seq_len default to the config's positions)."""
    return {"max_model_len": model.max_context_tokens}


def _trtllm_010(model: ModelSpec, hw: HardwareSpec) -> dict[str, Any]:
    """TensorRT-LLM 0.10's engines: ``trtllm-build`` left ``max_num_tokens`` unset by
    default, and the builder then sets it to max_batch_size x max_seq_len
    (TRTLLM_010_BUDGET_SOURCE): every waiting prompt fits one step's token budget."""
    return {**_context(model, hw),
            "max_num_batched_tokens": TRTLLM_MAX_NUM_SEQS * model.max_context_tokens}


def _vllm_v0_budget(model: ModelSpec, chunked: bool) -> int:
    """vLLM v0's ``SchedulerConfig`` default token budget: 512 with chunked prefill, else
    max(max_model_len, 2048)."""
    return 512 if chunked else max(model.max_context_tokens, 2048)


def _vllm_v0(model: ModelSpec, hw: HardwareSpec) -> dict[str, Any]:
    """v0.6: chunked prefill (512 tokens a step) only above 32K context, else a whole-prompt
    budget of max(max_model_len, 2048)."""
    chunked = model.max_context_tokens > LONG_CONTEXT
    return {**_context(model, hw), "chunked_prefill": chunked,
            "max_num_batched_tokens": _vllm_v0_budget(model, chunked)}


def _vllm_v0_whole(model: ModelSpec, hw: HardwareSpec) -> dict[str, Any]:
    """v0.5.0-0.5.3: whole prompts at any context, a budget of max(max_model_len, 2048)
    (chunked prefill above 32K came with vllm-project/vllm#6666)."""
    return {**_context(model, hw), "chunked_prefill": False,
            "max_num_batched_tokens": _vllm_v0_budget(model, False)}


def _hopper_name(hw: HardwareSpec) -> bool:
    """vLLM 0.7-0.8.4's test for its larger defaults: "h100" or "h200" in the device name."""
    return hw.name.startswith(("h100", "h200"))


def _v1_batches(model: ModelSpec, hw: HardwareSpec, big: bool,
                small_seqs: int = 256) -> dict[str, Any]:
    """vLLM V1's online-server batch defaults: 1024 sequences and 8192 tokens a step on
    the GPUs a release counts as big, else ``small_seqs`` and 2048."""
    return {**_context(model, hw), "max_num_seqs": 1024 if big else small_seqs,
            "max_num_batched_tokens": 8192 if big else 2048}


def _vllm_v1_08(model: ModelSpec, hw: HardwareSpec) -> dict[str, Any]:
    """v0.8.0-0.8.3: 1024 sequences on every GPU; 8192 tokens a step on H100 and H200,
    2048 on the others."""
    return _v1_batches(model, hw, _hopper_name(hw), small_seqs=1024)


def _vllm_v1_084(model: ModelSpec, hw: HardwareSpec) -> dict[str, Any]:
    """v0.8.4: 1024 sequences and 8192 tokens on H100 and H200, 256 and 2048 elsewhere."""
    return _v1_batches(model, hw, _hopper_name(hw))


def _vllm_v1_085(model: ModelSpec, hw: HardwareSpec) -> dict[str, Any]:
    """v0.8.5: GPUs of 70 GiB or more (A100-80GB too) get 1024 sequences and 8192 tokens."""
    return _v1_batches(model, hw, _gib(hw) >= 70)


def _vllm_v1_big(model: ModelSpec, hw: HardwareSpec) -> dict[str, Any]:
    """v0.9 on (v0.10 too): GPUs of 70 GiB or more (not A100) get 1024 sequences and 8192
    tokens a step."""
    return _v1_batches(model, hw, _gib(hw) >= 70 and not hw.name.startswith("a100"))


def _sglang(model: ModelSpec, hw: HardwareSpec) -> dict[str, Any]:
    """chunked_prefill_size by GPU memory: 2048 under 35 GiB, 4096 under 60, 8192 under 160,
    else 16384 (sglang_memory.TIERS_05, the table its memory rule reads)."""
    return {**_context(model, hw), "max_num_batched_tokens": chunk_05(hw)}


def _sglang_04(model: ModelSpec, hw: HardwareSpec) -> dict[str, Any]:
    """v0.4: chunked_prefill_size 2048 under 25,000 MB of GPU memory, else 8192."""
    size = 2048 if hw.memory_bytes / 2**20 < 25_000 else 8192
    return {**_context(model, hw), "max_num_batched_tokens": size}


def _sglang_03(model: ModelSpec, hw: HardwareSpec) -> dict[str, Any]:
    """v0.3: chunked_prefill_size 8192 on every GPU."""
    return {**_context(model, hw), "max_num_batched_tokens": 8192}


# vLLM's per-request CPU dispatch before its first token, which kernel timings miss: 0.8 ms
# per layer, as NVIDIA recalibrated it "against the full silicon corpus" (AIConfigurator
# 0.12.0 aiconfigurator_core/sdk/backends/vllm_backend.py, _prefill_dispatch_overhead_ms;
# its TensorRT-LLM and SGLang backends add none). It delays each request's first token and
# blocks no one else: our non-blocking request_s.
#
# And a blocking cost per step, 0.039 ms per layer, fitted to vLLM's own nightly latency
# benchmark (8 prompts of 32 tokens decoding 128, benchmarks/published_cases.toml
# vllm-nightly-*-latency-*): the steps those runs took beyond our vLLM kernel tables were
# 1.02-1.25 ms (Llama-3.1-8B, 32 layers, H100/H200), 3.0-3.1 ms (Llama-3-70B TP4, 80
# layers), 1.45-3.0 ms (Mixtral TP2, 32 layers); the median per layer is 0.039 ms
# (`python benchmarks/vllm_step_cost.py` prints them). They are V0 runs; V1 is given the
# same (no V1 run with its GPU stated was found).
VLLM_DISPATCH = {"request_s": 0.8e-3, "step_s": 0.039e-3}
VLLM_DISPATCH_SOURCE = ("host: request_s 0.8 ms x layers, AIConfigurator 0.12.0 "
                        "sdk/backends/vllm_backend.py _prefill_dispatch_overhead_ms; step_s "
                        "0.039 ms x layers fitted to vLLM's nightly latency runs on H100/H200 "
                        "(benchmarks/published_cases.toml vllm-nightly-*-latency-*)")
# V1 keeps the step cost but has no per-request dispatch before the first token: fitted
# request by request on a published vLLM 0.8.3 run with per-request records (Llama-3.3-70B,
# TP 8, 200 ShareGPT prompts at 1 req/s, its own send times: `servesim calibrate --from-run
# benchmarks/published_runs/llmk8s-a100-40gb-llama-3.3-70b-tp8-sharegpt200-qps01.json
# --scenario benchmarks/published_runs/llmk8s.toml --fit request_s` gives 0 ms, at the
# bound; with step_s or time_scale fitted too, 0 ms again). 0.8 ms x 80 layers put 64 ms
# on a first token measured at 65 ms in all (TTFT +108%). A likely reason, not checked:
# V1 runs short prefills as captured CUDA graphs (docs/stacks.md, "vLLM V1's host costs").
VLLM_V1_DISPATCH = {"step_s": VLLM_DISPATCH["step_s"]}
VLLM_V1_DISPATCH_SOURCE = (
    "host: step_s 0.039 ms x layers fitted to vLLM's nightly latency runs on H100/H200 "
    "(benchmarks/published_cases.toml vllm-nightly-*-latency-*); no request_s per layer: 0 "
    "ms fitted by servesim calibrate --from-run on a published vLLM 0.8.3 run's per-request "
    "records "
    "(benchmarks/published_runs/llmk8s-a100-40gb-llama-3.3-70b-tp8-sharegpt200-qps01.json)")
# The 0.8 line's API server before a first token, flat (the front end's work does not grow
# with the model): 6.96 ms, fitted by `python benchmarks/published_fit.py --case
# vllm0.8.3-llmk8s-a100-40gb-llama-3.3-70b-tp8-sharegpt200-qps1 --terms request_s --flat
# --high 20 --heldout vllm0.8` (stop 50) on the same run's TTFTs, which the replay read 11-13%
# short (its short prompts 3-6 ms short as well as its long ones: not only a prefill cost).
# The per-layer per-request fit above found 0 at its bound; flat, the 75 other vLLM 0.8
# runs held out read their mean TTFT within 15% 13.3% -> 40.0% (IOG's runs with their
# prompts cached by the server's earlier runs; `benchmarks/published.py --case vllm0.8`
# with and without `--set cost.overhead.request_s=0`, then published_compare.py). Later
# V1 releases are not measured here and keep none.
#
# Stop 70: part of that time is the API server taking requests in one at a time (asyncio's
# one event loop reads each request, tokenises it and hands it to the engine core, and
# writes the tokens back in turn): V1's AsyncLLM runs in the API server's process, the
# engine core in another. A burst shows it. llm-k8s's last run, 200 cached prompts at once,
# got no first token before 185 ms, then three steps' worth about 100 ms apart, where the
# replay gave all 200 theirs in one step at 191.8 ms (docs/gpu-profiles.md, "A vLLM
# run with per-request records"). The server's time a request (``intake_s``, a queue shared
# with its tokens: simulator/token_stream.py), fitted on that burst by `python
# benchmarks/published_fit.py --case vllm0.8.3-llmk8s-a100-40gb-llama-3.3-70b-tp8-
# sharegpt200-inf-cached --terms intake_s --flat --high 5 --heldout vllm0.8.3`: 1.7147 ms
# (with request_s below, that run's mean TTFT -46.8% -> +1.1%, median TPOT +3.4% -> +0.2%;
# docs/stacks.md, "vLLM V1's API server takes requests one at a time"). A request alone
# pays it too, so
# request_s is refitted beside it on the 1 req/s run (`... --case ...-qps1 --terms request_s
# --flat --high 20 --fixed intake_s=1.7147 --heldout vllm0.8`): 6.96 -> 5.4551 ms. Every
# V1 release has the same front end (one API server process unless
# --api-server-count says otherwise), so every V1 preset takes intake_s; request_s stays
# the 0.8 line's.
VLLM_V1_INTAKE = {"intake_s": 1.7147e-3}
VLLM_V1_INTAKE_SOURCE = (
    "host: intake_s 1.71 ms flat (the API server takes each request in, one at a time, and "
    "its tokens queue behind: simulator/token_stream.py), fitted by "
    "benchmarks/published_fit.py --terms intake_s --flat on a vLLM 0.8.3 burst of 200 "
    "cached prompts (benchmarks/published_cases_vllm_v1.toml vllm0.8.3-llmk8s-*-inf-cached)")
VLLM_V1_08_FRONT_END = {"request_s": 5.4551e-3}
VLLM_V1_08_FRONT_END_SOURCE = (
    "host, the 0.8 line: request_s 5.46 ms flat (the API server before a first token, "
    "beside intake_s), fitted by benchmarks/published_fit.py --flat --fixed "
    "intake_s=1.7147 on the same vLLM 0.8.3 run's TTFTs "
    "(benchmarks/published_cases_vllm_v1.toml vllm0.8.3-llmk8s-*-qps1)")
# The 0.8 line with more than one GPU: its MultiprocExecutor pickles each step's
# SchedulerOutput, one CachedRequestData object per running request, for the workers, and
# rank 0 sends the step's outputs back the same way; one GPU runs the model in the engine's
# process and serialises nothing (vllm-project/vllm#20232, 2025-06-29, v0.9.2: "serializing
# one big object is faster than serializing many (up to 1024) small objects", measured
# against "uni-process (no serialization)"). A flat cost per decode row, fitted by `python
# benchmarks/published_fit.py --case vllm0.8.3-llmk8s-a100-40gb-llama-3.3-70b-tp8-sharegpt200-
# qps16-cached --case vllm0.8.3-llmk8s-a100-40gb-llama-3.3-70b-tp8-sharegpt200-inf-cached
# --terms seq_s --flat --high 0.1` (Llama-3.3-70B on eight A100s, median ITL -9.5% and -16.0%
# -> +2.9% and -2.0%); the fit asks more of one row than the serialisation alone, so other
# per-row work of those steps may sit in it. The same term on one GPU makes vLLM 0.8's TP 1
# runs slow (vllm-project/vllm#14431's 1,000-prompt burst on one H100: median ITL -8% ->
# +108%), so it is a multi-GPU cost. Held out: IOG's TP 2 runs (docs/stacks.md, "vLLM 0.8
# on more than one GPU").
VLLM_V1_08_MULTI_GPU = {"seq_s": 52.5e-6}
VLLM_V1_08_MULTI_GPU_SOURCE = (
    "host, the 0.8 line on more than one GPU: seq_s 52.5 us per decode row (the "
    "multiprocess executor's per-request SchedulerOutput objects, vllm-project/vllm#20232), "
    "fitted on vLLM 0.8.3 runs of Llama-3.3-70B on eight A100s "
    "(benchmarks/published_cases_vllm_v1.toml vllm0.8.3-llmk8s-*-qps16-cached, -inf-cached)")
VLLM_KV = {"block_size": 16, "gpu_memory_utilization": 0.9}
# A model's sliding-window layers in vLLM's cache: until V1's hybrid KV-cache manager they
# cost as full-attention layers (every token of every layer), from it they draw their
# blocks from the one pool and keep the last window of each running request
VLLM_WINDOW_AS_FULL = {"window_share": 1.0}
VLLM_WINDOW_HELD = {"window_held": True}
VLLM_WINDOW_SOURCES = {
    False: ("sliding-window layers cost as full layers: vllm-project/vllm#10584 (v0.6.5: 'the "
            "scheduler treats it as a model without sliding window, and sliding window is "
            "only used for computation'); V1 before the hybrid manager, #14097 (2025-03): 'For "
            "models with global attention + sliding window attention, still regard as "
            "global-attention-only model in kv cache manager' ([kv] window_share 1.0)"),
    True: ("vllm-project/vllm#17996 ('[v1] Hybrid Memory Allocator', 2025-06, from 0.9.1; "
           "0.9.0 still counted window layers as full): the window layers take blocks from "
           "the one pool, and SlidingWindowManager.remove_skipped_blocks frees those before a "
           "request's last window at its next step (#14097: the whole chunk is allocated "
           "first, then freed): [kv] window_held"),
}

# SGLang 0.3.0's host costs, per layer, fitted by `python benchmarks/published_fit.py --case
# sglang0.3.0-readme060-a100-80gb-llama-3.1-8b-tp1-sharegpt-rps4 --case
# sglang0.3.0-readme060-h100-sxm-llama-3.1-70b-tp4-sharegpt-rps4` (two of SGLang's own
# online runs, sgl-project/sglang benchmark/benchmark_vllm_060/README.md; its other runs are
# held out, docs/stacks.md). request_s is the latency a request spends outside the engine
# (tokenizer manager, ZMQ hops, detokenizer, HTTP streaming), step_s the scheduler's work
# per step.
SGLANG_03_HOST = {"request_s": 0.1943e-3, "step_s": 0.0484e-3}
SGLANG_03_HOST_SOURCE = ("host: request_s 0.1943 ms x layers, step_s 0.0484 ms x layers, "
                         "fitted by benchmarks/published_fit.py to SGLang 0.3.0's RPS-4 runs "
                         "(benchmarks/published_cases.toml sglang0.3.0-readme060-*-rps4)")
# SGLang 0.4's and 0.5's, fitted the same way on each release's own runs at light load
# (stop 41; docs/stacks.md, "SGLang 0.4 and 0.5 host costs"): 0.4 on DataCrunch's two
# Llama-3.3-70B runs on four H200s at 1 req/s (`python benchmarks/published_fit.py --case
# sglang0.4-dc-h200-llama-3.3-70b-tp4-random1024-1024-rps1 --case
# sglang0.4-dc-h200-llama-3.3-70b-tp4-random1024-1024-rps1-run1212 --heldout sglang0.4-dc-`),
# 0.5 on the SGLang cookbook's two one-client Llama-3.1-70B runs on eight A100s
# (`... --case sglang0.5.6-cookbook-a100-80gb-llama-3.1-70b-tp8-random1000-1000-n10-mc1
# --case sglang0.5.6-cookbook-a100-80gb-llama-3.1-70b-tp8-random8000-1000-n10-mc1
# --heldout sglang0.5.6-cookbook-`; each run's first prompt cached by its warm-up request,
# benchmarks/published_cases_docs.toml warm_prompts). Their other runs are held out. 0.4's
# were refitted with its overlap scheduler in place (stop 49: SGLANG_OVERLAP_POLICY; the
# 1 req/s runs keep ~8 requests in flight (a mean end-to-end of 7.8 s), so nearly every
# arrival there waits the step the host term had stood in for): request_s 0.4700 ->
# 0.2964 ms a layer, step_s 0.0256 -> 0.0253; 0.5's one-client fit is unchanged by it
# (its requests find the engine idle).
SGLANG_04_HOST = {"request_s": 0.2964e-3, "step_s": 0.0253e-3}
SGLANG_04_HOST_SOURCE = (
    "host: request_s 0.2964 ms x layers, step_s 0.0253 ms x layers, fitted by "
    "benchmarks/published_fit.py to SGLang 0.4's two 1 req/s runs of Llama-3.3-70B on 4 x "
    "H200 (benchmarks/published_cases_result_files.toml "
    "sglang0.4-dc-h200-llama-3.3-70b-tp4-random1024-1024-rps1*)")
SGLANG_05_HOST = {"request_s": 0.4794e-3, "step_s": 0.0225e-3}
# SGLang 0.4 replays decode steps of up to cuda_graph_max_bs rows as CUDA graphs: 160, or 8
# under 25,000 MB of GPU memory (its server_args.py, search-index file id 309022971: "Set
# cuda graph max batch size"); a larger batch runs its forward eagerly. The eager step's
# extra launch and Python time, per layer, fitted by `python benchmarks/published_fit.py
# --case sglang0.4-dc-h200-llama-3.3-70b-tp4-random1024-1024-rps16
# --case sglang0.4-dc-h200-llama-3.3-70b-tp4-random1024-1024-rps16-run1212 --terms eager_s
# --heldout sglang0.4-dc-` (two runs of one configuration; docs/stacks.md).
SGLANG_04_EAGER_S = 0.9547e-3
SGLANG_04_GRAPH_SOURCE = (
    "decode steps of more than cuda_graph_max_bs rows run eagerly: 160, or 8 under 25,000 MB "
    "(server_args.py of the 0.4 line, search-index file id 309022971); eager_s fitted by "
    "benchmarks/published_fit.py on DataCrunch's two 16 req/s Llama-3.3-70B runs on 4 x H200")


def _sglang_04_graph_rows(hw: HardwareSpec, tp: int) -> int:
    """v0.4's cuda_graph_max_bs: 8 under 25,000 MB of GPU memory, else 160."""
    return 8 if hw.memory_bytes / 2**20 < 25_000 else 160


# SGLang 0.2 and 0.3 captured decode graphs for batch sizes [1, 2, 4] + [8, 16, ..., 160]
# whatever the GPU's memory (0.2's model_runner.py, search-index file id 10267136; 0.3's
# cuda_graph_runner.py, 414132433; the memory rule above came with 0.4): the same eager
# cost past 160 rows, as 0.4's fit gives it (not fitted on 0.2 or 0.3; docs/stacks.md).
SGLANG_03_GRAPH_SOURCE = (
    "decode steps of more than 160 rows run eagerly (0.2's model_runner.py and 0.3's "
    "cuda_graph_runner.py capture batch sizes 1, 2, 4, 8-160 by 8 on every GPU; search-index "
    "file ids 10267136, 414132433); eager_s is 0.4's fit, held out on 0.2 and 0.3")


def _sglang_03_graph_rows(hw: HardwareSpec, tp: int) -> int:
    """v0.2-0.3's largest captured decode batch: 160 on every GPU."""
    return 160


SGLANG_05_HOST_SOURCE = (
    "host: request_s 0.4794 ms x layers, step_s 0.0225 ms x layers, fitted by "
    "benchmarks/published_fit.py to SGLang 0.5.6's two one-client runs of Llama-3.1-70B on "
    "8 x A100 (benchmarks/published_cases_docs.toml "
    "sglang0.5.6-cookbook-a100-80gb-llama-3.1-70b-tp8-*-n10-mc1)")
SGLANG_POLICY = {"name": "chunked", "max_num_seqs": 2048, "admission": "conservative",
                 "preemption": "fewest_outputs", "mixed_chunks": False}
# SGLang 0.4 made its overlap scheduler the default (server_args disable_overlap_schedule
# False): the next batch is formed and launched while the current one runs, so a request
# received during a step joins the step after the next (scheduler.py event_loop_overlap).
# TensorRT-LLM's PyTorch backend does the same ("introduces one extra decoding step", its
# docs/source/features/overlap-scheduler.md); no preset here carries it for TensorRT-LLM,
# whose published cases here give no TTFT at load to check it on.
SGLANG_OVERLAP_POLICY = {**SGLANG_POLICY, "overlap_schedule": True}
SGLANG_OVERLAP_SOURCE = (
    "overlap_schedule: SGLang's zero-overhead batch scheduler, the default from v0.4 "
    "(lmsys.org/blog/2024-12-04-sglang-v0-4; server_args.py disable_overlap_schedule "
    "False); scheduler.py event_loop_overlap receives requests, forms and launches the next "
    "batch, then processes the previous batch's results")
SGLANG_KV = {"block_size": 1, "gpu_memory_utilization": 0.88, "prefix_caching": True}
# Prefix caching out of the box: SGLang's radix cache (ServerArgs disable_radix_cache
# False), vLLM V1's (EngineArgs enable_prefix_caching: "V1 turns on prefix caching by
# default", vLLM's tests/v1/engine/test_engine_args.py), TensorRT-LLM's LLM API
# (KvCacheConfig enable_block_reuse True in the 1.3 reference; the 1.0 preset takes it).
# vLLM V0 and TensorRT-LLM's engine-era executor (enableBlockReuse false) left it off.
PREFIX_CACHING_SOURCE = (
    "kv.prefix_caching: on by default in vLLM V1 (EngineArgs enable_prefix_caching; 'V1 "
    "turns on prefix caching by default'), SGLang (radix cache, --disable-radix-cache to "
    "turn off) and TensorRT-LLM's LLM API (KvCacheConfig enable_block_reuse True); off in "
    "vLLM V0 and TensorRT-LLM 0.x engines; a static or dynamic policy keeps it off")
SGLANG_KV_DTYPE_SOURCE = (
    "sglang server_args.py kv_cache_dtype default 'auto' (docs/backend/server_arguments.md: "
    "'Dtype of the kv cache, defaults to the dtype'): an FP8 checkpoint keeps a bf16 cache")
SGLANG_SOURCES = (
    "sglang 0.5 python/sglang/srt/server_args.py (search-index file id 8356329, the one "
    "the memory rule reads; an earlier 0.5 file, id 18295442, had 8192 from 35 GiB): "
    "chunked_prefill_size 2048 under 35 GiB, 4096 under 60 (A100 40GB, L40), 8192 under "
    "160, else 16384; page_size 1; mem_fraction_static from the GPU's memory (below; 0.88 "
    "where the GPU is not known)",
    "schedule_policy.py PrefillAdder (new_token_ratio admission), scheduler.py "
    "retract_decode (fewest outputs first, back to the queue's tail); "
    "scheduler.py get_next_batch_to_run: a prefill batch first, else decode "
    "(enable_mixed_chunk false)",
    "max_running_requests: derived from the KV pool (the max_num_seqs source); 2048 where "
    "the pool is not known")
# SGLang 0.3 and 0.4's server defaults, re-read (sources below). What differs from 0.5 is
# chunked_prefill_size's rule; the rest is as 0.5's preset models it. mem_fraction_static
# falls with TP (0.88 at TP 1, 0.87 at 2, 0.85 at 4, 0.81 (0.3: 0.83) at 8): each preset's
# kv_rule gives it by TP (simulator/sglang_memory.py).
SGLANG_03_SOURCES = (
    "sglang v0.3.x python/sglang/srt/server_args.py (search-index file id 455044790, the "
    "release that deprecates --disable-flashinfer for --attention-backend): "
    "chunked_prefill_size 8192 on every GPU, max_prefill_tokens 16384, schedule_policy "
    "lpm, schedule_conservativeness 1.0, enable_mixed_chunk false; mem_fraction_static "
    "by TP (below)",
    "sglang v0.3.x python/sglang/global_config.py (search-index file id 170582854): "
    "new_token_ratio 0.7 falling by 0.001 a decode step to 0.1 (here by 0.001003 to "
    "0.098, 0.5's), retract_decode_steps 20",
    "max_running_requests: from the KV pool (model_runner.py init_memory_pool; the "
    "max_num_seqs source)")
SGLANG_04_SOURCES = (
    "sglang v0.4.x python/sglang/srt/server_args.py (search-index file ids 26596591 and "
    "483039325, the 0.4.4-0.4.6 line): chunked_prefill_size 2048 under 25,000 MB of GPU "
    "memory, else 8192; cuda_graph_max_bs 160 (8 under 25,000 MB; not modelled); "
    "mem_fraction_static by TP (below)",
    *SGLANG_SOURCES[1:])
# SGLang 0.2 (the 0.2.0-0.2.12 releases): the same admission and retraction as 0.3, but
# whole prompts: chunked prefill was opt-in until sgl-project/sglang#1040 turned it on
# (8192 tokens) in the 0.2.13 line. A step is a prefill batch of whole prompts (at most
# max_prefill_tokens 16384 new tokens) whenever one can start, else one decode step of
# every running request: the continuous policy without chunked or in-flight prefill.
SGLANG_02_POLICY = {"name": "continuous", "max_num_seqs": 2048, "max_num_batched_tokens": 16384,
                    "chunked_prefill": False, "mixed_prefill": False, "mixed_chunks": False,
                    "long_prompt_alone": True, "admission": "conservative",
                    "preemption": "fewest_outputs"}
SGLANG_02_SOURCES = (
    "sglang v0.2.x python/sglang/srt/managers/tp_worker.py (search-index file id 5032624527, "
    "the 0.2 line with opt-in chunked prefill, before PrefillAdder): forward_step runs a "
    "prefill batch whenever get_new_prefill_batch returns one, else decodes the running "
    "batch (never both in one forward); max_prefill_tokens 16384 when unset bounds a "
    "prefill batch's new tokens, but a batch's first prompt may be longer and runs alone; "
    "a request starts if prompt + max_new_tokens + the batch's < free tokens - "
    "sum((max_new_tokens - decoded) x new_token_ratio) over running requests (no 4096 "
    "clip in 0.2: not modelled); retracted requests go to the queue's tail; "
    "max_running_requests min(KV tokens // 2, request slots - 1) (the max_num_seqs source)",
    "chunked prefill off by default in 0.2.0-0.2.12: --chunked-prefill-size added opt-in by "
    "sgl-project/sglang#800 (2024-07-29), on by default (8192) from sgl-project/sglang#1040 "
    "(the 0.2.13-0.2.15 server_args.py, search-index file id 151270057: chunked_prefill_size "
    "8192, max_prefill_tokens 16384, schedule_conservativeness 1.0, enable_mixed_chunk "
    "false; mem_fraction_static by TP, below)",
    "new_token_ratio: global_config.py init 0.7, min 0.1 x schedule_conservativeness, decay "
    "0.001 a decode step (as 0.3's, search-index file id 170582854; here 0.5's 0.098 floor); "
    "num_continue_decode_steps 10, but tp_worker stops after a decode step that streams "
    "output: 1 step per decision for streaming clients (bench_serving), as here",
    "schedule_batch.py retract_decode (search-index file id 221266699): fewest output "
    "tokens first, then the longest prompt",
    "host: SGLang 0.3's (no 0.2 run with latencies at low load was found), "
    + SGLANG_03_HOST_SOURCE)
VLLM_RULES = {"admission": "greedy", "preemption": "newest"}  # v0 and v1 alike

# TensorRT-LLM: the in-flight batching rules are the same in 0.10 (C++ batch manager,
# TensorRT engines) and 1.0 (PyTorch backend); what 0.10 changes is its KV block and a
# blocking host cost per output token (docs/stacks.md, "TensorRT-LLM 0.10").
TRTLLM_MAX_NUM_SEQS = 2048  # max_batch_size (1.0's llmapi BuildConfig default)
TRTLLM_POLICY = {"name": "continuous", "max_num_seqs": TRTLLM_MAX_NUM_SEQS,
                 "max_num_batched_tokens": 8192,
                 "chunked_prefill": False, "mixed_prefill": True, "admission": "no_evict"}
TRTLLM_FP8_SOURCE = (
    "docs/source/reference/support-matrix.md (0.13-0.18): Hopper and Ada Lovelace FP32, FP16, "
    "BF16, FP8, INT8, INT4; Ampere (SM80, SM86) FP32, FP16, BF16, INT8, INT4: no FP8 on an "
    "A100")
TRTLLM_IFB_SOURCES = (
    "in-flight batching: generation requests first, then whole context requests in the "
    "same iteration within max_num_tokens (docs/source/performance/"
    "tuning-max-batch-size-and-max-num-tokens.md @ 16d2467e, 'Understanding the "
    "TensorRT-LLM scheduler')",
    "cpp/tensorrt_llm/batch_manager/capacityScheduler.cpp: GUARANTEED_NO_EVICT "
    "(the default capacity scheduler policy)")
# 0.10's host cost per output token, s, the same for every model (the C++ batch manager
# does it per request, not per layer): fitted by `python benchmarks/published_fit.py
# --fit-prefix trtllm0.10-h100-sxm-llama-3-70b --fit-prefix trtllm0.10-h200-llama-3-70b
# --fit-prefix trtllm0.10-a100-80gb-llama-3-70b --fit-prefix trtllm0.10-h100-sxm-llama-2-70b-fp8
# --fit-prefix trtllm0.10-h200-llama-2-70b-fp8 --heldout trtllm0.10- --terms token_s --flat
# --throughput`: the 24 rows of 0.10's perf-overview table whose kernels are TensorRT-LLM's
# own measured tables at the model's true shapes (Llama-3-70B, and Llama-2-70B FP8 on
# Llama-3.1-70B's), in sample (`fitted` in benchmarks/published_cases.toml); the other 55
# are held out. What it stands for: those runs streamed every token (gptManagerBenchmark
# --streaming) from up to 2048 running requests under max_utilization; 0.11 dropped both
# and its decode-heavy figures rose on the same GPUs while KV-bound Llama-2-7B's (tens of
# requests at once) did not move (docs/stacks.md, "TensorRT-LLM 0.10").
TRTLLM_010_TOKEN_S = 24.2e-6
# 0.10's token budget: trtllm-build's own default, max_batch_size x max_seq_len (no 8192 cap;
# BuildConfig's 8192 default came later). NIM 1.0's TensorRT-LLM engines behave so: under 250
# clients in lockstep their mean TTFT is the time to prefill all 250 prompts at once
# (benchmarks/published_cases_nim_dli.toml; docs/stacks.md, "TensorRT-LLM 0.10").
TRTLLM_010_BUDGET_SOURCE = (
    "max_num_tokens: trtllm-build of the 0.10-0.11 era (tensorrt_llm/commands/build.py, "
    "'--max_num_tokens' default None; search-index file id 5657377103, which still has "
    "--max_output_len, removed in 0.12) and tensorrt_llm/_common.py check_max_num_tokens "
    "(file id 39614393: 'remove_input_padding is enabled, while max_num_tokens is not set, "
    "setting to max_batch_size*max_seq_len'): max_num_seqs x max_model_len")
# 0.10-0.11 engines decode without multi-block mode (PluginConfig ``_multi_block_mode``
# default False until 0.12 made it a runtime option): one thread block walks a sequence's
# cache per head, TRTLLM_WALK_CYCLES SM cycles per context token and layer
# (simulator/costs/decode_walk.py). Fitted by `python benchmarks/decode_walk_fit.py`: the
# median one-client ITL slope of NIM 1.0's four A100 settings (benchmarks/published_cases_
# nim_dli.toml) x the A100's 1.41 GHz; the H100 rows and every multi-client row held out.
TRTLLM_WALK_CYCLES = 17.2
# 0.10-0.11 engines' custom all-reduce: a copy into the IPC workspace and flag barriers
# across the GPUs per all-reduce (simulator/costs/allreduce_sync.py), in multiples of the
# GPU's NCCL small-message latency at that TP. Fitted by `python benchmarks/allreduce_sync_fit.py`
# to NIM 1.0's one-client A100 multi-GPU rows; the H100 rows and every multi-client row
# held out.
TRTLLM_ALLREDUCE_SYNC = 1.27
TRTLLM_WALK_SOURCE = (
    "decode attention without multi-block mode: 0.10/0.11-era tensorrt_llm/plugin/plugin.py "
    "PluginConfig _multi_block_mode default False (search-index file id 2747049588); "
    f"{TRTLLM_WALK_CYCLES:g} SM cycles per context token and layer, fitted by "
    "benchmarks/decode_walk_fit.py to NIM 1.0's one-client A100 rows")
TRTLLM_ALLREDUCE_SYNC_SOURCE = (
    "all-reduce: the 2024 AllReduce plugin's custom kernel for messages within its IPC "
    "workspace (16 MB at TP 2, else 8 MB: tensorrt_llm/plugin/plugin.py "
    "CustomAllReduceHelper.max_workspace_size_auto, search-index file id 2747049588) copies "
    "its input into the workspace and meets the other ranks at flag barriers "
    "(customAllReduceKernels AllReduceParams peer_barrier_ptrs_in/_out, ping-pong buffers; "
    "file id 2807819442); "
    f"{TRTLLM_ALLREDUCE_SYNC:g} x the GPU's NCCL small-message latency more per all-reduce "
    "than the 1.x tables, fitted by benchmarks/allreduce_sync_fit.py to NIM 1.0's "
    "one-client A100 rows")
TRTLLM_012_MULTI_BLOCK_SOURCE = (
    "0.12 on (until 1.0): as 0.11, but multi-block mode became a runtime option, on unless "
    "turned off "
    "(executor ExtendedRuntimePerfKnobConfig(bool multiBlockMode = true, ...), search-index "
    "file id 3290353992; 0.12 release notes: 'The multi_block_mode argument is moved from "
    "build stage ... to the runtime'): no decode walk")
# 0.10's masked MHA kernel over a 16-bit cache (the group sizes XQA lacked: 4 query heads
# per KV head): 1 + TRTLLM_010_MASKED_REREAD x (G - 1) reads a step, L2 serving the rest of
# its G. Fitted by `python benchmarks/trtllm_kv16_fit.py --preset 0.10 --fit-gpu all` to the
# 16 held-out FP16 rows of 0.10's perf-overview table it applies to (Llama-3-8B, Mixtral-8x7B
# on A100 and H100), which are in sample since; NIM 1.0's FP16 Llama-3-8B rows held out.
TRTLLM_010_MASKED_REREAD = 0.234
# 0.10's engines took longer to a first token than the 1.x tables price, at short prompts
# about one pass over each GPU's weights per prefill step (simulator/costs/prefill_pass.py);
# the passes fitted by `python benchmarks/prefill_pass_fit.py F` (F: the course cases run
# with `--set cost.prefill_pass_s=0`) on NIM 1.0's four A100 settings' one-client rows of
# 200-token prompts (in sample); the H100 settings' held out.
TRTLLM_010_PREFILL_PASSES = 0.95
TRTLLM_PREFILL_PASS_SOURCE = (
    f"TensorRT-LLM 0.10 engines: a step that prefills takes {TRTLLM_010_PREFILL_PASSES:g} "
    "passes over the GPU's weights (at peak HBM bandwidth) more than the 1.x kernel tables: "
    "empirical, fitted by benchmarks/prefill_pass_fit.py to NIM 1.0's A100 one-client "
    "200-token rows (docs/stacks.md, 'TensorRT-LLM 0.10')")
# And in proportion: NIM 1.0's one-client 2,000- and 7,000-token prompts read 3-27% slower
# than the tables plus that pass price, on both GPUs. A factor on the same prefill-only
# steps (simulator/costs/prefill_pass.py), fitted by `python benchmarks/prefill_scale_fit.py`
# on the course's A100 rows, their first round spread (in sample; the H100 rows held out),
# with the pass at 0.95 (a joint grid keeps it; docs/stacks.md, "TensorRT-LLM 0.10's
# prefill steps, in proportion").
TRTLLM_010_PREFILL_SCALE = 1.09
TRTLLM_PREFILL_SCALE_SOURCE = (
    f"TensorRT-LLM 0.10 engines: a step that only prefills takes {TRTLLM_010_PREFILL_SCALE:g}x "
    "the 1.x kernel tables' time before that pass: empirical, fitted by "
    "benchmarks/prefill_scale_fit.py to NIM 1.0's A100 rows (docs/stacks.md, 'TensorRT-LLM "
    "0.10')")
TRTLLM_010_XQA_SOURCE = (
    "TensorRT-LLM v0.10.0 (commit 9bd15f19) decoderXQARunner.h DecoderXQARunner::shouldUse: "
    "single-token decode only for 8 or 1 query heads per KV head (cubin/xqa_kernel_cubin.h: "
    "nqpkv_8 kernels); decoderXQARunner.cpp: JIT XQA never on SM90, elsewhere only with "
    "TRTLLM_ENABLE_XQA_JIT=1; so 4 query heads per KV head (Llama-3-8B, Mistral-7B, "
    "Mixtral-8x7B) run the masked MHA kernel: an FP8 KV cache read 4x a step, a 16-bit one "
    f"1 + {TRTLLM_010_MASKED_REREAD:g} (G - 1) = {1 + 3 * TRTLLM_010_MASKED_REREAD:.2f}x at G = 4 "
    "(L2 serves the rest; fitted by benchmarks/trtllm_kv16_fit.py --preset 0.10 --fit-gpu all "
    "to 0.10's 16 FP16 rows at G = 4)")
TRTLLM_010_SOURCES = (
    "0.10 TensorRT engines: tensorrt_llm/plugin/plugin.py PluginConfig (0.10/0.11): "
    "tokens_per_block 64, use_fp8_context_fmha off; KV fraction 0.9 as 0.10's "
    "perf-overview runs set it (--kv_cache_free_gpu_mem_fraction 0.9)",
    "0.10 max_batch_size is 1.0's (2048), not re-read for 0.10; the 0.10 perf-overview "
    "runs give theirs (2048, 2048) as case knobs",
    TRTLLM_010_BUDGET_SOURCE,
    "decode attention over a 16-bit KV cache: 0.11's fitted re-read term (a TensorRT "
    "engine release too; with it the 55 held-out rows read 49% within 15%, 45% without)",
    f"host: token_s {TRTLLM_010_TOKEN_S * 1e6:g} us per output token (blocking), fitted "
    "by benchmarks/published_fit.py to the 24 Llama-3-70B and Llama-2-70B FP8 TP4 rows of "
    "0.10's perf-overview table (benchmarks/published_cases.toml, fitted = ...)")
# TensorRT-LLM sizes its KV cache as a share of the memory still free once the engine and
# its buffers are loaded (KvCacheConfig free_gpu_memory_fraction, 0.9 by default), not of
# the whole memory as vLLM's gpu_memory_utilization: [kv] memory_share = "free". 0.10 keeps
# "total": NIM 1.0's engines (its main user here) carry a KV fraction fitted under that rule,
# and refitted under "free" (benchmarks/nim_dli_kv_fit.py picks 0.85 again on the A100
# rows) their held-out H100 rows read worse (docs/stacks.md, "TensorRT-LLM's KV cache: a
# share of the free memory").
TRTLLM_FREE_SHARE_SOURCE = (
    "KV cache: free_gpu_memory_fraction 0.9 of the memory the weights and a 2 GB/GPU reserve "
    "leave free ([kv] memory_share = 'free'; KVCacheManager::calculateMaxNumBlocks, "
    "cpp/tensorrt_llm/batch_manager/kvCacheManager.cpp, search-index file id 36927720914)")
TRTLLM_010_TOTAL_SHARE_SOURCE = (
    "KV cache: 0.9 of each GPU's whole memory less the weights and reserve ([kv] "
    "memory_share = 'total'), the rule NIM 1.0's KV fraction was fitted under "
    "(benchmarks/nim_dli_cases.py KV_MEMORY_FRACTION); "
    "TensorRT-LLM's own rule is a share of the free memory (the later presets)")
# 0.11-0.17 (TensorRT engines, the C++ executor, streaming off in the published runs): decode
# attention over a 16-bit KV cache reads it 1 + TRTLLM_011_KV16_REREAD x (G - 1) times a
# step in units of the kernel tables' one read (G: query heads per KV head on a GPU). Fitted
# by `python benchmarks/trtllm_kv16_fit.py` to the A100 rows of 0.11-0.17's max-throughput
# tables with a 16-bit cache, held out on every other GPU (docs/stacks.md, "TensorRT-LLM
# 0.11 to 0.17").
TRTLLM_011_KV16_REREAD = 0.108
TRTLLM_011_SOURCES = (
    "0.11-0.17 TensorRT engines: in-flight batching and GUARANTEED_NO_EVICT as 1.0 "
    "(0.11's perf-overview dropped max_utilization and streaming); max_batch_size / "
    "max_num_tokens / KV block are 1.0's defaults, not re-read for these releases",
    "decode attention over a 16-bit KV cache: fitted re-read term (benchmarks/"
    "trtllm_kv16_fit.py; docs/stacks.md)")

VLLM_V1_SCHEDULER = ("chunked prefill always on in V1 (vllm/v1/core/sched/scheduler.py: "
                     "decodes first, then prefill chunks in the token budget)")

# vLLM V0 with more than one GPU: the driver worker serialises each step's batch (a
# SequenceGroupMetadata per running sequence) and sends it to the other workers, work that
# grows with the batch and that one GPU does not do. A flat cost per decode row, fitted by
# `python benchmarks/published_fit.py --case vllm0.6.2-issue9476-h100-sxm-llama-3-8b-tp2-
# sharegpt2000-ms8 --terms seq_s --flat --throughput` (Llama-3-8B on two H100s, 2,000
# ShareGPT prompts at once: +45.4% -> +0.1%); held out: the other multi-GPU vLLM 0.6 runs
# (docs/stacks.md, "vLLM 0.6 on more than one GPU").
VLLM_06_MULTI_GPU = {"seq_s": 30.6e-6}

# vLLM 0.5's engine loop did, between steps and blocking, what 0.6 overlapped or cut:
# detokenising and building each request's output, scheduling and preparing each row
# (0.6.0: vllm-project/vllm#7049 overlapped the output processing with the next step,
# and more). vLLM's v0.6.0 blog profiled v0.5.3 on Llama 3 8B and one H100: 33% of the
# time in the HTTP API server, 29% "scheduling" (those), 38% on the GPU. A cost per output
# token that gives that split on the blog's workload (500 ShareGPT prompts at once, means
# 202 / 179) on top of the 0.6 preset's host costs: `python
# benchmarks/vllm05_host_share.py`. 0.5.0-0.5.3 ran the API server in the engine's
# process: 62 host parts to 38; 0.5.4 moved it to its own (vllm-project/vllm#6883): 29 to
# 38. Checked against the blog's headline (v0.6.0 /
# v0.5.3 throughput 2.7x on 8B, 1.8x on 70B TP 4): `... --ratios`, docs/stacks.md.
VLLM_05_TOKEN_S = 228.4e-6
VLLM_054_TOKEN_S = 95.8e-6
VLLM_05_HOST_SOURCE = (
    "host: token_s {us:g} us per output token, blocking: the v0.6.0 blog's profile of v0.5.3 "
    "(Llama 3 8B, one H100: API server 33%, scheduling 29%, GPU 38%) as {parts} host parts "
    "to 38 on the blog's 500 ShareGPT prompts at once (benchmarks/vllm05_host_share.py)")
VLLM_05_PARTS = {"0.5": "62 (API server in the engine's process until vllm-project/vllm#6883)",
                 "0.5.4": "29 (the API server in its own process from vllm-project/vllm#6883)"}
VLLM_05_ARGS = ("vllm {release} vllm/engine/arg_utils.py: max_num_seqs 256, block_size 16, "
                "gpu_memory_utilization 0.9; {chunked}; max_num_batched_tokens "
                "max(max_model_len, 2048) without chunked prefill")
VLLM_06_MULTI_GPU_SOURCE = (
    "host, more than one GPU: seq_s 30.6 us per decode row, fitted on vllm-project/vllm#9476 "
    "(TP 2; benchmarks/published_cases_serving_runs.toml)")

VLLM_KV_DTYPE_SOURCE = (
    "vllm/engine/arg_utils.py --kv-cache-dtype default 'auto': 'will use the model data "
    "type' (an FP8 checkpoint keeps a bf16 KV cache unless --kv-cache-dtype fp8)")


# False: before 0.12, True: from 0.12 (the preset's ``moe_kind``)
VLLM_MXFP4_SOURCE = {
    False: ("vllm v0.10.2/v0.11.0 vllm/model_executor/layers/quantization/mxfp4.py "
            "get_mxfp4_backend: on SM90 'Using Triton backend' only when triton_kernels imports "
            "(has_triton_kernels), else 'Using Marlin backend'; below SM90 Marlin always. Neither "
            "the PyPI wheels nor docker/Dockerfile install triton_kernels (vllm-project/vllm"
            "#27370, 2025-10-22: users 'have to install triton_kernels manually'): gpt-oss's "
            "MXFP4 experts priced by Marlin (cost moe_kind 'vllm-marlin', "
            "calibrate/moe_marlin.py)"),
    True: ("vllm-project/vllm#28788 ('[Build] Add OpenAI triton_kernels', first in v0.12.0): "
           "vllm/third_party/triton_kernels built into the wheel, so Hopper runs gpt-oss's "
           "MXFP4 experts on OpenAI's triton kernels, as AIConfigurator's vLLM tables timed"),
}


# vLLM V1 serves a model with attention sinks (gpt-oss) below SM90 on its Triton attention
# kernel, not FlashAttention (FA2 has no sinks; FA3, Hopper only, and FlashInfer on
# Blackwell do): the kernel's compute efficiency as a share of the matmuls', fitted on
# GPUStack's 32,000-token gpt-oss-20b bursts on one A100 (docs/stacks.md, "vLLM's Triton
# attention below SM90")
VLLM_TRITON_SINK_ATTENTION = 0.168
VLLM_TRITON_SINK_SOURCE = (
    "vllm v0.10.2/v0.11.0 vllm/platforms/cuda.py get_attn_backend_cls: 'if has_sink and not "
    "cls.is_device_capability(90): Using Triton backend on V1 engine' (gpt-oss's sinks below "
    "SM90; Hopper FlashAttention 3, Blackwell FlashInfer): its prefill attention at "
    f"{VLLM_TRITON_SINK_ATTENTION:g} of the matmuls' compute efficiency in the prior "
    "(attention_efficiency), fitted: python benchmarks/published_fit.py --knob "
    "attention_efficiency --case "
    "vllm0.11.0-gpustack-a100-80gb-gpt-oss-20b-tp1-random32000-100-n100")


def _vllm_sink_attention(model: ModelSpec, hw: HardwareSpec) -> float:
    """vLLM V1's attention efficiency for ``model`` on ``hw``: its Triton kernel's for a
    model with attention sinks below SM90, else 1 (FlashAttention and FlashInfer)."""
    if model.attention_sinks and not _sm90_or_newer(hw):
        return VLLM_TRITON_SINK_ATTENTION
    return 1.0


def _vllm_v1(version: str, adapt: Callable[[ModelSpec, HardwareSpec], dict[str, Any]],
             sources: tuple[str, ...], overlap: bool = False,
             host_08: bool = False, triton_kernels: bool = False,
             window_held: bool = True) -> StackPreset:
    """A vLLM V1 release: chunked prefill always, vLLM's rules, kernel tables and host
    costs; what changed between releases is the batch defaults (``adapt``), from 0.14
    async scheduling (``overlap``: ``policy.overlap_schedule``), where measured the
    0.8 line's host costs (``host_08``: the API server's time before a first token and,
    with more than one GPU, the executor's cost per decode row), and from 0.12 OpenAI's
    ``triton_kernels`` in the wheel (``triton_kernels``: Hopper's MXFP4 experts on them, as
    the vLLM tables timed; before, on Marlin: ``moe_kind`` "vllm-marlin"), and from 0.9
    the hybrid KV-cache manager (``window_held``; before, window layers cost as full
    ones)."""
    rules = {"name": "chunked", **VLLM_RULES, **({"overlap_schedule": True} if overlap else {})}
    extra = (VLLM_V1_08_FRONT_END_SOURCE, VLLM_V1_08_MULTI_GPU_SOURCE) if host_08 else ()
    extra = (VLLM_V1_INTAKE_SOURCE, *extra)
    return _preset("vllm-v1", version, rules,
                   {**VLLM_KV, "prefix_caching": True,
                    **(VLLM_WINDOW_HELD if window_held else VLLM_WINDOW_AS_FULL)},
                   (VLLM_V1_DISPATCH_SOURCE, *extra, VLLM_V1_SCHEDULER, *sources,
                    VLLM_KV_DTYPE_SOURCE, PREFIX_CACHING_SOURCE,
                    VLLM_MXFP4_SOURCE[triton_kernels], VLLM_WINDOW_SOURCES[window_held],
                    VLLM_TRITON_SINK_SOURCE),
                   profiles="vllm", per_layer=VLLM_V1_DISPATCH,
                   overhead={**VLLM_V1_INTAKE,
                             **(VLLM_V1_08_FRONT_END if host_08 else {})},
                   multi_gpu=VLLM_V1_08_MULTI_GPU if host_08 else None, adapt=adapt,
                   fp8_kv_with=(), moe_kind=None if triton_kernels else MARLIN_KIND,
                   marlin_mxfp4=_marlin_below_sm90 if triton_kernels else _marlin_but_blackwell,
                   attention_rule=_vllm_sink_attention)


def _vllm_v0_preset(version: str, adapt: Callable[[ModelSpec, HardwareSpec], dict[str, Any]],
                    overhead: dict[str, float], sources: tuple[str, ...]) -> StackPreset:
    """A vLLM v0 release: the 0.4-0.6 scheduler (256 sequences, watermark, recompute the
    newest), vLLM's kernel tables, dispatch and multi-GPU host costs; what changed between
    releases is the long-context rule (``adapt``) and the host cost per token
    (``overhead``)."""
    return _preset("vllm-v0", version, {
        "name": "continuous", "max_num_seqs": 256, "kv_watermark": 0.01, **VLLM_RULES},
        {**VLLM_KV, **VLLM_WINDOW_AS_FULL}, (VLLM_DISPATCH_SOURCE, *sources,
                  "vllm/core/block_manager: watermark 0.01 at admission; "
                  "vllm/core/scheduler.py: recompute the last running request "
                  "(single-sequence groups never swap)", VLLM_06_MULTI_GPU_SOURCE,
                  VLLM_KV_DTYPE_SOURCE, VLLM_WINDOW_SOURCES[False]),
        profiles="vllm", per_layer=VLLM_DISPATCH, overhead=overhead,
        multi_gpu=VLLM_06_MULTI_GPU, adapt=adapt, budget_rule=_vllm_v0_budget,
        fp8_kv_with=())


def _sglang_preset(version: str, policy: Mapping[str, Any], sources: tuple[str, ...],
                   adapt: Callable[[ModelSpec, HardwareSpec], dict[str, Any]],
                   per_layer: dict[str, float] | None = None,
                   graph_rows: Callable[[HardwareSpec, int], int] | None = None,
                   kv_rule: KVRule | None = None) -> StackPreset:
    """An SGLang release: its policy, page size and memory share (``kv_rule``: its fraction
    and startup memory by GPU and TP), kernel tables, a KV cache
    in the model's dtype; ``per_layer``: its host costs where a release has them;
    ``graph_rows``: its CUDA-graph batch limit, past which a decode step pays
    ``SGLANG_04_EAGER_S`` per layer (the one fit, carried to every release with a limit)."""
    if graph_rows is not None:
        per_layer = {**(per_layer or {}), "eager_s": SGLANG_04_EAGER_S}
    return _preset("sglang", version, dict(policy), dict(SGLANG_KV),
                   (*sources, SGLANG_KV_DTYPE_SOURCE, PREFIX_CACHING_SOURCE,
                    SGLANG_MEMORY_SOURCE, REQUEST_SLOTS_SOURCE), profiles="sglang",
                   per_layer=per_layer, adapt=adapt, fp8_kv_with=(), graph_rows=graph_rows,
                   kv_rule=kv_rule, slots_rule=request_slots)


def _trtllm_preset(version: str, block_size: int, sources: tuple[str, ...],
                   adapt: Callable[[ModelSpec, HardwareSpec], dict[str, Any]] = _context,
                   overhead: dict[str, float] | None = None,
                   kv16_reread: float = 0.0,
                   xqa_groups: frozenset[int] | None = None,
                   block_reuse: bool = False, walk_cycles: float = 0.0,
                   allreduce_sync: float = 0.0,
                   kv16_masked_reread: float = 0.0,
                   prefill_weight_passes: float = 0.0,
                   prefill_scale: float = 1.0,
                   memory_share: str = "free") -> StackPreset:
    """A TensorRT-LLM release: in-flight batching with no-evict admission, its KV block
    size and block reuse (prefix caching), its KV cache a share of the memory the weights
    leave free (``memory_share``), its kernel tables; FP8 (with an FP8 cache) only on GPUs
    with FP8 math."""
    walk = (TRTLLM_WALK_SOURCE,) if walk_cycles > 0 else ()
    sync = (TRTLLM_ALLREDUCE_SYNC_SOURCE,) if allreduce_sync > 0 else ()
    passes: tuple[str, ...] = (TRTLLM_PREFILL_PASS_SOURCE,) if prefill_weight_passes > 0 else ()
    passes += (TRTLLM_PREFILL_SCALE_SOURCE,) if prefill_scale != 1.0 else ()
    return _preset("trtllm", version, dict(TRTLLM_POLICY),
                   {"block_size": block_size, "gpu_memory_utilization": 0.9,
                    "memory_share": memory_share, "prefix_caching": block_reuse},
                   (*sources, *TRTLLM_IFB_SOURCES, TRTLLM_FP8_SOURCE, PREFIX_CACHING_SOURCE,
                    *walk, *sync, *passes,
                    TRTLLM_FREE_SHARE_SOURCE if memory_share == "free" else
                    TRTLLM_010_TOTAL_SHARE_SOURCE),
                   profiles="trtllm",
                   overhead=overhead, adapt=adapt, kv16_reread=kv16_reread,
                   fp8_kv_with=("fp8",), fp8_needs_fp8_math=True, xqa_groups=xqa_groups,
                   decode_walk_cycles=walk_cycles, allreduce_sync=allreduce_sync,
                   kv16_masked_reread=kv16_masked_reread,
                   prefill_weight_passes=prefill_weight_passes, prefill_scale=prefill_scale)


# Each stack's versions, oldest first; the last is the default.
STACKS: Mapping[str, tuple[StackPreset, ...]] = MappingProxyType({
    "vllm-v0": (
        _vllm_v0_preset("0.5", _vllm_v0_whole, {"token_s": VLLM_05_TOKEN_S}, (
            VLLM_05_HOST_SOURCE.format(us=VLLM_05_TOKEN_S * 1e6, parts=VLLM_05_PARTS["0.5"]),
            VLLM_05_ARGS.format(release="v0.5.x", chunked="chunked prefill off at any context (the "
                                "32K rule came with vllm-project/vllm#6666, 2024-07-23)"))),
        _vllm_v0_preset("0.5.4", _vllm_v0, {"token_s": VLLM_054_TOKEN_S}, (
            VLLM_05_HOST_SOURCE.format(us=VLLM_054_TOKEN_S * 1e6, parts=VLLM_05_PARTS["0.5.4"]),
            VLLM_05_ARGS.format(release="v0.5.4", chunked="chunked prefill on only when "
                                "max_model_len > 32K (vllm-project/vllm#6666), then "
                                "max_num_batched_tokens 512"))),
        _vllm_v0_preset("0.6", _vllm_v0, {}, (
            "vllm v0.6 vllm/engine/arg_utils.py: max_num_seqs 256, block_size 16, "
            "gpu_memory_utilization 0.9; chunked prefill on only when max_model_len > 32K, "
            "then max_num_batched_tokens 512; else max(max_model_len, 2048)",)),
    ),
    "vllm-v1": (
        _vllm_v1("0.8", _vllm_v1_08, (
            "V1's max_num_seqs 1024 on every GPU until vllm-project/vllm#16158 (2025-04-07, "
            "v0.8.4: 'reverts the default max_num_seqs from 1024 to 256 for hardware other "
            "than H100/200'; #15357's thread, 2025-03-24: 'raised from 256 to 1024 by "
            "default')",
            "vllm-project/vllm#12369 (2025-01-23): online server max_num_batched_tokens "
            "8192 when 'h100' or 'h200' is in the device name, else 2048"), host_08=True,
                 window_held=False),
        _vllm_v1("0.8.4", _vllm_v1_084, (
            "vllm-project/vllm#16158 (2025-04-07): max_num_seqs 1024 on H100/H200, 256 "
            "elsewhere; max_num_batched_tokens as #12369 (8192 on H100/H200, else 2048)",),
            host_08=True, window_held=False),
        _vllm_v1("0.8.5", _vllm_v1_085, (
            "vllm-project/vllm#17073 (2025-04-23, 'use larger batch sizes for "
            "A100/B100/B200/MI300x', decided by GPU memory): 70 GiB or more: 1024 sequences, "
            "8192 tokens; else 256 and 2048",), host_08=True, window_held=False),
        _vllm_v1("0.9", _vllm_v1_big, (
            "vllm-project/vllm#17885 (2025-05-11, v0.9.0 release notes: 'use small "
            "max_num_batched_tokens for A100'): 70 GiB or more but not A100: 1024 "
            "sequences, 8192 tokens; else 256 and 2048; the same in v0.10's "
            "vllm/engine/arg_utils.py get_batch_defaults",)),
        _vllm_v1("0.12", _vllm_v1_big, (
            "v0.12.0 (PyPI source): vllm/engine/arg_utils.py get_batch_defaults as 0.9's "
            "(70 GiB or more and not an A100: 1024 sequences, 8192 tokens; else 256 and "
            "2048); vllm/config/scheduler.py async_scheduling False",), triton_kernels=True),
        _vllm_v1("0.14", _vllm_v1_big, (
            "v0.14.0 release notes (2026-01): 'Async scheduling is now enabled by default' "
            "(vllm-project/vllm#27614: the engine core schedules step N+1 while step N runs; "
            "not with pipeline parallelism, the CPU backend or non-MTP/EAGLE speculative "
            "decoding): policy.overlap_schedule; batch defaults as 0.9's",), overlap=True,
                 triton_kernels=True),
    ),
    "sglang": (
        _sglang_preset("0.2", SGLANG_02_POLICY, (
            *SGLANG_02_SOURCES, SGLANG_03_GRAPH_SOURCE, KV_02.source),
                       _context, SGLANG_03_HOST, graph_rows=_sglang_03_graph_rows,
                       kv_rule=KV_02),
        _sglang_preset("0.3", SGLANG_POLICY, (
            *SGLANG_03_SOURCES, *SGLANG_SOURCES[1:2], SGLANG_03_HOST_SOURCE,
            SGLANG_03_GRAPH_SOURCE, KV_02.source), _sglang_03, SGLANG_03_HOST,
            graph_rows=_sglang_03_graph_rows, kv_rule=KV_02),
        _sglang_preset("0.4", SGLANG_OVERLAP_POLICY, (
            *SGLANG_04_SOURCES, SGLANG_04_HOST_SOURCE, SGLANG_04_GRAPH_SOURCE,
            SGLANG_OVERLAP_SOURCE, KV_04.source),
                       _sglang_04, SGLANG_04_HOST,
                       graph_rows=_sglang_04_graph_rows, kv_rule=KV_04),
        _sglang_preset("0.5", SGLANG_OVERLAP_POLICY, (
            *SGLANG_SOURCES, SGLANG_05_HOST_SOURCE, SGLANG_OVERLAP_SOURCE,
            SGLANG_05_FRACTION_SOURCE), _sglang,
            SGLANG_05_HOST, kv_rule=kv_05),
    ),
    "trtllm": (
        _trtllm_preset("0.10", 64, (*TRTLLM_010_SOURCES, TRTLLM_010_XQA_SOURCE),
                       adapt=_trtllm_010, overhead={"token_s": TRTLLM_010_TOKEN_S},
                       kv16_reread=TRTLLM_011_KV16_REREAD, xqa_groups=frozenset({1, 8}),
                       walk_cycles=TRTLLM_WALK_CYCLES, allreduce_sync=TRTLLM_ALLREDUCE_SYNC,
                       kv16_masked_reread=TRTLLM_010_MASKED_REREAD,
                       prefill_weight_passes=TRTLLM_010_PREFILL_PASSES,
                       prefill_scale=TRTLLM_010_PREFILL_SCALE, memory_share="total"),
        _trtllm_preset("0.11", 32, TRTLLM_011_SOURCES, kv16_reread=TRTLLM_011_KV16_REREAD,
                       walk_cycles=TRTLLM_WALK_CYCLES, allreduce_sync=TRTLLM_ALLREDUCE_SYNC),
        _trtllm_preset("0.12", 32, (*TRTLLM_011_SOURCES, TRTLLM_012_MULTI_BLOCK_SOURCE),
                       kv16_reread=TRTLLM_011_KV16_REREAD),
        _trtllm_preset("1.0", 32, (
            "TensorRT-LLM 1.0 llmapi BuildConfig: max_batch_size 2048, max_num_tokens 8192; "
            "enable_chunked_prefill false; KvCacheConfig tokens_per_block 32, "
            "free_gpu_memory_fraction 0.9",), block_reuse=True),
    ),
})
