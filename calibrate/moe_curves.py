"""Read one MoE layer's latency by token count from AIConfigurator's MoE tables.

    python -m calibrate.moe_curves [--check] [--data DIR] [--out FILE]

Needs the ``aiconfigurator`` extra (aiconfigurator-core==0.12.0). For each kernel table
(``trtllm``, ``vllm``, ``sglang``), each GPU whose tables that stack has at AIConfigurator's
"current" slot (``systems/query_versions.yaml``; the B200's included: it has all three),
each MoE model of the catalogue, weight dtype (bf16, fp8's per-tensor rows where the
GPU has FP8 math, and MXFP4's W4A16 rows: gpt-oss) and TP degree 1, 2, 4, 8: the median
latency by token count of the rows at moe_tp = tp, ep 1 (and at moe_tp 1, ep 2, 4, 8: the
experts under attention data parallelism, a row's ``ep``), first kernel in sorted order,
with the routing AIConfigurator's own engine prices these models with: ``power_law_1.2``
(``sdk/models/moe.py``, the generic MoE model: Qwen3-MoE, Mixtral; ``_power_law_alpha =
1.2`` with ``workload_distribution = "power_law"``, the SDK's default). Balanced routing
spreads 16 tokens x 8 picks over all 128 experts, which real routing does not (B200 SGLang
Qwen3 at tp 8: 126 us balanced against 70 us power law at 16 tokens); past 256 tokens
power law reads 2-16% slower (``python benchmarks/moe_prior_check.py --routing
balanced``). Writes the knots, no fit, with provenance to ``simulator/costs/moe_tables.json``
(read by simulator/costs/moe_tables.py): the roofline prior's experts where no composed
profile prices the model (Qwen3-235B-A22B: the piecewise profile cannot follow its expert
reads, calibrate/aic_moe.py; gpt-oss has no composed profile at all). Last, the
``vllm-marlin`` curves: vLLM's Marlin MXFP4 kernel moved to gpt-oss's shapes on Hopper, and
the A100's ``vllm`` MXFP4 curves, moved from SGLang's int4 Marlin tables there
(calibrate/moe_marlin.py).

vLLM's FP8 curves come from the block-FP8 (``fp8_block``) rows of its
``Fp8MoEMethod`` kernels (``vllm_fp8moe_*``: Triton at moe_tp 1-4, FlashInfer's CUTLASS
experts at ep 2-8, the only ones timed there), not from the table's per-tensor ``fp8``
rows: those time ``vllm_modeloptfp8moe_flashinfer_cutlass``, the path vLLM takes for NVIDIA
ModelOpt checkpoints only, 1.4-4.5x its bf16 kernel's latency at every token count
(``python benchmarks/moe_dtype_compare.py`` on the file these rows replaced;
docs/gpu-profiles.md, "vLLM's FP8 experts are its own method's"). vLLM's own FP8
checkpoints (Qwen's block-wise FP8, llm-compressor's) run ``Fp8MoEMethod``, on Triton unless
``VLLM_USE_FLASHINFER_MOE_FP8`` is set. The B200's table times ``Fp8MoEMethod`` with
FlashInfer's TRT-LLM kernels, and those rows price it there. Where a table has no such rows
the fp8 rows stay; a TP degree those rows lack (Qwen3-235B at moe_tp 8) has no vLLM curve,
so the default kind's prices it.

An ep curve is checked against the one at half its ep (``sane_routing``): spreading the
experts over twice the GPUs cannot make the layer slower, so where the routing's rows read
``EP_SLOWER_LIMIT`` times the smaller ep's or more, the next routing that does not is taken
and the source says why (one curve: Llama 4 Maverick's H200 TensorRT-LLM FP8 rows at ep 8).

TensorRT-LLM's FP8 curves read the per-tensor ``fp8`` rows; a shape the table times in
``fp8_block`` only (DeepSeek-R1: its own checkpoint is block-scaled FP8, and NVIDIA's
tables time it so) reads those. SGLang's tables time FP8 experts in ``fp8_block`` only (its
Triton fused MoE over block-scaled checkpoints: Qwen's and DeepSeek's own FP8), so its fp8
curves are those rows; before stop 61 SGLang had no FP8 curve and took TensorRT-LLM's.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from itertools import product
from pathlib import Path
from typing import Any

import pandas as pd

from calibrate.aic_backends import BACKENDS, EXTRA_VERSIONS, VERSIONS
from calibrate.aic_moe import routing_curve, shape_rows
from calibrate.aiconfigurator import AIC_VERSION, file_cli
from calibrate.collectives_fit import current_version
from calibrate.generated_file import write_or_check
from calibrate.moe_marlin import read_ampere, read_marlin
from simulator.costs.moe_tables import MOE_FILE, SHAPE_KEYS
from simulator.specs.hardware import HARDWARE
from simulator.specs.models import MODELS

TPS = (1, 2, 4, 8)
# expert-parallel degrees read at moe_tp 1: attention data parallelism's experts
# (simulator/costs/roofline.py, "attention data parallel")
EPS = (2, 4, 8)
# vLLM's FP8 MoE (module docstring): Fp8MoEMethod's kernels, timed on block-FP8 rows, its
# Triton one first
VLLM_FP8_METHOD = "vllm_fp8moe_"
VLLM_FP8_KERNEL = "vllm_fp8moe_triton_tritonexperts"
ROUTING = "power_law_1.2"  # AIConfigurator's generic MoE model's routing (module docstring)
# stacks whose fp8 curves read a shape's fp8_block rows where the table has no per-tensor ones
BLOCK_FP8 = ("trtllm", "sglang")
MORE_SYSTEMS = {"b200": "b200_sxm"}  # GPUs whose MoE tables every stack has, not composed


def gpu_systems(root: Path, backend: str) -> dict[str, tuple[str, str]]:
    """Our GPU name -> (AIConfigurator system, table version) for ``backend``: the
    composed GPUs' versions, then ``MORE_SYSTEMS`` at their current slot."""
    out = {**VERSIONS[backend], **EXTRA_VERSIONS.get(backend, {})}
    for hw, system in MORE_SYSTEMS.items():
        out.setdefault(hw, (system, current_version(root, system, backend)))
    return out


