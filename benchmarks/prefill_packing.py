"""Packed vs left-padded prefill on the engine: why prefill chunks run packed.

    python benchmarks/prefill_packing.py

Times one prefill step of several prompts both ways through the engine's BatchRunner
(tiny model, one CPU thread, median of 10 after 2 warm-ups) and prints the medians and
their ratio. Equal lengths cost the same; mixed lengths cost ``rows x longest`` padded.
"""

from __future__ import annotations

import statistics
import sys
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch  # noqa: E402

from engine.models import build_model  # noqa: E402
from engine.slot_cache import SlotCache  # noqa: E402
from engine.step_runner import BatchRunner, RowWork  # noqa: E402


def median_ms(step: Callable[[], object], repeats: int = 10, warmup: int = 2) -> float:
    times = []
    for i in range(warmup + repeats):
        t0 = time.perf_counter()
        step()
        if i >= warmup:
            times.append(time.perf_counter() - t0)
    return statistics.median(times) * 1e3


def main() -> int:
    torch.set_num_threads(1)
    em = build_model("tiny")
    spec = em.spec
    print("prompt lengths          padded ms  packed ms  padded/packed")
    for lens in [(256, 256, 256, 256), (40, 200, 100, 230), (512,), (8,) * 8, (16, 500)]:
        cache = SlotCache(spec.num_layers, spec.num_kv_heads, spec.head_dim, slots=len(lens),
                          capacity=max(lens) + 1)
        runner = BatchRunner(em, cache)
        tokens = [[1] * n for n in lens]
        rows = [RowWork(i, 0, n) for i, n in enumerate(lens)]
        padded = median_ms(partial(runner.run, 0, len(lens), rows, tokens))
        packed = median_ms(partial(runner.run_packed, rows, tokens))
        print(f"{str(lens):<22} {padded:>10.1f} {packed:>10.1f} {padded / packed:>14.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
