"""The roofline prior against a composed profile around the ridge: one prompt's prefill step.

    python benchmarks/prior_ridge_check.py [--model llama-3.1-8b] [--tp 1] [--dtype bf16]

For each GPU with a shipped composed profile of the deployment (measured operator tables,
simulator/profiles/), it prints the profile's and the fitted prior's time for a prefill of
T tokens from an empty cache, and their ratio, T from 64 to 4,096. The prior prices a step
as the larger of its compute and its weight reads (simulator/costs/roofline.py), so near
the ridge, where the two are equal, it reads both as free but one; measured kernels pay
part of each there. Its efficiencies were fitted on prefills of 256-8,192 tokens
(calibrate/prior_efficiency.py), which this shows around and below. Cost models only: the
same figures on any machine.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run as a script from anywhere

from simulator.costs.prior_efficiency import fitted_prior  # noqa: E402
from simulator.costs.profile import load_profile  # noqa: E402
from simulator.shapes import StepShape  # noqa: E402
from simulator.specs.hardware import HARDWARE  # noqa: E402
from simulator.specs.models import get_model  # noqa: E402

PROFILES = Path(__file__).resolve().parents[1] / "simulator" / "profiles"
TOKENS = (64, 128, 192, 256, 320, 384, 512, 768, 1024, 2048, 4096)


def rows(model_name: str, tp: int, dtype: str) -> list[tuple[str, int, float, float]]:
    """(GPU, T, profile ms, prior ms) for every GPU with a composed profile of the
    deployment (a roofline prior file is not one)."""
    model = get_model(model_name)
    out = []
    for gpu, hw in HARDWARE.items():
        path = PROFILES / f"{gpu}__{model_name}__{dtype}__tp{tp}.json"
        if not path.is_file():
            continue
        profile = load_profile(path)
        if profile.form == "roofline":
            continue
        measured = profile.build(model, hw)
        prior = fitted_prior(model, hw, tp, dtype, profile.kv_dtype)
        for t in TOKENS:
            shape = StepShape(t, t * t / 2.0, 0, 0)
            out.append((gpu, t, measured.step_time(shape) * 1e3, prior.step_time(shape) * 1e3))
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default="llama-3.1-8b")
    ap.add_argument("--tp", type=int, default=1)
    ap.add_argument("--dtype", default="bf16")
    args = ap.parse_args(argv)
    found = rows(args.model, args.tp, args.dtype)
    if not found:
        print(f"no composed profile of {args.model} {args.dtype} tp{args.tp} ships")
        return 1
    print(f"{args.model} {args.dtype} tp{args.tp}: one prompt's prefill, ms "
          "(composed profile / fitted prior, prior / profile)")
    print(f"| GPU | {' | '.join(str(t) for t in TOKENS)} |")
    print(f"|---|{'---|' * len(TOKENS)}")
    for gpu in dict.fromkeys(g for g, *_ in found):
        cells = [f"{m:.1f} / {p:.1f} ({p / m:.2f})" for g, _, m, p in found if g == gpu]
        print(f"| {gpu} | {' | '.join(cells)} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
