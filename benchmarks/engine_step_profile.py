"""Where the engine's serving steps spend their time, policy by policy, under torch.profiler.

    python benchmarks/engine_step_profile.py [--scenario scenarios/validate-h200.toml]
        [--device cuda] [--requests 24] [--rate 2] [--out DIR]

Written for the next lent GPU. On the first one (docs/gpu-profiles.md, "The first lent
GPU: an H200") continuous batching's decode steps took 67-116 ms where the same engine's
profiled steps, and static batching's served ones, took 25-45 ms. This serves the
scenario's workload (``--requests`` of it at ``--rate``) under its ``static`` and its
``continuous`` policy on the engine backend (engine/backend.py ``run_point_engine``), each
inside ``torch.profiler`` (CPU, and CUDA when there is one), and prints per policy:

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

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from simulator.deployment import resolve  # noqa: E402
from simulator.scenario import apply_overrides, expand_sweep, load_scenario  # noqa: E402


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
    ap.add_argument("--scenario", default=str(ROOT / "scenarios" / "validate-h200.toml"))
    ap.add_argument("--set", dest="overrides", action="append", default=[],
                    help="scenario overrides, as servesim run --set")
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--requests", type=int, default=24)
    ap.add_argument("--rate", type=float, default=2.0)
    ap.add_argument("--out", type=Path, default=Path("."))
    args = ap.parse_args()

    import torch
    from torch.profiler import ProfilerActivity, profile

    from engine.backend import run_point_engine, warm_up
    from engine.models import build_model
    from engine.slot_cache import SlotCache

    cuda = args.device.startswith("cuda")
    if cuda and not torch.cuda.is_available():
        sys.exit("engine_step_profile: no CUDA GPU here (use --device cpu --set "
                 "\"hardware.gpu='cpu'\" --set \"model.weight_dtype='fp32'\")")
    raw = apply_overrides(load_scenario(args.scenario), [
        *args.overrides, f"workload.rate={args.rate}", f"workload.num_requests={args.requests}"])
    points = {name: expand_sweep(apply_overrides(raw, [f"policy.name='{name}'"]))[0][1]
              for name in ("static", "continuous")}
    dep = resolve(points["static"])
    em = build_model(dep.model, dtype=dep.weight_dtype, device=args.device, seed=dep.seed)
    warm_up(em, dep)
    sync = torch.cuda.synchronize if cuda else (lambda: None)
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
    args.out.mkdir(parents=True, exist_ok=True)
    for name, point in points.items():
        spent: dict[str, list[float]] = defaultdict(list)
        originals = timed(SlotCache, ("remove_row", "reserve", "prepare"), sync, spent)
        try:
            with profile(activities=activities) as prof:
                _, run = run_point_engine({}, point, em=em)
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
