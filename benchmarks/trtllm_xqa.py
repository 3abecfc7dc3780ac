"""Which decode-attention kernel a 2023-24 TensorRT-LLM release ran for a grouped-query
model, for annotating its static-batch performance rows.

TensorRT-LLM's generation-phase attention has two kernels. The masked MHA kernel
(``decoderMaskedMultiheadAttentionLaunch.h``: ``dim3 grid{num_heads, batch_size}``) runs
one thread block per *query* head, and each block reads the whole K/V cache of its KV
head (``hi_kv = hi / qhead_per_kv`` in ``decoderMaskedMultiheadAttentionTemplate.h``): a
model with G query heads per KV head has its KV cache read G times a step. The XQA kernel
reads it once per KV head. Up to 0.9.0 XQA was precompiled only (``DecoderXQAImpl::create``
with ``kPrecompiled``; no JIT), and a kernel existed only for the group sizes listed in
``cubin/xqa_kernel_cubin.h`` (``sXqaKernelMetaInfo``, the ``num_q_heads_over_kv`` column).

Read in github:WhiteD2125/TensorRT-LLM, a fork that carries upstream's history, at the
release tags (commits in docs/gpu-profiles.md):

- v0.5.0 and v0.6.1: no XQA kernel at all.
- v0.8.0 and v0.9.0: contiguous-KV kernels (the static runs built ``--paged_kv_cache
  disable``) for 8 query heads per KV head only (the 0 entries are Medusa's multi-token
  kernels); paged kernels add 1. So Llama-2-70B (64/8) ran XQA, and Mistral-7B and
  Mixtral-8x7B (32/8 = 4) ran the masked MHA kernel.

v0.10.0 (commit 9bd15f19): ``DecoderXQARunner::shouldUse`` still takes 8 or 1 query heads
per KV head only (JIT XQA never on SM90); the ``trtllm 0.10`` preset prices it
(``StackPreset.xqa_groups``, docs/stacks.md). v0.11.0 made JIT XQA, any group size, the
default.

servesim's kernel tables (TensorRT-LLM 1.x) read each KV head once, so those rows ran
faster in the simulator than they did. Their replay now prices the repeated reads with
``[cost] decode_kv_reads = G`` (simulator/costs/kv_reads.py: the fitted profile's
decode-context term, or a roofline prior's decode KV bytes, times G; nothing fitted); a
deployment whose cost model takes neither keeps one read and says so (:func:`priced_reads`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from simulator.deployment import resolve
from simulator.errors import ConfigError
from simulator.specs.hardware import get_hardware
from simulator.specs.models import catalogue_name, get_model
from simulator.stack_presets import TRTLLM_010_MASKED_REREAD, StackPreset
from simulator.stacks import StackSection

if TYPE_CHECKING:
    from benchmarks.published_cases import Case

# release -> query heads per KV head that had a contiguous-KV XQA kernel
XQA_GROUPS: Mapping[str, frozenset[int]] = {
    "0.5": frozenset(), "0.6.1": frozenset(),
    "0.8.0": frozenset({8}), "0.9.0": frozenset({8}),
}


def group_size(model: str) -> int | None:
    """Query heads per KV head of a catalogue model (None when not in the catalogue)."""
    name = catalogue_name(model)
    if name is None:
        return None
    spec = get_model(name)
    return spec.num_heads // spec.num_kv_heads


# The masked MHA kernel over an FP8 cache is bound by its work on the CUDA cores, not by
# its bytes: each of a KV head's G query-head blocks converts every cached element from FP8
# and multiplies it in, so a step takes G x elements x FP8_MASKED_OPS operations at the
# GPU's FP32 rate, or one read of the cache at its bandwidth, whichever is longer. In the
# replay's unit, one read: max(1, G x FP8_MASKED_OPS x bandwidth / FP32 rate) (one byte an
# element). FP8_MASKED_OPS is fitted on the H200 rows of the 0.5-0.9.0 tables (the most
# within 15%, then the smallest median |error|, over 10-18: `python
# benchmarks/masked_reads_fit.py --held-out`; docs/gpu-profiles.md, "Stop 53: an FP8 cache
# on the masked kernel is bound by its CUDA cores"); the H100 and L40S rows are held out. A
# GPU without an FP32 rate here keeps G.
FP8_MASKED_OPS = 13.0
# Dense FP32 (CUDA-core) TFLOP/s, NVIDIA's datasheets: H100 SXM 67, H200 67, L40S 91.6
CUDA_FP32_TFLOPS: Mapping[str, float] = {"h100-sxm": 67.0, "h200": 67.0, "l40s": 91.6}


# The group sizes the trtllm 0.10 preset's 16-bit masked-kernel re-read
# (TRTLLM_010_MASKED_REREAD) was fitted at: 4 query heads per KV head, 0.10's FP16
# Llama-3-8B and Mixtral-8x7B rows. The same kernel ran the 0.5-0.9 static engines; at
# other group sizes their rows disagree with the law's extrapolation (docs/gpu-profiles.md,
# "Stop 53: a 16-bit cache at G = 4 takes 0.10's fitted re-read"), so they keep G reads.
REREAD_FITTED_GROUPS = frozenset({4})


def xqa_kernels(case: Case) -> frozenset[int] | None:
    """The group sizes ``case``'s engine had an XQA kernel for: a 0.5-0.9.0 static row's
    contiguous-KV kernels (:data:`XQA_GROUPS`), a 0.10 performance-table row's the ``trtllm
    0.10`` preset's (``StackPreset.xqa_groups``, docs/stacks.md "0.10's decode attention for
    4 query heads per KV head"); None where not read (other releases, NIM's engines)."""
    if case.stack != "trtllm":
        return None
    if "gptSessionBenchmark" in case.notes:
        return XQA_GROUPS.get(case.stack_version)
    if case.stack_version == "0.10":
        return preset_010().xqa_groups
    return None


