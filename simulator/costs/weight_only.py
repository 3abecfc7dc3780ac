"""Weights stored narrower than the math: a 16-bit measured profile, repriced.

A GPU without FP8 tensor cores (A100, A10) serves an FP8 checkpoint with weight-only
kernels (vLLM's FP8 Marlin, vllm-project/vllm#5975: "a fast fused dequantization kernel
for FP8 to BF16/FP16", "up to 2x in memory-bound scenarios"); int4 checkpoints (AWQ, GPTQ)
run W4A16 kernels on every GPU. Such a kernel reads the narrow weights and multiplies in
bf16 on the same tensor cores, so of a step only the matmuls' weight reads change. Where
no profile of the narrow dtype ships but a measured 16-bit one does (the stack's own
kernel tables included), :class:`NarrowWeightsCost` prices a step as that profile plus
the roofline prior's change in the matmuls' time::

    dt(T) = max(F T, B_w' / bw_m) - max(F T, B_w / bw_m)

with T the step's tokens, F the matmuls' seconds per token at the bf16 peak, B_w and B_w'
the weight bytes at 2 and at the narrow width (1 for fp8, 0.5 for int4) and bw_m the
fitted bandwidth (both priors share the GPU's bf16-fitted efficiencies: the math is
bf16). Llama-3.1-8B on one A100-80GB, FP8: a batch-1 decode step reads 7.505 G weights,
so it saves 7.505 GB / (0.859 x 2,039 GB/s) = 4.28 ms of the bf16 step's 8.57 ms of weight
reads; at 256 rows the matmuls are compute-bound either way and nothing changes
(``python benchmarks/weight_only_steps.py`` prints the table). Ignored: the
dequantisation's own cost (hidden under the memory reads at small batches; not priced at
large ones, where a W8A16 kernel may trail the bf16 GEMM) and the scales.

The prior itself prices the matmuls with a smooth maximum, sqrt(c^2 + m^2) (roofline.py);
dt keeps the hard one (:meth:`RooflineCost.matmul_max_s`). The smooth maximum says a
kernel near its ridge still waits on part of its reads, so narrower reads would save
time even in a compute-bound step (1.5 ms of the 8B's 45.5 ms step at 256 rows). A
W8A16 or W4A16 kernel pays for that with its dequantisation, which is not priced, and
Marlin-style kernels lose their advantage over the bf16 GEMM as the batch grows
(vllm-project/vllm#5975: "up to 2x in memory-bound scenarios"). So past the ridge the
narrow weights save nothing here, as before the smooth maximum.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from simulator.costs.base import CostModel, DecodePricer, decode_pricer
from simulator.costs.roofline import RooflineCost
from simulator.shapes import StepShape, StepShapes
from simulator.specs.hardware import HardwareSpec

SIXTEEN_BIT = "bf16"  # the math dtype of weight-only kernels, and the profile's weights


def weight_only(weight_dtype: str, hw: HardwareSpec) -> bool:
    """Whether ``hw`` runs ``weight_dtype`` weights with weight-only (W8A16 / W4A16)
    kernels: fp8 without FP8 tensor cores, int8 without INT8 ones, int4 and MXFP4 always
    (gpt-oss's experts: W4A16 MXFP4 kernels in all three stacks' measured MoE tables on
    Hopper; a Blackwell FP4 path is not priced); a GPU's kernels, so never on the CPU
    (whose profiles are measured on the machine)."""
    if hw.name == "cpu":
        return False
    w = weight_dtype.lower()
    return ((w == "fp8" and hw.fp8_tflops is None) or (w == "int8" and hw.int8_tops is None)
            or w in ("int4", "mxfp4"))


def narrow_note(weight_dtype: str, hardware: str) -> str:
    """What the repricing does, for the cost source."""
    return (f"{weight_dtype} weights, weight-only kernels on {hardware} (bf16 math): the "
            f"{SIXTEEN_BIT} profile plus the prior's weight reads saved")


@dataclass(frozen=True, slots=True)
class NarrowWeightsCost:
    """``inner`` (measured with 16-bit weights) plus the prior's change in the matmuls'
    time when the weights are stored as ``target``'s (module docstring)."""

    inner: CostModel  # the 16-bit measured profile's cost
    source: RooflineCost  # the prior with the profile's 16-bit weights
    target: RooflineCost  # the same prior with the narrow weights
    # dt by token count for one step at a time (the scalar pricers ask per step, and token
    # counts repeat), as the prior's scalar pricer caches its own matmul time
    _by_tokens: dict[float, float] = field(default_factory=dict, compare=False, repr=False)

    def delta_s(self, tokens: float | np.ndarray) -> float | np.ndarray:
        """dt of the module docstring for steps of ``tokens`` tokens."""
        if isinstance(tokens, float):
            dt = self._by_tokens.get(tokens)
            if dt is None:
                dt = self._by_tokens[tokens] = float(
                    self.target.matmul_max_s(tokens) - self.source.matmul_max_s(tokens))
            return dt
        return self.target.matmul_max_s(tokens) - self.source.matmul_max_s(tokens)

    def step_time(self, shape: StepShape) -> float:
        return self.inner.step_time(shape) + float(self.delta_s(float(shape.num_tokens)))

    def step_times(self, shapes: StepShapes) -> np.ndarray:
        tokens = (shapes.num_prefill_tokens + shapes.num_decode_seqs).astype(np.float64)
        return self.inner.step_times(shapes) + self.delta_s(tokens)

    def decode_pricer(self) -> DecodePricer | None:
        inner = decode_pricer(self.inner)
        if inner is None:
            return None
        delta = self.delta_s
        return lambda rows, context, finished: inner(rows, context, finished) + float(
            delta(float(rows)))
