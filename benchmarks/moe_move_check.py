"""How well calibrate/moe_marlin.py's move of a Marlin MoE curve to another shape reads,
against AIConfigurator's own Marlin tables at shapes they measured.

    python benchmarks/moe_move_check.py

Needs the ``aiconfigurator`` extra (aiconfigurator-core==0.12.0). Each line moves one
measured curve (tp 1, ep 1, ``power_law_1.2`` routing) to another measured shape at equal
tokens per expert, its time scaled by the experts' weights (``moved``), and prints moved /
measured at 64 to 16,384 tokens of the target shape:

1. Marlin MXFP4 from the one shape the Hopper tables hold (hidden 3,584, inter 3,072, 896
   experts, top 16) to gpt-oss's two, on the one GPU that has all three (RTX Pro 6000,
   SGLang 0.5.14);
2. Marlin int4 between every pair of the ten shapes SGLang 0.5.10 timed on the A100, H100
   and H200: the median and the 10th and 90th percentiles of the 90 pairs, moved whole and
   with the fitted fixed cost a layer kept out of the scaling (``layer_fit``, as
   the A100's shipped curves are);
3. Marlin int4 to Marlin MXFP4, where one table holds both: what the A100's curves, moved
   from int4 (no MXFP4 Marlin table on an A100), miss for MXFP4's own dequantisation.

docs/gpu-profiles.md ("vLLM before 0.12 ran the experts on Marlin") reads the figures.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run as a script from anywhere

from calibrate.aic_moe import moe_table  # noqa: E402
from calibrate.aiconfigurator import find_data_root  # noqa: E402
from calibrate.moe_curves import ROUTING  # noqa: E402
from calibrate.moe_marlin import layer_fit, moved, shape_curves  # noqa: E402
from simulator.costs import knots  # noqa: E402

TOKENS = np.array([64.0, 256.0, 1024.0, 4096.0, 8192.0, 16384.0])
Shape = tuple[str, int, int, int, int]  # dtype, hidden, inter, experts, top k
Curves = dict[Shape, tuple[np.ndarray, np.ndarray]]


def marlin_curves(root: Path, system: str, backend: str, version: str) -> Curves:
    """Every Marlin curve of one table, us by tokens, per (dtype, shape)."""
    d = pd.read_parquet(moe_table(root, system, version, backend))
    d = d[d.kernel_source.str.contains("marlin") & (d.moe_tp_size == 1) & (d.moe_ep_size == 1)]
    return {(str(dtype), *shape): curve for dtype, rows in d.groupby("moe_dtype")
            for shape, curve in shape_curves(rows, ROUTING).items()}


def ratio(curves: Curves, src: Shape, dst: Shape, overhead: float = 0.0) -> np.ndarray:
    """Moved / measured at TOKENS of ``dst`` (``overhead`` us a layer kept unscaled)."""
    tokens, us = moved(curves[src][0], curves[src][1] - overhead, src[1:], dst[1:])
    return ((knots.at_array(TOKENS, tuple(tokens), tuple(us)) + overhead)
            / np.interp(TOKENS, *curves[dst]))


def _cells(values: np.ndarray) -> str:
    return " ".join(f"{v:6.2f}" for v in values)


def main() -> int:
    root = find_data_root()
    if root is None:
        print("no AIConfigurator 0.12.0 tables: install the aiconfigurator extra")
        return 1
    print(f"{'moved / measured at tokens':64s} " + " ".join(f"{int(t):>6d}" for t in TOKENS))
    rtx = marlin_curves(root, "rtx_pro_6000_server", "sglang", "0.5.14")
    src = ("w4a16_mxfp4", 3584, 3072, 896, 16)
    for dst in (("w4a16_mxfp4", 2880, 2880, 32, 4), ("w4a16_mxfp4", 2880, 2880, 128, 4)):
        print(f"{'RTX Pro 6000 MXFP4 3584/896 -> gpt-oss E' + str(dst[3]):64s} "
              + _cells(ratio(rtx, src, dst)))
    for system in ("a100_sxm", "h100_sxm", "h200_sxm"):
        curves = {k: v for k, v in marlin_curves(root, system, "sglang", "0.5.10").items()
                  if k[0] == "int4_wo"}
        c0, bytes_per_us = layer_fit({k[1:]: v for k, v in curves.items()}, 1)
        print(f"{system} int4, one token: {c0:.1f} us + the k experts' bytes at "
              f"{bytes_per_us / 1e3:,.0f} GB/s")
        for overhead, how in ((0.0, ""), (c0, f", {c0:.1f} us kept")):
            pairs = np.array([ratio(curves, a, b, overhead) for a in curves for b in curves
                              if a != b])
            for name, q in (("median", 50), ("p10", 10), ("p90", 90)):
                label = f"{system} int4, {len(pairs)} pairs{how}, {name}"
                print(f"{label:64s} " + _cells(np.percentile(pairs, q, axis=0)))
    for system, backend, version in (("h100_sxm", "vllm", "0.24.0"),
                                     ("h200_sxm", "vllm", "0.24.0"),
                                     ("h100_sxm", "sglang", "0.5.14"),
                                     ("rtx_pro_6000_server", "sglang", "0.5.14")):
        curves = marlin_curves(root, system, backend, version)
        for a in (k for k in curves if k[0] == "int4_wo"):
            for b in (k for k in curves if k[0] == "w4a16_mxfp4"):
                label = f"{system} {backend} int4 {a[1]}/{a[3]} -> MXFP4 {b[1]}/{b[3]}"
                print(f"{label:64s} " + _cells(ratio(curves, a, b)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
