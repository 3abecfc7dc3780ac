"""A MoE layer: the measured curve the prior reads against the roofline it replaced.

    python benchmarks/moe_prior_check.py [--model qwen3-235b-a22b] [--gpu b200]
                                         [--dtype bf16] [--tp 8] [--kind sglang]
                                         [--routing balanced --data DIR]

Prints, at each token count, one layer's experts as simulator/costs/moe_tables.py prices
them (the measured curve of ``--kind``'s table; docs/gpu-profiles.md, "MoE layers from
measured tables") and as the roofline priced them before: the experts a step hits under
uniform routing, E (1 - (1 - k/E)^T), their weights at eff_m x bandwidth, or their FLOPs
(2 k 3 H I T / tp) at eff_c x peak, whichever is longer, with the GPU's fitted
efficiencies (simulator/costs/prior_efficiency.py). Then the step: a decode of T rows
(1,000 tokens of context each) and a prefill of T tokens, priced by the prior with the
curve and with the roofline experts (``moe_kind = ""``). With ``--routing`` (and
AIConfigurator's tables: the ``aiconfigurator`` extra, or ``--data``) a last column reads
the same table's rows of another routing (``balanced``, ``power_law_1.01``) at each count,
where collected: why the shipped curves use power law (calibrate/moe_curves.py). No timing:
the cost models' own figures, the same on any machine.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run as a script from anywhere

from simulator.costs.prior_efficiency import fitted_prior  # noqa: E402
from simulator.shapes import StepShape  # noqa: E402
from simulator.specs.dtypes import weight_dtype_bytes  # noqa: E402
from simulator.specs.hardware import HARDWARE  # noqa: E402
from simulator.specs.models import get_model  # noqa: E402

TOKENS = (1, 2, 4, 8, 16, 32, 64, 128, 256, 1024, 2048, 8192)


def roofline_layer_us(model_name: str, gpu: str, dtype: str, tp: int, tokens: int) -> float:
    """One layer's experts by the roofline the prior used before the curve, microseconds."""
    m, hw = get_model(model_name), HARDWARE[gpu]
    cost = fitted_prior(m, hw, tp, dtype, dtype, moe_kind="")
    per_expert = 3 * m.hidden_size * m.intermediate_size  # one expert's weights, one layer
    hit = m.num_experts * (1 - (1 - m.experts_per_token / m.num_experts) ** tokens)
    b_w = weight_dtype_bytes(dtype)
    reads = hit * per_expert * b_w / tp / (hw.bandwidth_gbps * 1e9 * cost.memory_efficiency)
    flops = 2 * m.experts_per_token * per_expert * tokens / tp
    compute = flops / (hw.peak_flops(dtype) * cost.compute_efficiency)
    return max(reads, compute) * 1e6


def other_routing(args: argparse.Namespace, kind: str) -> dict[int, float]:
    """Microseconds by token count of ``args.routing``'s rows in the table ``kind``'s curve
    was read from (calibrate/moe_curves.py's reading); empty without the tables."""
    from calibrate.aic_moe import routing_curve
    from calibrate.aiconfigurator import find_data_root
    from calibrate.moe_curves import curve_rows, gpu_systems
    root = args.data or find_data_root()
    if root is None:
        print("--routing needs AIConfigurator's tables: pip install -e '.[aiconfigurator]' "
              "or --data", file=sys.stderr)
        return {}
    system, version = gpu_systems(root, kind)[args.gpu]
    table = curve_rows(root, system, version, kind, args.dtype, args.model)
    if table is None:
        return {}
    rows = table[1]
    curve = routing_curve(rows[rows.moe_tp_size == args.tp], args.routing)
    return {} if curve is None else {int(t): float(v) * 1e3 for t, v in curve[0].items()}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    ap.add_argument("--model", default="qwen3-235b-a22b")
    ap.add_argument("--gpu", default="b200")
    ap.add_argument("--dtype", default="bf16")
    ap.add_argument("--tp", type=int, default=8)
    ap.add_argument("--kind", default="sglang", help="whose MoE table: trtllm, vllm, sglang")
    ap.add_argument("--routing", default=None, help="also print this routing's rows")
    ap.add_argument("--data", type=Path, default=None, help="aiconfigurator_core/systems")
    args = ap.parse_args(argv)
    m, hw = get_model(args.model), HARDWARE[args.gpu]
    curve_cost = fitted_prior(m, hw, args.tp, args.dtype, args.dtype, moe_kind=args.kind)
    roof_cost = fitted_prior(m, hw, args.tp, args.dtype, args.dtype, moe_kind="")
    curve = curve_cost.measured_moe
    if curve is None:
        print(f"no measured MoE curve for {args.model} on {args.tp} x {args.gpu} "
              f"{args.dtype} ({args.kind} or trtllm)")
        return 1
    other = other_routing(args, curve.kind) if args.routing else {}
    print(f"{args.model} on {args.tp} x {args.gpu}, {args.dtype}: {curve.describe()}")
    print(f"{'tokens':>7} {'curve us':>9} {'roofline us':>12} {'ratio':>6} "
          f"{'decode ms':>18} {'prefill ms':>18}"
          + (f" {args.routing + ' us':>18}" if args.routing else ""))
    for t in TOKENS:
        measured = float(curve.time_s(float(t))) * 1e6
        roof = roofline_layer_us(args.model, args.gpu, args.dtype, args.tp, t)
        decode = StepShape(num_decode_seqs=t, decode_context_tokens=t * 1000)
        prefill = StepShape(num_prefill_tokens=t, prefill_attn_work=t * t // 2,
                            num_admitted=1)
        d = f"{roof_cost.step_time(decode) * 1e3:.2f} -> {curve_cost.step_time(decode) * 1e3:.2f}"
        p = (f"{roof_cost.step_time(prefill) * 1e3:.2f} -> "
             f"{curve_cost.step_time(prefill) * 1e3:.2f}")
        extra = (f" {other[t]:>18.1f}" if t in other else f" {'-':>18}") if args.routing else ""
        print(f"{t:>7} {measured:>9.1f} {roof:>12.1f} {measured / roof:>6.2f} {d:>18} {p:>18}"
              + extra)
    return 0


if __name__ == "__main__":
    sys.exit(main())
