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
import statistics
from collections.abc import Mapping
from functools import cache
from pathlib import Path
from types import MappingProxyType
from typing import Any

from simulator.costs.roofline import RooflineCost
from simulator.costs.weight_only import SIXTEEN_BIT, weight_only
from simulator.errors import ConfigError
from simulator.specs.dtypes import same_cost_dtype
from simulator.specs.hardware import HARDWARE, HardwareSpec, get_hardware
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


@cache
def matmul_shares(path: Path = MATMUL_FILE) -> MappingProxyType[str, float]:
    """GPU (catalogue name) -> the median of its published bf16 matmul runs over its
    datasheet bf16 peak (read once per process). A ConfigError names the file and the GPU
    or run that is wrong."""
    try:
        gpus = json.loads(path.read_text())["gpus"]
        runs = {gpu: [float(r["tflops"]) for r in row["runs"]] for gpu, row in gpus.items()}
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise ConfigError(f"{path}: not a matmul measurement file ({exc!r}); expected "
                          '{"gpus": {gpu: {"runs": [{"tflops": ...}, ...]}}}') from exc
    out = {}
    for gpu, values in runs.items():
        if gpu not in HARDWARE:
            raise ConfigError(f"{path}: gpu {gpu!r} is not in the hardware catalogue "
                              f"({sorted(HARDWARE)})")
        if not values or min(values) <= 0:
            raise ConfigError(f"{path}: gpu {gpu!r} needs runs with tflops > 0, got {values}")
        out[gpu] = statistics.median(values) / HARDWARE[gpu].bf16_tflops
    return MappingProxyType(out)


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


def sibling_scale(hardware: str, sibling: str, weight_dtype: str,
                  matmul: Path = MATMUL_FILE) -> float:
    """What ``hardware``'s prior multiplies its ``sibling``'s fitted eff_c by (the same
    chip on another board, simulator/costs/sibling.py): the ratio of the two cards'
    measured bf16 matmul shares of peak, where both were measured and the math is 16-bit
    (a board's power limit, which its datasheet peak does not hold: the H100 PCIe reaches
    0.656 of its 756 TFLOP/s, the SXM 0.798 of its 989); else 1."""
    shares = matmul_shares(matmul)
    if (hardware not in shares or sibling not in shares
            or not same_cost_dtype(math_dtype(hardware, weight_dtype), SIXTEEN_BIT)):
        return 1.0
    return shares[hardware] / shares[sibling]


def sibling_knobs(hardware: str, sibling: str, weight_dtype: str,
                  path: Path = EFFICIENCY_FILE, matmul: Path = MATMUL_FILE
                  ) -> tuple[dict[str, float], float]:
    """The knobs ``hardware``'s prior takes from its ``sibling``: the sibling's fitted
    efficiencies (:func:`prior_knobs`), eff_c times :func:`sibling_scale`; and that scale
    (for the cost source)."""
    knobs = prior_knobs(sibling, weight_dtype, path)
    scale = sibling_scale(hardware, sibling, weight_dtype, matmul)
    if "compute_efficiency" in knobs and scale != 1.0:
        knobs["compute_efficiency"] *= scale
    return knobs, scale


def fitted_prior(model: ModelSpec, hw: HardwareSpec, tp: int, weight_dtype: str,
                 kv_dtype: str, **overrides: Any) -> RooflineCost:
    """The roofline prior the simulator builds for a deployment: the knobs fitted for its
    GPU and weight dtype (:func:`prior_knobs`), ``overrides`` (a scenario's own knobs,
    ``allreduce_kind``) over them."""
    knobs: dict[str, Any] = {**prior_knobs(hw.name, weight_dtype), **overrides}
    return RooflineCost(model, hw, tp, weight_dtype, kv_dtype, **knobs)


def prior_note(hardware: str, weight_dtype: str, path: Path = EFFICIENCY_FILE) -> str:
    """What the prior's efficiencies are, for a cost source line."""
    row = _row(hardware, weight_dtype, path)
    if row is None:
        return "efficiencies: the defaults (no measured tables for this device in this dtype)"
    knobs = {k: float(row[k]) for k in KNOBS if k in row}
    dtype = math_dtype(hardware, weight_dtype)
    math = "" if dtype == weight_dtype else f" ({weight_dtype} weights multiplied in {dtype})"
    moved = row.get("transferred")
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
