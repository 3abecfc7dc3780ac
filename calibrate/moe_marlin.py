"""vLLM's Marlin MXFP4 expert layers at gpt-oss's shapes, moved from AIConfigurator's
Marlin rows at another shape.

Which kernel vLLM runs gpt-oss's MXFP4 experts on depends on the release. Before 0.12, on
Hopper, ``get_mxfp4_backend`` (``vllm/model_executor/layers/quantization/mxfp4.py``,
0.10.2 and 0.11.0) picks OpenAI's ``triton_kernels`` (``matmul_ogs``) only when that
package imports, else Marlin, and neither the PyPI wheels nor ``docker/Dockerfile`` of
0.10.2-0.11.x install it (vllm-project/vllm#27370, 2025-10-22: users "have to install
``triton_kernels`` manually"). vllm-project/vllm#28788 bundles it as
``vllm/third_party/triton_kernels`` from 0.12.0. So a stock vLLM 0.10 or 0.11 runs gpt-oss on
Marlin on an H100 or H200, and AIConfigurator 0.12.0 timed the triton kernel (vLLM 0.24.0's
``vllm_gptossmxfp4moe_triton_oaitritonmxfp4expertsmonolithic`` rows).

The same vLLM 0.24.0 tables hold Marlin's MXFP4 expert layer
(``vllm_compressedtensorsw4a4mxfp4moe_marlin_marlinexperts...``, W4A16 MXFP4) at one other
shape only (hidden 3,584, expert inter 3,072, 896 experts, top 16). There it reaches about
200 TFLOP/s on the H100 at 8,192-16,384 tokens; the triton kernel at gpt-oss-20b's shape
reaches 520-540 (``python benchmarks/gpt_oss_check.py F --kernels`` prints both). This module
moves the Marlin curve to a gpt-oss shape at equal tokens per expert (T k / E): the same
GEMM rows per expert, so the same share of peak, and time in proportion to the expert
weights every expert holds, E h i (with TP, h i / tp on both sides). That is

    T_dst = T_src (k_src E_dst) / (k_dst E_src)
    t_dst = t_src (E_dst h_dst i_dst) / (E_src h_src i_src)

and past the last moved count the curve continues its last slope (simulator/costs/knots.py:
compute-bound there). A step of few tokens is no longer like the source's: the launch,
routing and permutation cost a layer whatever its shape, and the move would scale them down
too. So the curve never reads below the triton kernel's measured one at the model's own
shape (its floor): the max of the two at the union of their token counts. Both curves read
the tables' ``power_law_1.2`` rows at moe_tp = tp, ep 1, as calibrate/moe_curves.py does.

``python benchmarks/moe_move_check.py`` reads the move against the tables' own Marlin
shapes: within about 15% between int4 shapes; gpt-oss-20b's shape 24-40% slow past 4,096
tokens on the one GPU whose tables hold both MXFP4 shapes (docs/gpu-profiles.md).

On the A100 vLLM runs MXFP4 experts on Marlin in every release (below SM90), and no table
holds MXFP4 Marlin or the triton kernel there. SGLang 0.5.10's A100 table holds Marlin
int4 (W4A16, the same kernel family) at ten shapes. Each is moved as above with its fixed
cost a layer kept out of the scaling: ``c0``, the intercept of the one-token latencies
against the bytes of the k experts a token reads (:func:`layer_fit`; 30.5 us and
1,444 GB/s at tp 1), so t_dst = c0 + (t_src - c0) x scale. The curve is the median of the
ten moved curves at the tables' token counts, kind ``vllm``: on an A100 that is the kernel
vLLM runs. int4 Marlin reads 0.83-1.07 of MXFP4 Marlin where both were timed (MXFP4's
dequantisation costs a little more), which the curve does not add.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from calibrate.aic_backends import VERSIONS
from calibrate.aic_moe import MOE_DTYPE, moe_table, routing_curve
from calibrate.aiconfigurator import AIC_VERSION
from simulator.costs import knots
from simulator.costs.moe_tables import MARLIN_KIND, SHAPE_KEYS
from simulator.specs.models import MODELS

BACKEND = "vllm"  # whose tables hold both kernels
HOPPER = ("h100-sxm", "h200")  # SM90: where vLLM < 0.12 fell back to Marlin (module docstring)
DTYPE = "mxfp4"
AMPERE = ("a100-80gb",)  # Marlin in every vLLM release; SGLang's int4 Marlin tables move there
INT4 = "int4_wo"
INT4_BYTES = 0.5  # a weight of int4 Marlin's rows, for the one-token fit


def marlin_rows(table: pd.DataFrame) -> pd.DataFrame:
    """The table's Marlin W4A16 MXFP4 rows at ep 1."""
    return table[table.kernel_source.str.contains("marlin") & (table.moe_ep_size == 1)
                 & (table.moe_dtype == MOE_DTYPE[DTYPE])]


