"""``[cost] allreduce_sync_s``: all-reduces that pay a cross-GPU handshake the tables lack.

The composed kernel tables price each tensor-parallel all-reduce from TensorRT-LLM 1.x's
custom kernel (AIConfigurator's ``custom_allreduce_perf`` tables: a Lamport one-shot
kernel, 3-7 us at decode sizes). The 2024 TensorRT engines ran the ``AllReduce`` plugin's
older custom kernel for every message that fits its IPC workspace: the plugin copies its
input into the shared workspace first (ping-pong buffers "so we don't need to wait for
other GPUs to be done before copying input tensor to workspace"), and the kernel meets the
other ranks at flag barriers on the way in and out (``peer_barrier_ptrs_in`` /
``_out``). Each all-reduce so pays a copy and a handshake across the GPUs, on top of
what the 1.x kernel costs, and it does so at every decode batch size: a fixed time per
step.

``sync_s`` is that time per all-reduce; a step of a model of L layers runs 2L of them
(after attention and after the MLP), so :class:`AllReduceSyncCost` adds ``2 L sync_s`` to
every step whose tokens fit the workspace (``tokens x hidden x 2`` bytes, the activation
in 16 bits). Larger steps went to NCCL, whose cost is the tables' within a few percent
(docs/gpu-profiles.md, "The swap, from the tables alone"): nothing is added to them.

A stack preset sets ``sync_s`` as a multiple of the GPU's NCCL small-message latency at
that TP (``StackPreset.allreduce_sync``: a handshake across the same GPUs and links); a
scenario sets its own with ``[cost] allreduce_sync_s`` (seconds, 0 for none).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from simulator.costs.base import CostModel, DecodePricer, check_number, decode_pricer
from simulator.shapes import StepShape, StepShapes

# The plugin's IPC workspace, bytes: messages above it go to NCCL (tensorrt_llm/plugin/
# plugin.py CustomAllReduceHelper.max_workspace_size_auto, in step with
# cpp/tensorrt_llm/common/customAllReduceUtils.h getMaxRequiredWorkspaceSize)
WORKSPACE_BYTES_TP2 = 16_000_000  # tp <= 2
WORKSPACE_BYTES = 8_000_000  # more GPUs
ACTIVATION_BYTES = 2  # the all-reduced activation is 16-bit, FP8 weights or not


def workspace_bytes(tp: int) -> int:
    """The plugin's IPC workspace for ``tp`` GPUs, bytes."""
    return WORKSPACE_BYTES_TP2 if tp <= 2 else WORKSPACE_BYTES


def workspace_tokens(tp: int, hidden_size: int) -> int:
    """The most tokens a step may carry for its all-reduces to fit the workspace."""
    return workspace_bytes(tp) // (hidden_size * ACTIVATION_BYTES)


@dataclass(frozen=True, slots=True)
class AllReduceSyncCost:
    """``inner``'s step time plus ``step_s`` for every step of at most ``max_tokens``
    tokens (see the module)."""

    inner: CostModel
    step_s: float  # seconds a step adds: 2 x layers x the handshake per all-reduce
    max_tokens: int  # steps of more tokens all-reduce through NCCL, with nothing added

    def __post_init__(self) -> None:
        check_number("allreduce sync step_s", self.step_s)

    def _tokens(self, shape: StepShape) -> int:
        return shape.num_prefill_tokens + shape.num_decode_seqs + shape.num_spec_tokens

    def step_time(self, shape: StepShape) -> float:
        extra = self.step_s if self._tokens(shape) <= self.max_tokens else 0.0
        return self.inner.step_time(shape) + extra

    def step_times(self, shapes: StepShapes) -> np.ndarray:
        tokens = shapes.num_prefill_tokens + shapes.num_decode_seqs
        return self.inner.step_times(shapes) + np.where(tokens <= self.max_tokens,
                                                        self.step_s, 0.0)

    def decode_pricer(self) -> DecodePricer | None:
        inner = decode_pricer(self.inner)
        if inner is None:
            return None
        step_s, most = self.step_s, self.max_tokens

        def price(d: int, c: int, f: int) -> float:  # every decode step: plain ints
            return inner(d, c, f) + (step_s if d <= most else 0.0)

        return price


def with_allreduce_sync(cost: CostModel, sync_s: float, allreduces: int, tp: int,
                        hidden_size: int) -> CostModel:
    """``cost`` with ``sync_s`` more per all-reduce (``allreduces`` a step: the model's
    ``layer_allreduces``) wherever a step's all-reduces fit the plugin's workspace;
    unchanged on one GPU or with ``sync_s`` 0."""
    if tp < 2 or sync_s <= 0:
        return cost
    return AllReduceSyncCost(cost, allreduces * sync_s, workspace_tokens(tp, hidden_size))
