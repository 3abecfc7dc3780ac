"""``[cost] prefill_pass_s``: a fixed time on a step that only prefills, beyond the tables.

The composed kernel tables price a prefill step from TensorRT-LLM 1.x's kernels. NIM 1.0's
TensorRT-LLM 0.10 engines took longer to first token at one client than those tables
price, and at short prompts the shortfall is about the time one pass over the GPU's share
of the weights takes at its peak memory bandwidth, on both GPUs and at every GPU count but
two (docs/stacks.md, "A prefill step's extra weight pass"; ``python
benchmarks/prefill_pass_fit.py F``). Decode steps at one client are priced right (their
ITL reads within a few percent), so the time belongs to steps that carry a prompt: what
0.10's context phase did beyond the 1.x kernels is not in any source read here, so this
is an empirical term, fitted, not derived. It was seen on steps that only prefill (one
client; lockstep rounds); on steps that mix a prompt with decode rows (0.10's
max-throughput runs) adding it read worse, so those keep the tables' time.

:class:`PrefillPassCost` adds ``pass_s`` to every step with prefill tokens and no decode
rows (other steps unchanged). A stack preset sets it as a number of weight passes
(``StackPreset.prefill_weight_passes``: ``k x weight bytes per GPU / HBM bandwidth``); a
scenario sets its own with ``[cost] prefill_pass_s`` (seconds, 0 for none).

And a scale on the same steps: ``t = scale x inner(step) + pass_s``. The short prompts'
gap is a fixed time, but NIM 1.0's one-client 2,000- and 7,000-token prompts read 3-27%
slower than the tables price on both GPUs (multi-GPU settings most): 0.10's context
phase was slower in proportion too. ``StackPreset.prefill_scale`` (1: none), or a
scenario's ``[cost] prefill_scale``; fitted, not derived (docs/stacks.md, "TensorRT-LLM
0.10's prefill steps, in proportion").

And a factor on the other steps, ``[cost] decode_scale``: every step with decode rows
(pure decode, or a prompt beside decode rows) takes ``decode_scale x inner(step)``. An
engine whose generation kernels run slower (or faster) than the tables do. The one place
servesim uses it is NIM 1.0's 16-bit engines (TensorRT-LLM 0.10, the NVIDIA course's
sweep): priced from the 1.x tables, their mean TPOT read 4-7% (A100) and 9% (H100) fast at
1-5 clients and 9-12% at 10-50, while the same course's FP8 engines and 0.10's own
max-throughput FP16 engines read right, so it is carried by those cases
(benchmarks/nim_dli_cases.py ``DECODE_SCALE_16BIT``, fitted by
benchmarks/nim_dli_decode_fit.py), not by the 0.10 preset (docs/stacks.md, "NIM 1.0's
16-bit decode steps"). Empirical, fitted, not derived. One wrapper prices both: a step is
either prefill-only or has decode rows (or is empty and keeps its time).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from simulator.costs.base import CostModel, DecodePricer, check_number, decode_pricer
from simulator.shapes import StepShape, StepShapes
from simulator.specs.hardware import HardwareSpec
from simulator.specs.model_spec import ModelSpec


def weight_pass_s(model: ModelSpec, hardware: HardwareSpec, tp: int, weight_dtype: str) -> float:
    """Seconds one pass over a GPU's share of ``model``'s weights takes at ``hardware``'s
    peak memory bandwidth on ``tp`` GPUs."""
    return model.weight_bytes(weight_dtype) / tp / (hardware.bandwidth_gbps * 1e9)


DECODE_SCALE_LOW, DECODE_SCALE_HIGH = 0.25, 4.0  # the factors [cost] decode_scale accepts


@dataclass(frozen=True, slots=True)
class PrefillPassCost:
    """``inner``'s step time, times ``scale``, plus ``pass_s`` for every step that only
    prefills, and times ``decode_scale`` for every step with decode rows (see the module)."""

    inner: CostModel
    pass_s: float  # seconds a step with prefill tokens and no decode rows adds
    scale: float = 1.0  # and the factor on that step's own time
    decode_scale: float = 1.0  # the factor on a step with at least one decode row

    def __post_init__(self) -> None:
        check_number("prefill pass_s", self.pass_s)
        check_number("prefill scale", self.scale, low_open=True)
        check_number("decode_scale", self.decode_scale, low=DECODE_SCALE_LOW,
                     high=DECODE_SCALE_HIGH)

    def step_time(self, shape: StepShape) -> float:
        t = self.inner.step_time(shape)
        if shape.num_decode_seqs > 0:
            return t * self.decode_scale
        return t * self.scale + self.pass_s if shape.num_prefill_tokens > 0 else t

    def step_times(self, shapes: StepShapes) -> np.ndarray:
        t = self.inner.step_times(shapes)
        alone = (shapes.num_prefill_tokens > 0) & (shapes.num_decode_seqs == 0)
        return np.where(alone, t * self.scale + self.pass_s,
                        np.where(shapes.num_decode_seqs > 0, t * self.decode_scale, t))

    def decode_pricer(self) -> DecodePricer | None:
        inner, scale = decode_pricer(self.inner), self.decode_scale
        if inner is None or scale == 1.0:
            return inner  # decode-only steps: nothing added
        return lambda d, c, f: inner(d, c, f) * scale


def with_prefill_pass(cost: CostModel, pass_s: float, scale: float = 1.0,
                      decode_scale: float = 1.0) -> CostModel:
    """``cost`` with every step that only prefills ``scale`` x as long and ``pass_s`` more,
    and every step with decode rows ``decode_scale`` x as long; unchanged at 0, 1 and 1."""
    if pass_s <= 0 and scale == 1.0 and decode_scale == 1.0:
        return cost
    return PrefillPassCost(cost, pass_s, scale, decode_scale)
