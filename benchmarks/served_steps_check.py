"""How the shipped composed profiles price the steps a server runs, against the composition.

    python benchmarks/served_steps_check.py --data AIC_SYSTEMS_DIR [--steps 40] [--seed 0]

A composed profile is fitted to a sweep of steps on a grid (calibrate/aiconfigurator.py
``sweep``); a server runs other shapes. This draws random served steps of five kinds, prices
each with the shipped profile (kernel time: its fitted form and decode-row factors, no host
cost) and with the composition from AIConfigurator's tables it was fitted to, and prints the
mean |error| and the median signed error per kind and deployment:

- ``prompt``: one prompt of 20-4,000 tokens;
- ``prompts``: 2-8 prompts of 50-1,000 tokens;
- ``decode``: 8-256 rows (a multiple of 8, as CUDA-graph padding makes them), one context
  of 100-4,000 tokens;
- ``short+decode``: a 5-300-token prompt joining 1-64 decode rows (chunked prefill at
  light load);
- ``budget``: a 2,048-token step, 8-256 decode rows and the rest a chunk of a long prompt
  (0 or 2,048 tokens cached): chunked prefill at saturation.

The composition is the reference here: both sides are the same tables, so this measures the
fitted form and the sweep, not the tables (docs/gpu-profiles.md, "Small mixed steps").
Needs the ``aiconfigurator`` extra's tables.
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from calibrate.aic_backends import profiles_dir, systems  # noqa: E402
from calibrate.aic_dtype_pairs import PairComposer  # noqa: E402
from calibrate.aic_tables import SystemTables  # noqa: E402
from calibrate.aiconfigurator import Composer  # noqa: E402
from simulator.costs.profile import load_profile, profile_file_name  # noqa: E402
from simulator.shapes import StepShape  # noqa: E402
from simulator.specs.dtypes import dtype_label  # noqa: E402
from simulator.specs.models import MODELS  # noqa: E402

Step = tuple[list[tuple[int, int]], list[int]]  # (prefill chunks (tokens, cached), contexts)
# (backend, gpu, model, weight dtype, kv dtype, tp)
DEPLOYMENTS = (
    ("vllm", "h100-sxm", "llama-3.1-70b", "fp8", "bf16", 2),
    ("vllm", "h100-sxm", "llama-3.1-8b", "fp8", "bf16", 1),
    ("vllm", "h100-sxm", "llama-3.1-8b", "bf16", "bf16", 1),
    ("sglang", "h100-sxm", "llama-3.1-70b", "fp8", "fp8", 2),
    ("sglang", "h200", "llama-3.1-8b", "bf16", "bf16", 1),
    ("trtllm", "h100-sxm", "llama-3.1-8b", "fp8", "fp8", 1),
    ("trtllm", "h100-sxm", "llama-3.1-70b", "bf16", "bf16", 4),
)


def draws(n: int, seed: int) -> dict[str, list[Step]]:
    """``n`` random served steps of each kind (the module docstring's ranges)."""
    r = random.Random(seed)
    kinds: dict[str, Callable[[], Step]] = {
        "prompt": lambda: ([(r.randint(20, 4000), 0)], []),
        "prompts": lambda: ([(r.randint(50, 1000), 0) for _ in range(r.randint(2, 8))], []),
        "decode": lambda: ([], [r.randint(100, 4000)] * (8 * r.randint(1, 32))),
        "short+decode": lambda: ([(r.randint(5, 300), 0)], [r.randint(100, 4000)]
                                 * r.randint(1, 64)),
        "budget": lambda: (lambda d: ([(2048 - d, r.choice((0, 2048)))],
                                      [r.randint(100, 4000)] * d))(r.randint(8, 256)),
    }
    return {kind: [make() for _ in range(n)] for kind, make in kinds.items()}


def shape(step: Step) -> StepShape:
    """The simulator's shape of a step (the sweep's own accounting)."""
    chunks, contexts = step
    return StepShape(num_prefill_tokens=sum(n for n, _ in chunks),
                     prefill_attn_work=float(sum(n * (c + n / 2) for n, c in chunks)),
                     num_decode_seqs=len(contexts), decode_context_tokens=sum(contexts))


def errors(data: Path, deployment: tuple[str, str, str, str, str, int],
           steps: dict[str, list[Step]]) -> dict[str, list[float]]:
    """Per kind, priced / composed - 1 over the steps whose KV cache fits."""
    backend, gpu, model, dtype, kv, tp = deployment
    system, version = systems(backend)[gpu]
    tables = SystemTables(data, system, version, backend)
    composer = (Composer(tables, MODELS[model], dtype, tp) if kv == dtype
                else PairComposer(tables, MODELS[model], dtype, tp, kv_dtype=kv))
    name = profile_file_name(gpu, model, dtype_label(dtype, kv), tp)
    cost = load_profile(profiles_dir(backend) / name).build_fitted()
    out: dict[str, list[float]] = {}
    for kind, batch in steps.items():
        out[kind] = []
        for step in batch:
            chunks, contexts = step
            tokens = sum(n + c for n, c in chunks) + sum(contexts)
            if composer.kv_fits(tokens):
                out[kind].append(cost.step_time(shape(step)) / composer.step_time(*step) - 1)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", type=Path, required=True,
                    help="aiconfigurator_core/systems folder (aiconfigurator-core 0.12.0)")
    ap.add_argument("--steps", type=int, default=40, help="random steps of each kind")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    steps = draws(args.steps, args.seed)
    print("mean |error| / median signed error of the shipped profile against the composition")
    print(f"{'deployment':44s} " + " ".join(f"{k:>15s}" for k in steps))
    for deployment in DEPLOYMENTS:
        backend, gpu, model, dtype, kv, tp = deployment
        errs = errors(args.data, deployment, steps)
        label = f"{backend} {gpu} {model} {dtype_label(dtype, kv)} tp{tp}"
        print(f"{label:44s} " + " ".join(
            f"{statistics.fmean(abs(e) for e in v):6.1%}/{statistics.median(v):+6.1%}"
            if v else f"{'-':>15s}" for v in errs.values()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