def preset_010() -> StackPreset:
    """The ``trtllm 0.10`` preset, whose masked-kernel rules these rows borrow."""
    preset = StackSection(name="trtllm", version="0.10").preset()
    assert preset is not None
    return preset


def masked_mha_group(case: Case) -> int | None:
    """G when ``case``'s release ran its decode attention on the masked MHA kernel for a
    grouped-query model (the KV cache read G times a step); else None."""
    kernels = xqa_kernels(case)
    group = group_size(case.model)
    if kernels is None or group is None or group == 1 or group in kernels:
        return None
    return group


def fp8_masked_reads(group: int, gpu: str, ops: float = FP8_MASKED_OPS) -> float:
    """The masked kernel's step over an FP8 cache at ``group`` query heads per KV head on
    ``gpu``, in reads of the cache: ``max(1, G x ops x bandwidth / FP32 rate)`` (``ops``:
    operations per element and query head, :data:`FP8_MASKED_OPS` as fitted) where the
    GPU's FP32 rate is known (:data:`CUDA_FP32_TFLOPS`), else G."""
    tflops = CUDA_FP32_TFLOPS.get(gpu)
    if tflops is None:
        return float(group)
    bandwidth = get_hardware(gpu).bandwidth_gbps * 1e9
    return round(max(1.0, group * ops * bandwidth / (tflops * 1e12)), 6)


def masked_mha_reads(case: Case) -> float | None:
    """The KV reads a decode step of ``case``'s engine takes where its release ran the
    masked MHA kernel (:func:`masked_mha_group`); None where it did not. Over an FP8 cache
    the kernel's CUDA-core bound (:func:`fp8_masked_reads`); over a 16-bit cache G, except
    at a group size the ``trtllm 0.10`` preset's masked-kernel re-read was fitted at
    (:data:`REREAD_FITTED_GROUPS`): there the preset's rule, 1 + beta (G - 1)
    (``StackPreset.decode_kv_reads`` with the release's own XQA groups)."""
    group = masked_mha_group(case)
    name = catalogue_name(case.model)
    if group is None or name is None:
        return None
    if case.kv_dtype.lower() == "fp8":
        return fp8_masked_reads(group, case.gpu)
    if group not in REREAD_FITTED_GROUPS:
        return float(group)
    static = dataclasses.replace(preset_010(), xqa_groups=xqa_kernels(case))
    return round(static.decode_kv_reads(get_model(name), case.tp, case.kv_dtype), 9)


def xqa_note(case: Case) -> list[str]:
    """A note when ``case``'s release ran the masked MHA kernel (see
    :func:`masked_mha_group` and :func:`masked_mha_reads`); else none."""
    group, reads = masked_mha_group(case), masked_mha_reads(case)
    if group is None or reads is None:
        return []
    if reads == group:
        how = f"which reads the KV cache {group}x a step"
    elif case.kv_dtype.lower() == "fp8":
        how = (f"one block per query head, bound over an FP8 cache by its CUDA cores: "
               f"max(1, {group} x {FP8_MASKED_OPS:g} operations x bandwidth / FP32 rate) "
               "reads of the cache")
    else:
        how = (f"one block per query head; over a 16-bit cache L2 serves part of the "
               f"{group} reads, 1 + {TRTLLM_010_MASKED_REREAD:g} x ({group} - 1) as the "
               "trtllm 0.10 preset fitted them")
    return [f"decode attention: TensorRT-LLM {case.stack_version} has no XQA kernel for "
            f"{group} query heads per KV head, so it ran the masked MHA kernel, {how}: "
            f"cost.decode_kv_reads = {reads:g} (benchmarks/trtllm_xqa.py)"]


def priced_reads(point: dict[str, Any]) -> tuple[dict[str, Any], str | None]:
    """``point`` as it is when its deployment prices ``cost.decode_kv_reads`` (a fitted
    profile or a roofline prior); else without it, and a note saying why."""
    cost = point.get("cost") or {}
    if "decode_kv_reads" not in cost:
        return point, None
    try:
        resolve(point, "published")
        return point, None
    except ConfigError as exc:
        rest = {k: v for k, v in cost.items() if k != "decode_kv_reads"}
        bare = {k: v for k, v in point.items() if k != "cost"} | ({"cost": rest} if rest else {})
        return bare, f"repeated KV reads not modelled: {exc}"
