"""Fit collective latency curves to AIConfigurator's measured comm tables.

    python -m calibrate.collectives_fit [--check] [--data DIR]

Needs the ``aiconfigurator`` extra (aiconfigurator-core==0.12.0). For each GPU we price
(a100-80gb, h100-sxm, h200), each all-reduce implementation with a table, and TP 2/4/8,
fits a continuous piecewise-linear latency over message bytes with knots at
0, 16 KiB, 128 KiB, 1 MiB, 8 MiB and 64 MiB (the regimes of NCCL's LL, LL128 and Simple protocols
and of the custom one-shot / two-shot kernels) by least squares on relative error (each
row weighted by 1 / its latency), and writes the knots with provenance to
``simulator/costs/collectives.json`` (read by simulator/costs/collectives.py). Tables:

- nccl: ``comm/nccl/<system file's nccl_version>/nccl_perf.parquet``, ops all_reduce,
  all_gather and reduce_scatter (the last two: the token exchange around the experts under
  attention data parallelism; message size there is the gathered tensor's), dtype half
  (NCCL run by NVIDIA's collector, CUDA graphs off);
- trtllm: ``comm/trtllm/<current>/custom_allreduce_perf.parquet``, bf16;
- vllm_graph / vllm_eager, sglang_graph / sglang_eager: that engine's custom all-reduce
  (same file name under ``comm/vllm`` or ``comm/sglang``) captured in a CUDA graph or
  run eagerly.

Versions are AIConfigurator 0.12.0's "current" slots (``systems/query_versions.yaml``).
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from calibrate.aic_tables import _read_yaml
from calibrate.aiconfigurator import AIC_VERSION, DISTRIBUTION, file_cli
from calibrate.aiconfigurator import SYSTEMS as AIC_SYSTEMS
from calibrate.generated_file import write_or_check
from simulator.costs.collectives import COLLECTIVES_FILE

KNOTS_BYTES = (0.0, 16 * 2**10, 128 * 2**10, 2**20, 8 * 2**20, 64 * 2**20)
TPS = (2, 4, 8)
BYTES_PER_ELEMENT = 2.0  # the tables' message_size counts bf16/half elements
SYSTEMS: dict[str, str] = {hw: system for hw, (system, _) in AIC_SYSTEMS.items()}
CUSTOM = "custom_allreduce_perf.parquet"
# NCCL's collectives fitted: the all-reduce, and the all-gather and reduce-scatter that
# carry tokens to the experts and back under attention data parallelism (roofline.py)
NCCL_OPS = ("all_reduce", "all_gather", "reduce_scatter")


def current_version(root: Path, system: str, backend: str) -> str:
    """``backend``'s "current" table version for ``system`` (``query_versions.yaml``: the
    system's override, else the default)."""
    slots = _read_yaml(root / "query_versions.yaml")
    override = slots.get("overrides", {}).get(system, {}).get(backend)
    return str((override or slots["defaults"][backend])["current"])


def sources(root: Path, system: str) -> dict[str, tuple[Path, dict[str, str]]]:
    """kind -> (table path, column filters) for the tables this system has."""
    nccl_v = str(_read_yaml(root / f"{system}.yaml")["misc"]["nccl_version"])
    data = root / "data" / system / "comm"
    out = {"nccl": (data / "nccl" / nccl_v / "nccl_perf.parquet",
                    {"op_name": "all_reduce", "nccl_dtype": "half"})}
    for backend in ("trtllm", "sglang", "vllm"):
        path = data / backend / current_version(root, system, backend) / CUSTOM
        if not path.is_file():
            continue  # e.g. h100_sxm vLLM 0.24.0 collected no all-reduce
        if backend == "trtllm":
            out[backend] = (path, {"allreduce_dtype": "bfloat16"})
        else:  # rows timed inside a CUDA graph and eagerly, told apart by "backend"
            for mode in ("graph", "eager"):
                name = f"{backend}_{mode}"
                out[name] = (path, {"backend": name, "allreduce_dtype": "bfloat16"})
    return out


