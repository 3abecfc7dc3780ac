"""Stand-in profiles: a measured profile of a model whose layers have the same shapes.

Two models whose transformer blocks have the same shapes (layers, hidden, query and KV
heads, head width, MLP width, experts) run the same kernels on the same operands every
step; only the vocabulary can differ, and it changes two ops: the embedding gather
(T rows of the table, negligible) and the logits GEMM, one row per sampled sequence
against a V x H matrix. At decode that GEMM is memory-bound (a few rows against the whole
matrix), so a vocabulary of V_t priced with a profile measured at V_p is off by

    dt = (V_t - V_p) H b / tp / (eff_m bw)     per step that samples a token

(b = 2: the logits GEMM runs in bf16 whatever the weights, as in AIConfigurator's
composition; eff_m = 0.8 as in the roofline prior). Mistral-7B v0.3 (V = 32,768) priced
with Llama-3.1-8B's composed profile (V = 128,256) on an H100 SXM: dt = -0.29 ms, 4.4% of
a batch-1 decode step at 1,024 tokens of context (6.61 ms) and 2.9% at batch 64 (9.93 ms);
H200 -0.20 ms (4.0%, 2.7%), A100 80GB -0.48 ms (4.2%, 2.9%): large enough to correct,
so :class:`LogitsOffsetCost` adds dt to every step (a prefill chunk that does not finish
its prompt samples nothing; such steps get dt too, an error of at most dt on steps that
take 10-1000x longer).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from simulator.costs.base import CostModel
from simulator.costs.roofline import MEMORY_EFFICIENCY
from simulator.shapes import StepShape, StepShapes
from simulator.specs.hardware import HardwareSpec
from simulator.specs.models import MODELS, ModelSpec

LOGITS_BYTES = 2.0  # b: the logits GEMM reads a bf16 lm_head


def layer_shapes(m: ModelSpec) -> tuple[int, ...]:
    """Everything a transformer block's kernels depend on (not vocab, context or ties)."""
    return (m.num_layers, m.hidden_size, m.num_heads, m.num_kv_heads, m.head_dim,
            m.intermediate_size, m.num_experts, m.experts_per_token, m.dense_layers,
            m.dense_intermediate_size, m.shared_experts, m.kv_lora_rank, m.q_lora_rank,
            m.rope_head_dim)


def shape_equivalents(model: ModelSpec) -> list[ModelSpec]:
    """Catalogue models (other than ``model``) whose blocks have ``model``'s shapes, the
    nearest vocabulary first (the smallest correction), then in catalogue order."""
    same = [m for m in MODELS.values()
            if m.name != model.name and layer_shapes(m) == layer_shapes(model)]
    return sorted(same, key=lambda m: abs(m.vocab_size - model.vocab_size))


def logits_delta_s(target: ModelSpec, source: ModelSpec, hw: HardwareSpec, tp: int) -> float:
    """dt of the module docstring: seconds to add to a step priced with ``source``'s profile."""
    dv = target.vocab_size - source.vocab_size
    return dv * target.hidden_size * LOGITS_BYTES / tp / (
        MEMORY_EFFICIENCY * hw.bandwidth_gbps * 1e9)


def stand_in_note(target: ModelSpec, source: ModelSpec, delta_s: float) -> str:
    """How a stand-in profile was used, for the cost source."""
    if target.vocab_size == source.vocab_size:
        return f"profile of {source.name} (same layer shapes and vocab)"
    return (f"profile of {source.name} (same layer shapes; vocab {target.vocab_size:,} vs "
            f"{source.vocab_size:,}: logits GEMM {delta_s * 1e3:+.3f} ms per step)")


@dataclass(frozen=True, slots=True)
class LogitsOffsetCost:
    """``inner``'s step times plus a constant ``offset_s`` per step (the vocab correction)."""

    inner: CostModel  # the stand-in model's cost
    offset_s: float  # dt, seconds per step (negative for a smaller vocabulary)

    def step_time(self, shape: StepShape) -> float:
        return self.inner.step_time(shape) + self.offset_s

    def step_times(self, shapes: StepShapes) -> np.ndarray:
        return self.inner.step_times(shapes) + self.offset_s
