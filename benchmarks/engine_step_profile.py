"""Where the engine's serving steps spend their time, policy by policy, under torch.profiler.

    python benchmarks/engine_step_profile.py [--model llama-3.1-8b] [--device cuda]
        [--requests 24] [--rate 2] [--out DIR]

Written for the next lent GPU. On the first one (docs/gpu-profiles.md, "The first lent
GPU: an H200") continuous batching's decode steps took 67-116 ms where the same engine's
profiled steps, and static batching's served ones, took 25-45 ms. This serves one small
Poisson workload (uniform 64-1,024-token prompts, 16-128 outputs) under ``static`` (batch
8) and under ``continuous`` (up to 32 running), each inside ``torch.profiler`` (CPU, and
CUDA when there is one), and prints per policy:

- the served steps' median duration and the part spent outside the forward passes;
- the slot cache's bookkeeping per step: time in ``SlotCache.remove_row``, ``reserve``
  and ``prepare`` (wrapped and timed with the wall clock, synchronising on CUDA);
- the profiler's top operators by self CPU time and by device time.

Writes the two profiler tables to ``--out`` (one text file each). Asserts nothing.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from simulator.policies import make_policy  # noqa: E402


def workload(requests: int, rate: float, seed: int = 11) -> pd.DataFrame:
    """Poisson arrivals at ``rate``, prompts uniform in 64-1,024, outputs in 16-128."""
    rng = np.random.default_rng(seed)
    return pd.DataFrame({
        "request_id": np.arange(requests),
        "arrival_s": np.cumsum(rng.exponential(1.0 / rate, requests)),
        "prompt_tokens": rng.integers(64, 1025, requests),
        "output_tokens": rng.integers(16, 129, requests),
    })


def timed(cls: type, names: tuple[str, ...], sync: Callable[[], None],
          spent: dict[str, list[float]]) -> dict[str, Any]:
    """Wrap ``cls``'s methods ``names`` so each call's wall time lands in ``spent``; the
    originals, to put back."""
    originals = {n: getattr(cls, n) for n in names}
    for name, fn in originals.items():
        def wrapper(self: Any, *a: Any, _fn: Any = fn, _name: str = name, **kw: Any) -> Any:
            sync()
            t0 = time.perf_counter()
            out = _fn(self, *a, **kw)
            sync()
            spent[_name].append(time.perf_counter() - t0)
            return out
        setattr(cls, name, wrapper)
    return originals


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", default="llama-3.1-8b")
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--requests", type=int, default=24)
    ap.add_argument("--rate", type=float, default=2.0)
    ap.add_argument("--out", type=Path, default=Path("."))
    args = ap.parse_args()

    import torch
    from torch.profiler import ProfilerActivity, profile

    from engine.models import build_model
    from engine.serving import replay
    from engine.slot_cache import SlotCache

    cuda = args.device.startswith("cuda")
    if cuda and not torch.cuda.is_available():
        sys.exit("engine_step_profile: no CUDA GPU here (use --device cpu)")
    em = build_model(args.model, dtype="bf16" if cuda else "fp32", device=args.device)
    sync = torch.cuda.synchronize if cuda else (lambda: None)
    table = workload(args.requests, args.rate)
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
    replay(table.head(2), em, make_policy("continuous", max_num_seqs=32), kv_blocks=100_000)
    args.out.mkdir(parents=True, exist_ok=True)
    for name, policy in (("static", make_policy("static", batch_size=8)),
                         ("continuous", make_policy("continuous", max_num_seqs=32))):
        spent: dict[str, list[float]] = defaultdict(list)
        originals = timed(SlotCache, ("remove_row", "reserve", "prepare"), sync, spent)
        try:
            with profile(activities=activities) as prof:
                run = replay(table, em, policy, kv_blocks=100_000)
        finally:
            for attr, fn in originals.items():
                setattr(SlotCache, attr, fn)
        steps = run.result.steps
        durations = (steps["end_s"] - steps["start_s"]).to_numpy()
        outside = durations - np.asarray(run.forward_s)
        decode = steps["num_prefill_tokens"].to_numpy() == 0
        print(f"== {name}: {len(steps)} steps, median {np.median(durations) * 1e3:.1f} ms "
              f"(decode-only {np.median(durations[decode]) * 1e3:.1f} ms), outside the "
              f"forwards {np.median(outside) * 1e3:.2f} ms")
        for attr, times in sorted(spent.items()):
            print(f"   SlotCache.{attr}: {len(times)} calls, {sum(times) * 1e3:.1f} ms in all, "
                  f"{sum(times) / len(steps) * 1e3:.3f} ms a step, median "
                  f"{statistics.median(times) * 1e3:.3f} ms")
        averages = prof.key_averages()
        cpu = averages.table(sort_by="self_cpu_time_total", row_limit=15)
        (args.out / f"profile_{name}_cpu.txt").write_text(cpu)
        print(cpu)
        if cuda:
            dev = averages.table(sort_by="self_cuda_time_total", row_limit=15)
            (args.out / f"profile_{name}_cuda.txt").write_text(dev)
            print(dev)
    return 0


if __name__ == "__main__":
    sys.exit(main())