def moved(tokens: np.ndarray, latency: np.ndarray, src: tuple[int, ...], dst: tuple[int, ...]
          ) -> tuple[np.ndarray, np.ndarray]:
    """A curve at shape ``src`` moved to shape ``dst`` (each ``(hidden, inter, experts,
    top k)``) at equal tokens per expert, time scaled by the experts' weights (module
    docstring)."""
    h_s, i_s, e_s, k_s = src
    h_d, i_d, e_d, k_d = dst
    return (tokens * (k_s * e_d) / (k_d * e_s),
            latency * (e_d * h_d * i_d) / (e_s * h_s * i_s))


def with_floor(curve: tuple[np.ndarray, np.ndarray], floor: tuple[np.ndarray, np.ndarray]
               ) -> tuple[np.ndarray, np.ndarray]:
    """The larger of two curves at the union of their token counts (each read between its
    counts linearly, past its last count on its last slope, below its first at its first)."""
    at = np.union1d(curve[0], floor[0])
    at = at[at >= floor[0][0]]  # the model's own table's fewest tokens start the curve
    one = knots.at_array(at, tuple(curve[0]), tuple(curve[1]))
    two = knots.at_array(at, tuple(floor[0]), tuple(floor[1]))
    return at, np.maximum(one, two)


def _targets() -> Iterator[tuple[str, tuple[int, ...]]]:
    """The catalogue's MoE models whose experts alone are quantised (gpt-oss), each with its
    (hidden, inter, experts, top k)."""
    for name, m in MODELS.items():
        if m.experts_only_quantised and m.num_experts > 1:
            yield name, tuple(getattr(m, key) for key in SHAPE_KEYS)


def _shape(row: pd.DataFrame) -> tuple[int, ...]:
    return tuple(int(row[c].iloc[0]) for c in ("hidden_size", "inter_size", "num_experts",
                                                "topk"))


def read_marlin(root: Path, routing: str, tps: tuple[int, ...]) -> Iterator[dict[str, Any]]:
    """One ``vllm-marlin`` curve row per (Hopper GPU, gpt-oss model, tp) whose vLLM table
    holds both the Marlin rows and the triton rows at the model's shape."""
    for hw in HOPPER:
        system, version = VERSIONS[BACKEND][hw]
        path = moe_table(root, system, version, BACKEND)
        if not path.is_file():
            continue
        table = pd.read_parquet(path)
        source = marlin_rows(table)
        if source.empty:
            continue
        shapes = source.groupby(["hidden_size", "inter_size", "num_experts", "topk"]).size()
        if len(shapes) != 1:  # the move assumes one source shape; a second would need a rule
            raise ValueError(f"{path}: Marlin MXFP4 rows at {len(shapes)} shapes, expected 1")
        src = _shape(source)
        for model, dst in _targets():
            own = table[(table.hidden_size == dst[0]) & (table.inter_size == dst[1])
                        & (table.num_experts == dst[2]) & (table.topk == dst[3])
                        & (table.moe_ep_size == 1) & (table.moe_dtype == MOE_DTYPE[DTYPE])
                        & ~table.kernel_source.str.contains("marlin")]
            for tp in tps:
                marlin = routing_curve(source[source.moe_tp_size == tp], routing)
                floor = routing_curve(own[own.moe_tp_size == tp], routing)
                if marlin is None or floor is None:
                    continue
                src_t = marlin[0].index.to_numpy(dtype=float)
                curve = moved(src_t, marlin[0].to_numpy(dtype=float) * 1e3, src, dst)
                base = (floor[0].index.to_numpy(dtype=float),
                        floor[0].to_numpy(dtype=float) * 1e3)
                tokens, latency = with_floor(curve, base)
                yield {
                    "hardware": hw, "kind": MARLIN_KIND, "dtype": DTYPE, "tp": tp,
                    **dict(zip(SHAPE_KEYS, dst, strict=True)), "model": model,
                    "tokens": [round(float(t), 4) for t in tokens],
                    "latency_us": [round(float(v), 4) for v in latency],
                    "source": (f"AIConfigurator {AIC_VERSION} {path.relative_to(root)}: "
                               f"{marlin[1]} ({MOE_DTYPE[DTYPE]}, hidden {src[0]}, inter "
                               f"{src[1]}, {src[2]} experts, top {src[3]}) moved to this shape "
                               f"at equal tokens per expert, floored by {floor[1]} at this "
                               f"shape (moe_tp {tp}, ep 1, {routing} routing; "
                               "calibrate/moe_marlin.py)"),
                }


