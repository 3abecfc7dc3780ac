"""A GPU without measured tables, priced from its sibling's: the same chip on another board.

The A100-40GB is the A100-80GB's GA100 with HBM2 (1,555 GB/s) instead of HBM2e (2,039);
the H100 PCIe is the H100 SXM's GH100 with fewer SMs enabled, a lower power limit (756
against 989 dense bf16 TFLOPS), HBM2e (2,000 against 3,350 GB/s) and no NVLink. No
operator tables ship for either, so their steps used to be the roofline prior's, with the
default efficiencies; the A100-40GB's for Llama-3.3-70B at TP 8 under vLLM decoded a
published run's steps 21% fast (benchmarks/published_cases_vllm_v1.toml, the llm-k8s case).

Where the sibling has a measured profile for the deployment (its serving stack's own first,
as for any GPU), :class:`SiblingCost` prices a step as that profile times the prior's
ratio between the two GPUs for the same step::

    t(shape) = measured_sibling(shape) x prior_gpu(shape) / prior_sibling(shape)

Both priors carry the sibling's fitted efficiencies (simulator/costs/prior_efficiency.py:
the same silicon and kernels), so the ratio holds only what the boards change: a decode
step's weight reads slow by the bandwidth ratio (1.31 for the A100-40GB; the whole step
less, its per-layer floors and all-reduces unchanged: 1.17 for Llama-3.1-70B at TP 8,
batch 1), a compute-bound prefill not at all on the A100-40GB and on the H100 PCIe by the
two boards' published matmul throughput (1.59: the PCIe's 350 W limit holds it to 0.656 of
its 756 TFLOP/s, where the SXM reaches 0.798 of 989; ``prior_efficiency.sibling_scale``
scales its eff_c; 16-bit math only), and an all-reduce by the links (PCIe against NVLink). The
measured profile keeps what the prior misses: per-shape kernel efficiencies, launch gaps,
the stack's own kernels. The
pairs are ``simulator.specs.hardware.SIBLINGS``; where the two share a link (the A100s'
NVLink), the prior prices the GPU's all-reduces with the sibling's measured NCCL curve
(simulator/costs/collectives.py), so the ratio does not compare a curve with a formula.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from simulator.costs.base import CostModel, DecodePricer, decode_pricer
from simulator.costs.roofline import RooflineCost
from simulator.shapes import StepShape, StepShapes


def sibling_note(hardware: str, sibling: str, used: str, scale: float = 1.0) -> str:
    """The cost source of a step priced from the sibling's profile (``scale``: what
    ``hardware``'s eff_c is of the sibling's, from their measured matmul shares)."""
    matmul = ("" if scale == 1.0 else f", {hardware}'s eff_c x {scale:.3f} for the two "
              "boards' measured bf16 matmul shares of peak")
    return (f"{sibling}'s measured profile scaled to {hardware} by the roofline prior's "
            f"ratio between them (same chip; {sibling}'s fitted efficiencies on both"
            f"{matmul}): {used}")


@dataclass(frozen=True, slots=True)
class SiblingCost:
    """``inner`` (the sibling's measured cost, kernels only) times ``target`` / ``source``
    (the module docstring's ratio), step by step."""

    inner: CostModel  # the sibling's measured profile
    target: RooflineCost  # the prior on this GPU, with the sibling's efficiencies
    source: RooflineCost  # the prior on the sibling, the same efficiencies

    def step_time(self, shape: StepShape) -> float:
        return (self.inner.step_time(shape) * self.target.step_time(shape)
                / self.source.step_time(shape))

    def step_times(self, shapes: StepShapes) -> np.ndarray:
        return (self.inner.step_times(shapes) * self.target.step_times(shapes)
                / self.source.step_times(shapes))

    def decode_pricer(self) -> DecodePricer | None:
        inner = decode_pricer(self.inner)
        if inner is None:
            return None
        target, source = self.target.decode_pricer(), self.source.decode_pricer()
        return lambda rows, context, finished: (inner(rows, context, finished)
                                                * target(rows, context, finished)
                                                / source(rows, context, finished))