def moe_models() -> tuple[str, ...]:
    """The catalogue's MoE models."""
    return tuple(name for name, m in MODELS.items() if m.num_experts > 1)


def read_all(root: Path) -> Iterator[dict[str, Any]]:
    """One curve row per (kind, GPU, model, dtype, tp) the tables hold."""
    tables: dict[Path, pd.DataFrame] = {}  # each table read once, for every shape asked of it
    for backend in BACKENDS:
        for hw, (system, version) in gpu_systems(root, backend).items():
            dtypes = ("bf16", "fp8") if HARDWARE[hw].fp8_tflops is not None else ("bf16",)
            dtypes += ("mxfp4",)  # gpt-oss's W4A16 rows, on every GPU whose table has them
            for model, dtype in product(moe_models(), dtypes):
                table = curve_rows(root, system, version, backend, dtype, model, 1, tables)
                if table is None:
                    continue
                path, rows = table
                for tp in TPS:
                    yield from _curve_row(root, path, rows[rows.moe_tp_size == tp], hw,
                                          backend, dtype, model, tp, 1)
                # moe_tp 1: each GPU holds E / ep whole experts; each ep's curve checked
                # against the one below it (ep 1: the moe_tp 1 rows)
                below = routing_curve(rows[rows.moe_tp_size == 1], ROUTING)
                for ep in EPS:
                    table = curve_rows(root, system, version, backend, dtype, model, ep, tables)
                    if table is not None:
                        ep_rows = table[1][table[1].moe_tp_size == 1]
                        routing = sane_routing(ep_rows, below)
                        yield from _curve_row(root, path, ep_rows, hw, backend, dtype,
                                              model, 1, ep, routing)
                        below = routing_curve(ep_rows, routing[0])


# A layer's experts spread over twice the GPUs cannot take longer: a GPU then holds half
# the experts and gets at most the tokens it got. A curve whose median over shared token
# counts reads past this ratio to the curve at half the ep is taken as a broken
# measurement (AIConfigurator 0.12.0's H200 TensorRT-LLM FP8 rows of Llama 4 Maverick at
# ep 8, power_law_1.2: 3.9x its ep 4 rows, 264 us at one token against 59 us, where its
# balanced and power_law_1.01 rows at ep 8 read about half of ep 4's). Every other curve
# the tables give reads at most 1.09x.
EP_SLOWER_LIMIT = 1.5
FALLBACK_ROUTINGS = ("power_law_1.01", "balanced")


