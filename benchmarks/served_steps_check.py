"""How the shipped composed profiles price the steps a server runs, against the composition.

    python benchmarks/served_steps_check.py --data AIC_SYSTEMS_DIR [--steps 40] [--seed 0]
                                            [--rev COMMIT]

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
``--rev`` prices with the profile files a commit shipped (``git show``; the docs' "before"
is ``--rev 759fd22``). Needs the ``aiconfigurator`` extra's tables.
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

from benchmarks.profile_fit_quality import profile_at  # noqa: E402
from calibrate.aic_backends import profiles_dir, systems  # noqa: E402
from calibrate.aic_dtype_pairs import PairComposer  # noqa: E402
from calibrate.aic_tables import SystemTables  # noqa: E402
from calibrate.aiconfigurator import Composer, step_shape  # noqa: E402
from simulator.costs.profile import CostProfile, load_profile, profile_file_name  # noqa: E402
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


def composer(data: Path, backend: str, gpu: str, model: str, dtype: str, kv: str,
             tp: int) -> Composer:
    """The composition of one deployment from ``backend``'s tables under ``data`` (a
    :class:`PairComposer` where the KV cache's dtype is not the weights')."""
    system, version = systems(backend)[gpu]
    tables = SystemTables(data, system, version, backend)
    if kv == dtype:
        return Composer(tables, MODELS[model], dtype, tp)
    return PairComposer(tables, MODELS[model], dtype, tp, kv_dtype=kv)


def errors(data: Path, deployment: tuple[str, str, str, str, str, int],
           steps: dict[str, list[Step]], rev: str | None = None) -> dict[str, list[float]]:
    """Per kind, priced / composed - 1 over the steps whose KV cache fits; the profile as
    the tree has it, or as ``rev`` shipped it."""
    backend, gpu, model, dtype, kv, tp = deployment
    composed = composer(data, *deployment)
    folder = profiles_dir(backend)
    name = profile_file_name(gpu, model, dtype_label(dtype, kv), tp)
    profile = (load_profile(folder / name) if rev is None else CostProfile(**profile_at(
        str((folder / name).relative_to(profiles_dir("trtllm"))), rev)))
    cost = profile.build_fitted()
    out: dict[str, list[float]] = {}
    for kind, batch in steps.items():
        out[kind] = []
        for chunks, contexts in batch:
            tokens = sum(n + c for n, c in chunks) + sum(contexts)
            if composed.kv_fits(tokens):
                out[kind].append(cost.step_time(step_shape(chunks, contexts))
                                 / composed.step_time(chunks, contexts) - 1)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", type=Path, required=True,
                    help="aiconfigurator_core/systems folder (aiconfigurator-core 0.12.0)")
    ap.add_argument("--steps", type=int, default=40, help="random steps of each kind")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--rev", default=None, help="price with the profiles of this commit")
    args = ap.parse_args(argv)
    steps = draws(args.steps, args.seed)
    print("mean |error| / median signed error of the shipped profile against the composition")
    print(f"{'deployment':44s} " + " ".join(f"{k:>15s}" for k in steps))
    for deployment in DEPLOYMENTS:
        backend, gpu, model, dtype, kv, tp = deployment
        errs = errors(args.data, deployment, steps, args.rev)
        label = f"{backend} {gpu} {model} {dtype_label(dtype, kv)} tp{tp}"
        print(f"{label:44s} " + " ".join(
            f"{statistics.fmean(abs(e) for e in v):6.1%}/{statistics.median(v):+6.1%}"
            if v else f"{'-':>15s}" for v in errs.values()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
