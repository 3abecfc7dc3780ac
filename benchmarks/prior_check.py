"""The roofline prior against the measured operator tables, shape by shape.

    python benchmarks/prior_check.py [--gpu a100-80gb --gpu h100-sxm ...]
    python benchmarks/prior_check.py --model llama-3.1-8b --prefill 64 --prefill 128 ...

Where servesim ships a profile composed from measured per-operator tables (AIConfigurator
0.12.0's TensorRT-LLM tables: calibrate/aiconfigurator.py and calibrate/aic_moe.py), this
prices the same steps with the roofline prior of the same model, GPU, TP and dtypes
(simulator/costs/roofline.py) and prints them: pure decodes of 1-512 rows and prefills of
512-8,192 tokens (``--prefill N``, repeatable, prices those prompt lengths instead: below
and around the ridge, where compute and weight reads meet; ``--model`` keeps one model's
profiles). Three forms of the prior are printed: one max over the whole step's
FLOPs and bytes at the default efficiencies (the form the prior had), per operator (the
matmuls' roofline plus attention's) at the defaults, and per operator at the efficiencies
fitted to the GPU's tables (simulator/costs/prior_efficiency.py: what the simulator builds;
in sample here, since they were fitted to these profiles). The last lines give the
median ratio prior / measured over the decode and the prefill shapes of every deployment.
No timing: the figures are the cost models' own, the same on any machine.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run as a script from anywhere

from calibrate.prior_efficiency import measured_by_gpu  # noqa: E402
from simulator.costs.prior_efficiency import fitted_prior  # noqa: E402
from simulator.costs.profile import profile_file_name  # noqa: E402
from simulator.costs.roofline import RooflineCost  # noqa: E402
from simulator.shapes import StepShape  # noqa: E402
from simulator.specs.dtypes import dtype_label  # noqa: E402
from simulator.specs.hardware import HARDWARE  # noqa: E402
from simulator.specs.models import get_model  # noqa: E402

DECODES = ((1, 1000), (16, 1000), (64, 1500), (256, 1500), (512, 2500))  # rows, context each
PREFILLS = (512, 2048, 8192)  # one prompt from an empty cache


def shapes(prefills: tuple[int, ...] = PREFILLS) -> list[tuple[str, StepShape]]:
    """(label, shape) of every step priced."""
    out = [(f"d{b}x{ctx}", StepShape(0, 0.0, b, b * ctx)) for b, ctx in DECODES]
    out += [(f"p{p}", StepShape(p, p * p / 2.0, 0, 0)) for p in prefills]
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--gpu", action="append", default=[], help="catalogue GPU (repeatable)")
    ap.add_argument("--model", action="append", default=[], help="catalogue model (repeatable)")
    ap.add_argument("--prefill", action="append", type=int, default=[],
                    help="prompt tokens of a prefill priced (repeatable; default "
                         f"{', '.join(map(str, PREFILLS))})")
    args = ap.parse_args(argv)
    steps = shapes(tuple(args.prefill) or PREFILLS)
    forms = ("one max", "per operator", "per operator, fitted")
    ratios: dict[str, list[float]] = {f"{kind}, {form}": [] for kind in ("decode", "prefill")
                                      for form in forms}
    print("step: measured ms / prior one max / per operator / per operator, fitted")
    profiles = [p for gpu, by_dtype in sorted(measured_by_gpu().items())
                if not args.gpu or gpu in args.gpu for group in by_dtype.values() for p in group
                if not args.model or p.model in args.model]
    for prof in profiles:
        model, hw = get_model(prof.model), HARDWARE[prof.hardware]
        measured = prof.build(model, hw)
        prior = RooflineCost(model, hw, tp=prof.tp, weight_dtype=prof.weight_dtype,
                             kv_dtype=prof.kv_dtype)
        fitted = fitted_prior(model, hw, prof.tp, prof.weight_dtype, prof.kv_dtype)
        cells = []
        for label, shape in steps:
            real = measured.step_time(shape)
            terms = prior.terms(shape)
            per_op = float(terms.total_s)
            one_max = float(terms.overhead_s + max(terms.compute_s, terms.memory_s)
                            + terms.allreduce_s)
            fit = fitted.step_time(shape)
            kind = "decode" if label.startswith("d") else "prefill"
            for form, value in zip(forms, (one_max, per_op, fit), strict=True):
                ratios[f"{kind}, {form}"].append(value / real)
            cells.append(f"{label} {real * 1e3:.1f}/{one_max * 1e3:.1f}/{per_op * 1e3:.1f}/"
                         f"{fit * 1e3:.1f}")
        name = profile_file_name(prof.hardware, prof.model, dtype_label(prof.weight_dtype,
                                                                        prof.kv_dtype), prof.tp)
        print(f"{name}:\n    " + "  ".join(cells))
    print("\nmedian prior / measured (1.00 = the prior matches the tables):")
    for name, values in ratios.items():
        if values:
            print(f"  {name:30s} {statistics.median(values):.3f}  "
                  f"(n {len(values)}, middle half {statistics.quantiles(values, n=4)[0]:.3f}-"
                  f"{statistics.quantiles(values, n=4)[2]:.3f})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
