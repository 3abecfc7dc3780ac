"""Decode step times of narrow weights multiplied in bf16 (simulator/costs/weight_only.py).

Prints, for one model on one GPU under one stack, the decode step (host costs included)
at several batch sizes with bf16 weights (the measured profile) and with fp8 and int4
weights repriced from it, and the ratio to bf16. These are simulator outputs: the same on
any machine.

    python benchmarks/weight_only_steps.py [--model llama-3.1-8b] [--gpu a100-80gb]
                                           [--stack vllm-v0] [--context 1000]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from simulator.deployment import resolve  # noqa: E402
from simulator.shapes import StepShape  # noqa: E402

ROWS = (1, 8, 32, 64, 128, 256)
DTYPES = ("bf16", "fp8", "int4")


def step_ms(model: str, gpu: str, stack: str, dtype: str, rows: int, context: int) -> float:
    """One decode step of ``rows`` rows, each attending ``context`` tokens, in ms."""
    dep = resolve({"model": {"name": model, "weight_dtype": dtype, "kv_dtype": "bf16"},
                   "hardware": {"gpu": gpu}, "stack": {"name": stack}})
    shape = StepShape(num_decode_seqs=rows, decode_context_tokens=rows * context)
    return dep.cost.step_time(shape) * 1e3


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", default="llama-3.1-8b")
    p.add_argument("--gpu", default="a100-80gb")
    p.add_argument("--stack", default="vllm-v0")
    p.add_argument("--context", type=int, default=1000, help="tokens each row attends")
    args = p.parse_args(argv)
    print(f"{args.model} on one {args.gpu} under {args.stack}, decode steps at "
          f"{args.context} tokens of context a row, ms (bf16 KV cache)")
    print("rows  " + "  ".join(f"{d:>8s}" for d in DTYPES) + "   fp8/bf16  int4/bf16")
    for rows in ROWS:
        ms = [step_ms(args.model, args.gpu, args.stack, d, rows, args.context) for d in DTYPES]
        print(f"{rows:4d}  " + "  ".join(f"{t:8.2f}" for t in ms)
              + f"   {ms[1] / ms[0]:8.3f}  {ms[2] / ms[0]:9.3f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
