"""A MoE layer's measured latency by token count: the prior's experts where NVIDIA's
operator tables hold the model's shape.

The roofline prior prices a MoE model's experts by the distinct experts a step hits
(their weights at eff_m x bandwidth) and their FLOPs at eff_c x peak (roofline.py). A
fused MoE kernel is slower than that at every size: routing, token permutation, one
grouped GEMM per expert hit and the un-permute. Qwen3-235B-A22B (hidden 4,096, expert
inter 1,536, 128 experts, top 8) on 8 B200s in bf16, one layer, SGLang's table against the
roofline's experts: 1 token 20.2 us against 6.0, 128 tokens 139.7 against 95.9, 8,192
tokens 622.0 against 260.3 (``python benchmarks/moe_prior_check.py``; docs/gpu-profiles.md,
"MoE layers from measured tables").

``moe_tables.json`` (next to this file; written by ``python -m calibrate.moe_curves``)
holds, per GPU, kernel table (``kind``: the serving stack whose kernels AIConfigurator
0.12.0 timed: "trtllm", "vllm", "sglang"; and "vllm-marlin", vLLM's Marlin kernel moved
to gpt-oss's shapes: calibrate/moe_marlin.py), weight dtype, TP degree and MoE shape (hidden,
expert inter, experts, top k), one layer's latency at the token counts the table
collected: moe_tp = tp, ep 1; or (a row's ``ep``) moe_tp 1 over ``ep`` GPUs that each hold
E / ep whole experts, the experts of attention data parallelism (roofline.py), whose token
count is the whole group's. Between counts it is linear in tokens, past
the last count it continues the last slope (compute-bound there), below the first it is
the first (simulator/costs/knots.py). Only the knots and their provenance ship.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

from simulator.costs import knots
from simulator.costs.base import Num
from simulator.errors import ConfigError
from simulator.specs.dtypes import same_cost_dtype
from simulator.specs.models import ModelSpec

MOE_FILE = Path(__file__).resolve().parent / "moe_tables.json"
DEFAULT_MOE_KIND = "trtllm"  # the kernels the prior reads unless a stack names its own
# vLLM before 0.12 on Hopper: gpt-oss's MXFP4 experts on Marlin (calibrate/moe_marlin.py);
# its curves cover those shapes only, every other layer reads vLLM's own tables
MARLIN_KIND = "vllm-marlin"
FALLBACK = {MARLIN_KIND: "vllm"}  # a kind's tables, then these, then DEFAULT_MOE_KIND's
SHAPE_KEYS = ("hidden_size", "intermediate_size", "num_experts", "experts_per_token")


@dataclass(frozen=True, slots=True)
class MoeLayerCurve:
    """One MoE layer's measured latency by token count (module docstring)."""

    hardware: str  # catalogue GPU name
    kind: str  # whose kernels: "trtllm", "vllm", "sglang", "vllm-marlin"
    dtype: str  # weight dtype, the catalogue's name ("bf16", "fp8")
    tp: int  # moe_tp: GPUs sharing each expert
    tokens: tuple[float, ...]  # token counts collected, increasing
    latency_us: tuple[float, ...]  # one layer's latency at each
    source: str  # the table, kernel and routing
    ep: int = 1  # expert-parallel degree: GPUs each holding E / ep whole experts (moe_tp 1)
    _slopes: tuple[float, ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if len(self.tokens) != len(self.latency_us) or not knots.increasing(self.tokens):
            raise ConfigError(f"MoE curve {self.hardware}/{self.kind}/{self.dtype}/tp{self.tp}"
                              f"/ep{self.ep}"
                              f": tokens={self.tokens!r} must increase and match "
                              f"latency_us={self.latency_us!r}")
        object.__setattr__(self, "_slopes", knots.slopes(self.tokens, self.latency_us))

    def time_s(self, tokens: Num) -> Num:
        """Seconds of one MoE layer over ``tokens`` tokens (a float or an array)."""
        return knots.seconds(tokens, self.tokens, self.latency_us, self._slopes)

    def time_s_scalar(self, tokens: float) -> float:
        """:meth:`time_s` of one float, bit for bit the array path's (knots.py)."""
        return knots.at_scalar(tokens, self.tokens, self.latency_us, self._slopes) * 1e-6

    def describe(self) -> str:
        return (f"{self.kind} MoE kernels measured by {self.source} "
                f"({self.latency_us[0]:.1f} us a layer at {self.tokens[0]:g} token)")


@cache
def _load(path: Path) -> tuple[dict[str, Any], ...]:
    return tuple(knots.load_curves(path, "MoE layer curves"))


@cache
def moe_kinds(path: Path = MOE_FILE) -> tuple[str, ...]:
    """The kernel tables some GPU has a curve from."""
    return tuple(dict.fromkeys(row["kind"] for row in _load(path)))


def moe_layer_curve(model: ModelSpec, hardware: str, dtype: str, tp: int, kind: str,
                    path: Path = MOE_FILE, ep: int = 1) -> MoeLayerCurve | None:
    """``model``'s MoE layer on ``tp`` x ``hardware`` (moe_tp = tp; or, with ``ep`` > 1,
    on ``ep`` GPUs each holding ``E / ep`` whole experts, tp 1) in ``dtype`` (or a dtype
    that costs the same: fp16 reads bf16's) from ``kind``'s tables, else from those
    :data:`FALLBACK` names for it, else from the default kind's, else None (a dense model:
    always None)."""
    if model.num_experts <= 1:
        return None
    shape = tuple(getattr(model, key) for key in SHAPE_KEYS)
    rows = [row for row in _load(path)
            if (row["hardware"], row["tp"], row.get("ep", 1)) == (hardware, tp, ep)
            and same_cost_dtype(row["dtype"], dtype)
            and tuple(row[key] for key in SHAPE_KEYS) == shape]
    for want in dict.fromkeys((kind, FALLBACK.get(kind, kind), DEFAULT_MOE_KIND)):
        for row in rows:
            if row["kind"] == want:
                return MoeLayerCurve(row["hardware"], row["kind"], row["dtype"], int(row["tp"]),
                                     tuple(map(float, row["tokens"])),
                                     tuple(map(float, row["latency_us"])), row["source"],
                                     int(row.get("ep", 1)))
    return None
