"""``[cost] decode_kv_reads``: a decode kernel that reads each KV head's cache more than once.

A fitted profile prices decode attention by the context it attends (``decode_context_s``
per token of C), measured on kernels that read a KV head's cache once per step however
many query heads share it (TensorRT-LLM's XQA, FlashDecoding, FlashInfer). Older
TensorRT-LLM releases ran a grouped-query model's decode attention with the masked-MHA
kernel for group sizes XQA did not cover: one thread block per *query* head, each reading
its KV head's whole cache, so the cache is read G = query heads / KV heads times a step
(benchmarks/trtllm_xqa.py has which release covered which G, with sources).

``decode_kv_reads = G`` multiplies that term by G; nothing else changes (weights, the
MLP, the other attention terms). A stack preset may set a factor of its own for the
stack's kernel tables (``StackPreset.decode_kv_reads``: TensorRT-LLM's 2024 engine
releases over a 16-bit cache, 1 + beta (G - 1) reads; docs/stacks.md), which
:func:`scales_decode_reads` tells whether a cost model can take: the fitted forms, which
keep the term apart (linear, piecewise, alone or behind a fitted ``time_scale``, a
stand-in's vocabulary offset or narrow weights' saved reads). A roofline prior takes a
scenario's own ``decode_kv_reads`` too, on the decode rows' KV bytes of its attention
roofline (``RooflineCost.decode_kv_reads``: g C in B_kv, simulator/costs/roofline.py);
the stack's own factor stays with the stack's tables, which a prior is not.
"""

from __future__ import annotations

import dataclasses

from simulator.costs.base import CostModel, ScaledCost
from simulator.costs.linear import LinearCost
from simulator.costs.piecewise import PiecewiseCost
from simulator.costs.roofline import RooflineCost
from simulator.costs.shape_equivalent import LogitsOffsetCost
from simulator.costs.weight_only import NarrowWeightsCost
from simulator.errors import ConfigError

# a fitted profile behind these keeps its decode-context term: a fitted time_scale, a
# stand-in's vocabulary offset, narrow weights' saved reads
WRAPPERS = (ScaledCost, LogitsOffsetCost, NarrowWeightsCost)


def scales_decode_reads(cost: CostModel) -> bool:
    """Whether ``cost`` keeps a decode-context term that :func:`with_decode_kv_reads` can
    scale (a fitted profile, alone or wrapped), not a roofline prior."""
    if isinstance(cost, PiecewiseCost | LinearCost):
        return True
    if isinstance(cost, WRAPPERS):
        return scales_decode_reads(cost.inner)
    return False


def context_term_s(cost: CostModel) -> float:
    """Seconds per decode context token attended (C) in a fitted profile's steps, after
    the wrappers that scale them (a fitted time_scale); 0 for a model keeping no such
    term apart (a roofline prior)."""
    if isinstance(cost, PiecewiseCost | LinearCost):
        return cost.decode_context_s
    if isinstance(cost, ScaledCost):
        return context_term_s(cost.inner) * cost.time_scale
    if isinstance(cost, WRAPPERS):
        return context_term_s(cost.inner)
    return 0.0


def with_decode_kv_reads(cost: CostModel, reads: float, field: str) -> CostModel:
    """``cost`` with its decode-context term multiplied by ``reads``: a fitted profile's
    seconds per context token, or a roofline prior's decode KV bytes (see the module)."""
    if isinstance(cost, PiecewiseCost | LinearCost):
        return dataclasses.replace(cost, decode_context_s=cost.decode_context_s * reads)
    if isinstance(cost, RooflineCost):
        return dataclasses.replace(cost, decode_kv_reads=cost.decode_kv_reads * reads)
    if isinstance(cost, WRAPPERS):
        return dataclasses.replace(cost, inner=with_decode_kv_reads(cost.inner, reads, field))
    raise ConfigError(f"{field}={reads:g}: applies to a fitted profile (linear or piecewise), "
                      f"whose decode-context term it scales, or a roofline prior, whose "
                      f"decode KV reads it scales; these steps are priced by "
                      f"{type(cost).__name__}")
