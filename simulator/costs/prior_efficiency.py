"""The roofline prior's efficiencies per GPU, fitted to that GPU's measured operator tables.

``prior_efficiency.json`` (next to this module; written by ``python -m
calibrate.prior_efficiency``, which documents the fit) holds, for each GPU with profiles
composed from measured per-operator tables, the ``compute_efficiency``,
``memory_efficiency``, ``kv_memory_efficiency`` and ``layer_overhead_s`` that make the
prior match them best (per weight dtype).
Wherever the simulator builds a prior for a deployment without a measured profile (a shipped
prior file, the prior built on the fly, ``[cost] form = "roofline"`` before its own knobs),
it starts from these; a GPU not in the file keeps
:class:`~simulator.costs.roofline.RooflineCost`'s defaults. A row marked ``transferred``
(a GPU with no tables but a published matmul measurement, ``matmul_published.json``)
holds only a bf16 ``compute_efficiency``; its other knobs are the defaults.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from functools import cache
from pathlib import Path
from types import MappingProxyType
from typing import Any

from simulator.costs.roofline import RooflineCost
from simulator.costs.weight_only import SIXTEEN_BIT, weight_only
from simulator.errors import ConfigError
from simulator.specs.dtypes import same_cost_dtype
from simulator.specs.hardware import HardwareSpec, get_hardware
from simulator.specs.models import ModelSpec

EFFICIENCY_FILE = Path(__file__).with_name("prior_efficiency.json")
# published bf16 matmul throughput per GPU: what calibrate.prior_efficiency transfers eff_c
# from to a GPU without measured tables
MATMUL_FILE = Path(__file__).with_name("matmul_published.json")
KNOBS = ("compute_efficiency", "memory_efficiency", "kv_memory_efficiency",
         "layer_overhead_s")


@cache
def _fitted(path: Path) -> MappingProxyType[str, Any]:
    """The file's rows by GPU, then weight dtype (read once per process: it ships with the
    package and does not change while it runs)."""
    if not path.is_file():
        return MappingProxyType({})
    return MappingProxyType(json.loads(path.read_text())["gpus"])


def math_dtype(hardware: str, weight_dtype: str) -> str:
    """The dtype ``hardware`` (catalogue name) multiplies ``weight_dtype`` weights in: bf16
    where it runs them with weight-only kernels (simulator/costs/weight_only.py: fp8
    without FP8 tensor cores, int4 everywhere), else the weights' own."""
    try:
        hw = get_hardware(hardware)
    except ConfigError:  # not in the catalogue: nothing known of its tensor cores
        return weight_dtype
    return SIXTEEN_BIT if weight_only(weight_dtype, hw) else weight_dtype


def prior_knobs(hardware: str, weight_dtype: str, path: Path = EFFICIENCY_FILE
                ) -> dict[str, float]:
    """The efficiencies fitted for ``hardware`` (catalogue name) in the dtype it multiplies
    ``weight_dtype`` weights in (:func:`math_dtype`; fp16 reads bf16's:
    simulator/specs/dtypes.py ``same_cost_dtype``), or {}: the defaults."""
    row = _row(hardware, weight_dtype, path)
    return {} if row is None else {k: float(row[k]) for k in KNOBS if k in row}


def _row(hardware: str, weight_dtype: str, path: Path) -> Mapping[str, Any] | None:
    """The file's row for ``hardware`` in the dtype it multiplies ``weight_dtype`` in."""
    dtype = math_dtype(hardware, weight_dtype)
    by_dtype = _fitted(path).get(hardware, {})
    return next((r for d, r in by_dtype.items() if same_cost_dtype(d, dtype)), None)


def fitted_prior(model: ModelSpec, hw: HardwareSpec, tp: int, weight_dtype: str,
                 kv_dtype: str, **overrides: Any) -> RooflineCost:
    """The roofline prior the simulator builds for a deployment: the knobs fitted for its
    GPU and weight dtype (:func:`prior_knobs`), ``overrides`` (a scenario's own knobs,
    ``allreduce_kind``) over them."""
    knobs: dict[str, Any] = {**prior_knobs(hw.name, weight_dtype), **overrides}
    return RooflineCost(model, hw, tp, weight_dtype, kv_dtype, **knobs)


def prior_note(hardware: str, weight_dtype: str, path: Path = EFFICIENCY_FILE) -> str:
    """What the prior's efficiencies are, for a cost source line."""
    knobs = prior_knobs(hardware, weight_dtype, path)
    if not knobs:
        return "efficiencies: the defaults (no measured tables for this device in this dtype)"
    dtype = math_dtype(hardware, weight_dtype)
    math = "" if dtype == weight_dtype else f" ({weight_dtype} weights multiplied in {dtype})"
    moved = (_row(hardware, weight_dtype, path) or {}).get("transferred")
    if moved:
        return (f"eff_c {knobs['compute_efficiency']:g}{math} transferred from published "
                f"{dtype} matmul runs ({hardware} reaches {moved['matmul_share_of_peak']:g} of "
                f"its peak; eff_c / share {moved['ratio']:g} on the GPUs with measured "
                "tables), other efficiencies the defaults (no measured tables for this "
                "device: python -m calibrate.prior_efficiency)")
    return (f"efficiencies fitted to {hardware}'s measured {dtype} operator tables{math} "
            f"(eff_c {knobs['compute_efficiency']:g}, eff_m {knobs['memory_efficiency']:g}, "
            f"eff_kv {knobs['kv_memory_efficiency']:g}, t_layer "
            f"{knobs['layer_overhead_s'] * 1e6:g} us: python -m calibrate.prior_efficiency)")
