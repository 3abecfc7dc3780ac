"""``[cost] decode_scale``: a factor on every step that carries decode rows.

``[cost] prefill_scale`` scales the steps that only prefill; this scales the others: pure
decode steps and steps that mix a prompt (or a chunk of one) with decode rows. It is what
an engine whose generation kernels run slower (or faster) than the tables it is priced
from does to a run, where its prompt steps are another matter (they run other kernels:
context attention, large-M GEMMs).

It is an empirical term. The one place servesim uses it is NIM 1.0's 16-bit engines
(TensorRT-LLM 0.10, the NVIDIA course's sweep): priced from the 1.x tables, their decode
read 4% (A100) and 8% (H100) fast at one client and 8-11% at 2-50 clients, while the same
course's FP8 engines and 0.10's own max-throughput FP16 engines read right, so it is
carried by those cases
(benchmarks/nim_dli_cases.py ``DECODE_SCALE_16BIT``, fitted by
benchmarks/nim_dli_decode_fit.py), not by the 0.10 preset (docs/stacks.md, "NIM 1.0's
16-bit decode steps").

:class:`DecodeScaleCost` multiplies the inner model's time of every step with a decode row
by ``scale``; steps that only prefill are unchanged.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from simulator.costs.base import CostModel, DecodePricer, check_number, decode_pricer
from simulator.shapes import StepShape, StepShapes

LOW, HIGH = 0.25, 4.0  # the factors [cost] decode_scale accepts


@dataclass(frozen=True, slots=True)
class DecodeScaleCost:
    """``inner``'s step time, times ``scale`` for every step with decode rows (see the
    module)."""

    inner: CostModel
    scale: float  # the factor on a step that carries at least one decode row

    def __post_init__(self) -> None:
        check_number("decode_scale", self.scale, low=LOW, high=HIGH)

    def step_time(self, shape: StepShape) -> float:
        t = self.inner.step_time(shape)
        return t * self.scale if shape.num_decode_seqs > 0 else t

    def step_times(self, shapes: StepShapes) -> np.ndarray:
        t = self.inner.step_times(shapes)
        return np.where(shapes.num_decode_seqs > 0, t * self.scale, t)

    def decode_pricer(self) -> DecodePricer | None:
        inner, scale = decode_pricer(self.inner), self.scale
        if inner is None:
            return None
        return lambda d, c, f: inner(d, c, f) * scale


def with_decode_scale(cost: CostModel, scale: float) -> CostModel:
    """``cost`` with every step that has decode rows ``scale`` x as long; unchanged at 1."""
    return cost if scale == 1.0 else DecodeScaleCost(cost, scale)
