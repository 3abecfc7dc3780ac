"""``[cost] decode_walk_s``: decode attention without multi-block mode, at small batches.

A decode attention kernel without multi-block mode gives each (sequence, head) pair one
thread block, which walks that sequence's whole KV cache alone; the pairs run side by side
on the GPU's SMs. With many sequences the SMs are full and the step's attention is bound by
memory bandwidth, which the kernel tables price (``decode_context_s`` per context token
attended, C). With few, the step waits for the longest walk: ``walk_s`` per context token
and layer, whatever the bandwidth. So a step's decode attention costs at least

    walk = layers x walk_s x (C / D)

(the mean context C / D stands for the longest, which a step shape does not carry), and
:class:`DecodeWalkCost` adds ``max(0, walk - decode_context_s x C)`` to the inner model's
step. It vanishes once C / D x layers x walk_s is below the bandwidth term, i.e. at a
few dozen sequences.

TensorRT-LLM's engines before 0.12 were built without multi-block mode unless
``--multi_block_mode`` was given (0.10-0.11 ``PluginConfig``: ``_multi_block_mode``
default False; 0.12 moved it to the runtime, where the LLM API turns it on): the
``trtllm 0.10`` and ``0.11`` presets set ``walk_s`` from a fitted cycle count and the
GPU's clock (simulator/stack_presets.py, docs/stacks.md, "Decode attention without
multi-block mode").
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from simulator.costs.base import CostModel, DecodePricer, check_number, decode_pricer
from simulator.costs.kv_reads import context_term_s
from simulator.shapes import StepShape, StepShapes


@dataclass(frozen=True, slots=True)
class DecodeWalkCost:
    """``inner``'s step time plus what the longest decode walk adds (see the module)."""

    inner: CostModel
    walk_s: float  # s per context token of one sequence's walk, all layers
    context_s: float  # the inner model's s per decode context token attended (C)

    def __post_init__(self) -> None:
        check_number("decode_walk_s", self.walk_s)
        check_number("decode_context_s", self.context_s)

    def _extra(self, d: float, c: float) -> float:
        """Seconds the walk adds to a step of ``d`` decode rows attending ``c`` tokens (plain
        floats: the scalar pricers run it every decode step)."""
        extra = self.walk_s * c / (d if d > 1.0 else 1.0) - self.context_s * c
        return extra if extra > 0.0 else 0.0

    def step_time(self, shape: StepShape) -> float:
        return self.inner.step_time(shape) + self._extra(
            float(shape.num_decode_seqs), float(shape.decode_context_tokens))

    def step_times(self, shapes: StepShapes) -> np.ndarray:
        d = shapes.num_decode_seqs.astype(np.float64)
        c = shapes.decode_context_tokens.astype(np.float64)
        extra = self.walk_s * c / np.maximum(d, 1.0) - self.context_s * c
        return self.inner.step_times(shapes) + np.maximum(extra, 0.0)

    def decode_pricer(self) -> DecodePricer | None:
        inner = decode_pricer(self.inner)
        if inner is None:
            return None
        walk, context = self.walk_s, self.context_s

        def price(d: int, c: int, f: int) -> float:  # _extra inlined: every decode step
            extra = walk * c / (d if d > 1 else 1) - context * c
            return inner(d, c, f) + (extra if extra > 0.0 else 0.0)

        return price


def with_decode_walk(cost: CostModel, walk_s: float, layers: int) -> CostModel:
    """``cost`` with decode walks of ``walk_s`` per context token and layer (a fitted
    profile's decode-context term is the bandwidth bound they are compared with)."""
    return DecodeWalkCost(cost, walk_s * layers, context_term_s(cost))