def _hats(nbytes: np.ndarray, knots: tuple[float, ...]) -> np.ndarray:
    """Basis of the piecewise-linear curve: column i is 1 at knot i, 0 at the others;
    past the last knot the last two columns extrapolate the last segment."""
    cols = []
    for i in range(len(knots)):
        unit = np.zeros(len(knots))
        unit[i] = 1.0
        slope = (unit[-1] - unit[-2]) / (knots[-1] - knots[-2])
        inside = np.interp(nbytes, knots, unit)
        cols.append(np.where(nbytes > knots[-1], unit[-1] + (nbytes - knots[-1]) * slope,
                             inside))
    return np.stack(cols, axis=1)


def fit_curve(nbytes: np.ndarray, latency_us: np.ndarray,
              knots: tuple[float, ...] = KNOTS_BYTES) -> tuple[list[float], dict[str, float]]:
    """Knot latencies (us) minimising relative error, and the fit's error summary."""
    basis = _hats(nbytes, knots)
    w = 1.0 / latency_us
    coef, *_ = np.linalg.lstsq(basis * w[:, None], latency_us * w, rcond=None)
    rel = basis @ coef / latency_us - 1.0
    return [round(float(c), 3) for c in coef], {
        "mape": round(float(np.mean(np.abs(rel))), 4),
        "max_ape": round(float(np.max(np.abs(rel))), 4), "n_points": int(len(rel))}


def _tables(root: Path, system: str) -> Iterator[tuple[str, str, Path, pd.DataFrame]]:
    """(kind, op, path, rows) of each table :func:`sources` names, NCCL's once per op in
    :data:`NCCL_OPS`."""
    for kind, (path, where) in sources(root, system).items():
        table = pd.read_parquet(path)
        for column, value in where.items():
            if column != "op_name":
                table = table[table[column] == value]
        if "op_name" not in where:
            yield kind, "all_reduce", path, table
            continue
        for op in NCCL_OPS:
            yield kind, op, path, table[table.op_name == op]


def fit_all(root: Path) -> list[dict[str, Any]]:
    """Every (GPU, kind, op, tp) curve with its provenance."""
    curves = []
    for hw, system in SYSTEMS.items():
        for kind, op, path, table in _tables(root, system):
            for tp in TPS:
                rows = table[table.num_gpus == tp].sort_values("message_size")
                if rows.empty:
                    continue
                nbytes = rows.message_size.to_numpy(np.float64) * BYTES_PER_ELEMENT
                lat_us = rows.latency.to_numpy(np.float64) * 1e3  # tables are in ms
                knots_lat, fit = fit_curve(nbytes, lat_us)
                rel = str(path.relative_to(root))
                curves.append({
                    "hardware": hw, "kind": kind, "op": op, "tp": tp,
                    "knots_bytes": list(KNOTS_BYTES), "latency_us": knots_lat,
                    "source": f"AIConfigurator {AIC_VERSION} {rel}", "fit": {
                        **fit, "bytes_range": [float(nbytes[0]), float(nbytes[-1])]},
                })
    return curves


def document(curves: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "about": "Collective latency curves (simulator/costs/collectives.py), fitted by "
                 "python -m calibrate.collectives_fit to the collective tables NVIDIA "
                 f"measured and ships in {DISTRIBUTION} {AIC_VERSION} (Apache-2.0); "
                 "knots_bytes: message bytes per GPU, latency_us: fitted latency at each "
                 "knot; fit: mean and max relative error over the table's rows",
        "curves": curves,
    }


def main(argv: list[str] | None = None) -> int:
    cli = file_cli(__doc__ or "", COLLECTIVES_FILE, "calibrate.collectives_fit", argv)
    if cli is None:
        return 2
    args, root = cli
    doc = document(fit_all(root))
    for c in doc["curves"]:
        print(f"{c['hardware']:10s} {c['kind']:10s} {c['op']:14s} tp{c['tp']} "
              f"t0 {c['latency_us'][0]:6.1f} us"
              f"  MAPE {c['fit']['mape']:6.1%}  max {c['fit']['max_ape']:6.1%}")
    print(f"{len(doc['curves'])} curves")
    return write_or_check(args.out, doc, args.check, "calibrate.collectives_fit", indent=1)


if __name__ == "__main__":
    sys.exit(main())
