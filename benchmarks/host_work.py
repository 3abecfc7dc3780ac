"""The serving loop's host work and its speed against a profile, on one engine point.

    python benchmarks/host_work.py                              # validate-cpu, continuous, 6/s
    python benchmarks/host_work.py --set workload.rate=3.0 --profile P.json

Serves one scenario point on the real engine (``run --backend engine``'s code) and prints,
from its step log and per-step forward times:

1. host time per step (wall minus forward passes), median by step kind and by how many
   requests finished in the step before (a finish compacts the slot cache in the next
   step): what ``calibrate --here`` fits as ``overhead`` (docs/calibration.md);
2. served forward time / the profile's prediction for the same steps, median by position
   in a busy stretch (steps since the engine last idled > 1 ms): whether the engine runs
   faster when busy, or the machine drifted since the profile was measured;
3. full (generation 2) garbage collections during the run.

Figures, not assertions: quote them with the machine and load they were taken on.
"""

from __future__ import annotations

import argparse
import gc
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from calibrate.host_costs import step_counts  # noqa: E402
from simulator.costs.from_config import profile_path_for  # noqa: E402
from simulator.costs.profile import load_profile  # noqa: E402
from simulator.deployment import resolve  # noqa: E402
from simulator.scenario import apply_overrides, expand_sweep, load_scenario  # noqa: E402
from simulator.shapes import StepShapes  # noqa: E402

STRETCH_BINS = [-1, 0, 2, 10, 50, 10**9]
STRETCH_LABELS = ["first", "1-2", "3-10", "11-50", ">50"]


def busy_position(steps: pd.DataFrame, idle_s: float = 1e-3) -> np.ndarray:
    """Per step: how many steps ran back to back before it (0 after an idle gap)."""
    gap = np.r_[np.inf, steps["start_s"].to_numpy()[1:] - steps["end_s"].to_numpy()[:-1]]
    pos = np.zeros(len(steps), np.int64)
    for i in range(1, len(steps)):
        pos[i] = 0 if gap[i] > idle_s else pos[i - 1] + 1
    return pos


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--scenario", default=str(ROOT / "scenarios" / "validate-cpu.toml"))
    ap.add_argument("--set", dest="overrides", action="append",
                    default=["policy.name='continuous'", "workload.rate=6.0"])
    ap.add_argument("--profile", default=None,
                    help="cost profile to compare with (default: the point's own)")
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args()

    from engine.backend import run_point_engine

    [(labels, point)] = expand_sweep(apply_overrides(load_scenario(args.scenario),
                                                     args.overrides))
    dep = resolve(point)
    path = args.profile or profile_path_for(point.get("cost", {}), dep.model, dep.hardware,
                                            dep.tp, dep.weight_dtype, dep.kv_dtype)
    if path is None:
        raise SystemExit("the point has no profile file; give --profile")
    kernel = replace(load_profile(path), overhead={}).build(dep.model, dep.hardware)
    gen2 = gc.get_stats()[2]["collections"]
    _, run = run_point_engine(labels, point, threads=args.threads)
    gen2 = gc.get_stats()[2]["collections"] - gen2
    steps, requests = run.result.steps, run.result.requests
    counts = step_counts(steps, requests)
    host_ms = ((steps["end_s"] - steps["start_s"]).to_numpy() - run.forward_s) * 1e3
    kind = np.where(steps["num_prefill_tokens"] > 0, "prefill", "decode")
    table = pd.DataFrame({"kind": kind, "finished_before": counts["finished_before"],
                          "host_ms": host_ms})
    print(f"{dep.policy_name} {labels}: {len(steps)} steps, profile {path}")
    print("host time per step (wall - forward), ms:")
    print(table.groupby(["kind", "finished_before"]).host_ms.agg(["size", "median"])
          .round(3).to_string())
    shapes = StepShapes.from_table(steps.assign(num_admitted=counts["admitted"].to_numpy()))
    ratio = run.forward_s / kernel.step_times(shapes)
    where = pd.cut(busy_position(steps), STRETCH_BINS, labels=STRETCH_LABELS)
    print("served forward / profile, by steps since the last idle gap:")
    print(pd.Series(ratio).groupby(where, observed=True).agg(["size", "median"])
          .round(3).to_string())
    print(f"all steps: {run.forward_s.sum() / kernel.step_times(shapes).sum():.3f}; "
          f"full garbage collections during the run: {gen2}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