def sane_routing(rows: Any, below: tuple[Any, str] | None) -> tuple[str, str]:
    """(the routing whose rows ``rows`` (one ep, moe_tp 1) price the layer with, why):
    ``ROUTING`` unless its curve reads ``EP_SLOWER_LIMIT`` times ``below``'s (the curve
    shipped at half the ep) or more, then the first of ``FALLBACK_ROUTINGS`` that does not;
    ``ROUTING`` again, said so, when none does."""
    if below is None or routing_curve(rows, ROUTING) is None:
        return ROUTING, ""  # nothing to check, or no curve at all (as without the check)
    first = 0.0
    for routing in (ROUTING, *FALLBACK_ROUTINGS):
        curve = routing_curve(rows, routing)
        if curve is None:
            continue
        shared = curve[0].index.intersection(below[0].index)
        ratio = float((curve[0][shared] / below[0][shared]).median()) if len(shared) else 0.0
        if ratio < EP_SLOWER_LIMIT:
            return routing, "" if routing == ROUTING else (
                f"; {ROUTING} rows read {first:.1f}x the next smaller ep's, a broken "
                f"measurement (calibrate/moe_curves.py, EP_SLOWER_LIMIT)")
        first = first or ratio
    return ROUTING, (f"; its rows read {first:.1f}x the next smaller ep's and no other "
                     f"routing reads less (calibrate/moe_curves.py, EP_SLOWER_LIMIT)")


def curve_rows(root: Path, system: str, version: str, backend: str, dtype: str, model: str,
               ep: int = 1, tables: dict[Path, pd.DataFrame] | None = None
               ) -> tuple[Path, Any] | None:
    """:func:`shape_rows`, except vLLM's FP8: the block-FP8 rows of its ``Fp8MoEMethod``
    kernels where the table has them, the Triton kernel's first (module docstring), else
    its own fp8 rows."""
    if (backend, dtype) == ("vllm", "fp8"):
        table = shape_rows(root, system, version, backend, "fp8_block", model, ep, tables)
        if table is not None:
            ours = table[1][table[1].kernel_source.str.startswith(VLLM_FP8_METHOD)]
            triton = ours[ours.kernel_source == VLLM_FP8_KERNEL]
            if not ours.empty:
                return table[0], triton if not triton.empty else ours
    table = shape_rows(root, system, version, backend, dtype, model, ep, tables)
    if table is not None and table[1].empty and dtype == "fp8" and backend in BLOCK_FP8:
        # block-FP8 experts (module docstring): the shape is timed in fp8_block only
        table = shape_rows(root, system, version, backend, "fp8_block", model, ep, tables)
    return table


def _curve_row(root: Path, path: Path, rows: Any, hw: str, backend: str, dtype: str,
               model: str, tp: int, ep: int, routing: tuple[str, str] = (ROUTING, "")
               ) -> Iterator[dict[str, Any]]:
    """The curve row of ``rows`` (one moe_tp and ep) at ``routing`` (its name, and why it
    is not ``ROUTING``), none when fewer than two counts."""
    curve = routing_curve(rows, routing[0])
    if curve is None or len(curve[0]) < 2:
        return
    latency, kernel = curve
    yield {
        "hardware": hw, "kind": backend, "dtype": dtype, "tp": tp,
        **({"ep": ep} if ep > 1 else {}),
        **{key: getattr(MODELS[model], key) for key in SHAPE_KEYS},
        "model": model,
        "tokens": [int(t) for t in latency.index],
        "latency_us": [round(float(v) * 1e3, 4) for v in latency],
        "source": (f"AIConfigurator {AIC_VERSION} "
                   f"{path.relative_to(root)} ({kernel}, {rows.moe_dtype.iloc[0]}, "
                   f"moe_tp {tp}, ep {ep}, {routing[0]} routing{routing[1]})"),
    }


def document(rows: list[dict[str, Any]]) -> dict[str, Any]:
    return {"about": ("One MoE layer's latency (us) at each token count AIConfigurator "
                      f"{AIC_VERSION}'s MoE tables collected, per kernel table (kind), GPU, "
                      "weight dtype, TP and MoE shape: python -m calibrate.moe_curves; read "
                      "by simulator/costs/moe_tables.py"),
            "curves": rows}


def main(argv: list[str] | None = None) -> int:
    cli = file_cli(__doc__ or "", MOE_FILE, "calibrate.moe_curves", argv)
    if cli is None:
        return 2
    args, root = cli
    rows = [*read_all(root), *read_marlin(root, ROUTING, TPS), *read_ampere(root, ROUTING, TPS)]
    for c in rows:
        print(f"{c['kind']:7s} {c['hardware']:10s} {c['model']:16s} {c['dtype']:5s} tp{c['tp']}"
              f" ep{c.get('ep', 1)}"
              f"  {c['tokens'][0]}-{c['tokens'][-1]} tokens  {c['latency_us'][0]:8.1f} -"
              f" {c['latency_us'][-1]:10.1f} us")
    print(f"{len(rows)} curves")
    return write_or_check(args.out, document(rows), args.check, "calibrate.moe_curves",
                          indent=1)


if __name__ == "__main__":
    sys.exit(main())
