"""Per-stack kernel tables side by side: the same steps composed from each backend's tables.

    python -m calibrate.aic_compare [--data DIR]      # Markdown tables for docs/gpu-profiles.md

Prints (1) a few reference steps (decode at batch 1, 32 and 128 with 1,024 tokens of context;
prefill of 1 and 4 prompts of 1,024 tokens) composed from the TensorRT-LLM, vLLM and SGLang
tables of AIConfigurator 0.12.0 per GPU and deployment, and (2) how well each shipped
profile's fit follows its composition, read from the profiles' ``fit`` records (no tables
needed for that part). Needs the ``aiconfigurator`` extra for part (1).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from calibrate.aic_backends import BACKENDS, ENGINE_NAMES, profiles_dir, systems
from calibrate.aic_tables import SystemTables
from calibrate.aiconfigurator import EXTRA_HINT, Composer, deployments, find_data_root
from simulator.costs.profile import load_profile, profile_file_name
from simulator.specs.models import MODELS

CONTEXT = 1024  # tokens attended by each decode row, and the prompt length of prefills
DECODE_BATCHES = (1, 32, 128)
PREFILL_PROMPTS = (1, 4)
COMPARED = [("llama-3.1-8b", "bf16", 1), ("llama-3.1-8b", "fp8", 1),
            ("llama-3.1-70b", "bf16", 4), ("llama-3.1-70b", "fp8", 4)]


def reference_steps_ms(composer: Composer) -> list[float]:
    """Composed ms of the reference steps, in the column order of :func:`step_table`."""
    decode = [composer.step_time([], [CONTEXT] * b) for b in DECODE_BATCHES]
    prefill = [composer.step_time([(CONTEXT, 0)] * n) for n in PREFILL_PROMPTS]
    return [1e3 * s for s in decode + prefill]


def step_table(root: Path) -> str:
    """Markdown: reference steps per (GPU, deployment) and backend, ms."""
    cols = [f"decode b{b}" for b in DECODE_BATCHES] + [f"prefill {n}x1k" for n in PREFILL_PROMPTS]
    lines = ["| GPU | deployment | stack (tables) | " + " | ".join(cols) + " |",
             "|---|---|---|" + "---|" * len(cols)]
    deployed = set(deployments())
    for hw in systems("trtllm"):
        loaded = {b: SystemTables(root, *systems(b)[hw], b) for b in BACKENDS}
        for model, dtype, tp in COMPARED:
            if (hw, model, dtype, tp) not in deployed:
                continue
            base: list[float] = []
            for backend in BACKENDS:
                ms = reference_steps_ms(Composer(loaded[backend], MODELS[model], dtype, tp))
                base = base or ms
                cells = [f"{v:.2f}" if backend == "trtllm" else f"{v:.2f} ({v / b - 1:+.0%})"
                         for v, b in zip(ms, base, strict=True)]
                stack = f"{ENGINE_NAMES[backend]} {loaded[backend].data_version}"
                lines.append(f"| {hw} | {model} {dtype} tp{tp} | {stack} | "
                             + " | ".join(cells) + " |")
    return "\n".join(lines)


def fit_table() -> str:
    """Markdown: held-out fit quality of every shipped profile, per backend."""
    lines = ["| profile | stack | points | held-out MAPE | held-out max APE | prefill | decode "
             "| mixed |", "|---|---|---|---|---|---|---|---|"]
    for hw, model, dtype, tp in deployments():
        name = profile_file_name(hw, model, dtype, tp)
        for backend in BACKENDS:
            path = profiles_dir(backend) / name
            if not path.is_file():
                continue
            fit = load_profile(path).fit
            phase = [f"{fit['by_phase'][p]['mape']:.2%}" if p in fit["by_phase"] else "-"
                     for p in ("prefill", "decode", "mixed")]
            lines.append(f"| {name.removesuffix('.json')} | {backend} | {fit['n_points']} | "
                         f"{fit['mape']:.2%} | {fit['max_ape']:.1%} | " + " | ".join(phase)
                         + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=None,
                        help="aiconfigurator_core/systems folder (default: the installed one)")
    args = parser.parse_args(argv)
    root = args.data or find_data_root()
    if root is None:
        print(f"calibrate.aic_compare: error: tables not found; {EXTRA_HINT}", file=sys.stderr)
        return 2
    print(step_table(root), end="\n\n")
    print(fit_table())
    return 0


if __name__ == "__main__":
    sys.exit(main())
