"""How the fitted profiles price a small mixed step (a short prompt joining a few decodes).

    python benchmarks/mixed_step_fit.py [--threshold 1.3] [--data AIC_SYSTEMS_DIR]

1. Every shipped profile with the piecewise form (simulator/profiles, its stacks/ too):
   how many have ``mixed_step_s`` above ``threshold`` x max(``prefill_step_s``,
   ``decode_step_s``), and the highest ratios. Until stop 43 the composition sweep's mixed
   steps were all 512- or 2,048-token chunks and its prompts all sat on the GEMM tables'
   aligned sizes, so a small mixed step was priced with a fixed cost that held the large
   ones' unaligned kernels: 130 of 462 profiles were over 1.3 x (docs/gpu-profiles.md,
   "Small mixed steps").
2. The example: Llama-3.1-70B, fp8 weights with a bf16 KV cache (vLLM's default), on two
   H100 SXM under ``vllm-v1 0.8`` (vLLM's kernel
   tables, the preset's host step cost set to 0, so kernel time only): a 16-token chunk
   with 8 decode rows at 2,048 tokens, and the decode and prefill steps alone.
3. With ``--data`` (aiconfigurator-core 0.12.0's ``systems`` folder, the ``aiconfigurator``
   extra): the same steps as composed from the tables before the fit, and prefill steps of
   512 and 520 tokens (where the fp8 GEMM table jumps).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from calibrate.aiconfigurator import step_shape  # noqa: E402
from simulator.deployment import resolve  # noqa: E402

PROFILES = ROOT / "simulator" / "profiles"
EXAMPLE = {"model": {"name": "llama-3.1-70b", "weight_dtype": "fp8"},
           "hardware": {"gpu": "h100-sxm", "tp": 2},
           "stack": {"name": "vllm-v1", "version": "0.8"},
           "cost": {"overhead": {"step_s": 0.0}}}
CONTEXT = 2048  # the decode rows' context, as the sweep's mixed rows
# (name, prefill chunk tokens, decode rows)
STEPS = (("16-token chunk + 8 decode rows", 16, 8), ("8 decode rows", 0, 8),
         ("16-token prefill", 16, 0), ("512-token prefill", 512, 0),
         ("520-token prefill", 520, 0))


def ratios(threshold: float, folder: Path = PROFILES) -> tuple[int, list[tuple[float, str]]]:
    """(piecewise profiles read under ``folder``, [(mixed / max(prefill, decode) fixed
    cost, file)] over ``threshold``), highest first."""
    seen, over = 0, []
    for path in sorted(folder.rglob("*.json")):
        coefficients = json.loads(path.read_text()).get("coefficients")
        if not isinstance(coefficients, dict) or "mixed_step_s" not in coefficients:
            continue
        base = max(coefficients["prefill_step_s"], coefficients["decode_step_s"])
        if base <= 0:
            continue
        seen += 1
        ratio = coefficients["mixed_step_s"] / base
        if ratio > threshold:
            over.append((ratio, str(path.relative_to(folder))))
    return seen, sorted(over, reverse=True)


def fitted_ms() -> dict[str, float]:
    """The example's steps as the shipped fitted profile prices them (kernel time), ms."""
    cost = resolve(EXAMPLE).cost
    return {name: 1e3 * cost.step_time(step_shape(*_step(p, d))) for name, p, d in STEPS}


def composed_ms(data: Path) -> dict[str, float]:
    """The example's steps as composed from AIConfigurator's vLLM tables, ms."""
    from benchmarks.served_steps_check import composer

    # fp8 weights, bf16 KV: vLLM's default
    composed = composer(data, "vllm", "h100-sxm", "llama-3.1-70b", "fp8", "bf16", 2)
    return {name: 1e3 * composed.step_time(*_step(p, d)) for name, p, d in STEPS}


def _step(prefill: int, rows: int) -> tuple[list[tuple[int, int]], list[int]]:
    """(chunks, decode contexts) of a prompt of ``prefill`` tokens with ``rows`` decodes."""
    return ([(prefill, 0)] if prefill else []), [CONTEXT] * rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--threshold", type=float, default=1.3)
    ap.add_argument("--data", type=Path, default=None,
                    help="aiconfigurator_core/systems folder: also print the composed steps")
    args = ap.parse_args(argv)
    seen, over = ratios(args.threshold)
    print(f"{len(over)} of {seen} piecewise profiles have mixed_step_s > "
          f"{args.threshold:g} x max(prefill_step_s, decode_step_s); highest:")
    for ratio, name in over[:10]:
        print(f"  {ratio:5.2f}  {name}")
    fitted = fitted_ms()
    composed = composed_ms(args.data) if args.data else {}
    print("Llama-3.1-70B fp8, 2 x H100 SXM, vLLM tables, kernel time (ms): fitted"
          + (" / composed" if composed else ""))
    for name, _, _ in STEPS:
        extra = f" / {composed[name]:6.1f}" if composed else ""
        print(f"  {name:32s} {fitted[name]:6.1f}{extra}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
