"""Step times on a GPU priced from its sibling's tables, beside the sibling's own.

    python benchmarks/sibling_steps.py

For each sibling pair (simulator/specs/hardware.py SIBLINGS) and a model that the sibling
has measured tables for, prints a batch-1 and a 64-row decode step (500 tokens of context a
row) and an 8,192-token prefill, in ms, on both GPUs and their ratio
(simulator/costs/sibling.py: measured sibling x the prior's ratio). Kernel time only: the
stack presets' host costs are not included. Simulator outputs, the same on any machine.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run as a script from anywhere

from simulator.costs.from_config import cost_model_from_config  # noqa: E402
from simulator.shapes import StepShape  # noqa: E402
from simulator.specs.hardware import get_hardware  # noqa: E402
from simulator.specs.models import get_model  # noqa: E402

SHAPES = {
    "decode 1 row": StepShape(num_decode_seqs=1, decode_context_tokens=500),
    "decode 64 rows": StepShape(num_decode_seqs=64, decode_context_tokens=64 * 500),
    "prefill 8192": StepShape(num_prefill_tokens=8192, prefill_attn_work=8192 * 4096.0),
}
# (GPU, its sibling, model, tp, serving stack's tables or None for the generic ones)
PAIRS = (("a100-40gb", "a100-80gb", "llama-3.1-70b", 8, "vllm"),
         ("a100-40gb", "a100-80gb", "llama-3.1-8b", 1, None),
         ("h100-pcie", "h100-sxm", "llama-3.1-8b", 1, None))


def main() -> int:
    print("| GPU (from) | model, TP, tables | step | sibling ms | GPU ms | ratio |")
    print("|---|---|---|---|---|---|")
    for gpu, twin, model, tp, stack in PAIRS:
        m = get_model(model)
        mine, _ = cost_model_from_config({}, m, get_hardware(gpu), tp, "bf16", "bf16",
                                         stack=stack)
        theirs, _ = cost_model_from_config({}, m, get_hardware(twin), tp, "bf16", "bf16",
                                           stack=stack)
        for name, shape in SHAPES.items():
            a, b = theirs.step_time(shape) * 1e3, mine.step_time(shape) * 1e3
            print(f"| {gpu} ({twin}) | {model}, {tp}, {stack or 'generic'} | {name} | "
                  f"{a:.2f} | {b:.2f} | {b / a:.3f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