Curves = dict[tuple[int, ...], tuple[np.ndarray, np.ndarray]]  # shape -> (tokens, us)


def shape_curves(rows: pd.DataFrame, routing: str) -> Curves:
    """Each (hidden, inter, experts, top k) of ``rows``: its ``routing`` curve, us by
    tokens (:func:`calibrate.aic_moe.routing_curve`; shapes without that routing left out)."""
    out: Curves = {}
    for shape, part in rows.groupby(["hidden_size", "inter_size", "num_experts", "topk"]):
        curve = routing_curve(part, routing)
        if curve is not None:
            out[tuple(int(v) for v in shape)] = (curve[0].index.to_numpy(dtype=float),
                                                  curve[0].to_numpy(dtype=float) * 1e3)
    return out


def layer_fit(curves: Curves, tp: int) -> tuple[float, float]:
    """One Marlin MoE layer's fixed cost (us) and the bytes a us it reads weights at: the
    intercept and the inverse slope of a least-squares line through each shape's one-token
    latency against the bytes of the k experts one token reads on a GPU (k x 3 h i / tp at
    INT4_BYTES)."""
    reads = [k * 3 * h * i / tp * INT4_BYTES for h, i, _, k in curves]
    one = [float(np.interp(1.0, *curve)) for curve in curves.values()]
    slope, intercept = np.polyfit(reads, one, 1)
    return float(intercept), float(1.0 / slope)


def moved_median(curves: Curves,
                 dst: tuple[int, ...], overhead: float, grid: np.ndarray) -> np.ndarray:
    """Every source curve moved to ``dst`` with ``overhead`` us a layer kept unscaled, read
    at ``grid`` tokens; the median over the sources."""
    out = []
    for src, (tokens, us) in curves.items():
        at, scaled = moved(tokens, us - overhead, src, dst)
        out.append(knots.at_array(grid, tuple(at), tuple(scaled)) + overhead)
    return np.median(np.array(out), axis=0)


def read_ampere(root: Path, routing: str, tps: tuple[int, ...]) -> Iterator[dict[str, Any]]:
    """One ``vllm`` MXFP4 curve row per (Ampere GPU, gpt-oss model, tp) from SGLang's int4
    Marlin tables there (module docstring)."""
    for hw in AMPERE:
        system, version = VERSIONS["sglang"][hw]
        path = moe_table(root, system, version, "sglang")
        if not path.is_file():
            continue
        table = pd.read_parquet(path)
        rows = table[table.kernel_source.str.contains("marlin") & (table.moe_ep_size == 1)
                     & (table.moe_dtype == INT4)]
        for tp in tps:
            curves = shape_curves(rows[rows.moe_tp_size == tp], routing)
            if len(curves) < 3:  # too few shapes for a line and a median
                continue
            c0 = layer_fit(curves, tp)[0]
            grid = next(iter(curves.values()))[0]
            for model, dst in _targets():
                latency = moved_median(curves, dst, c0, grid)
                yield {
                    "hardware": hw, "kind": BACKEND, "dtype": DTYPE, "tp": tp,
                    **dict(zip(SHAPE_KEYS, dst, strict=True)), "model": model,
                    "tokens": [int(t) for t in grid],
                    "latency_us": [round(float(v), 4) for v in latency],
                    "source": (f"AIConfigurator {AIC_VERSION} {path.relative_to(root)}: "
                               f"the median of SGLang's Marlin int4 rows at {len(curves)} "
                               f"shapes moved to this shape at equal tokens per expert, "
                               f"{c0:.1f} us a layer kept unscaled (moe_tp {tp}, ep 1, "
                               f"{routing} routing; Marlin is vLLM's MXFP4 kernel below SM90; "
                               "calibrate/moe_marlin.py)"),
                }
