"""``servesim run --backend engine``: a scenario point served by the real engine.

The point resolves exactly as for the simulator (same model, policy, KV blocks and
workload with the same seed); the engine then serves the workload in real time on this
machine and the results are written in the simulator's formats (contract 4 tables and the
contract 5 summary), so the two can be compared with ``servesim validate``.
"""

from __future__ import annotations

import os
import platform
from collections.abc import Callable
from typing import Any

import numpy as np
import pandas as pd
import torch
import transformers

from engine.models import TORCH_DTYPES, EngineModel, build_model
from engine.serving import EngineRun, replay
from engine.speed_probe import merge, probe
from engine.sweep import hardware_name, machine_fingerprint
from simulator.deployment import Deployment, resolve
from simulator.errors import ConfigError
from simulator.metrics import summarize
from simulator.policies import make_policy
from simulator.prefix_cache_run import prefix_summary
from simulator.runner import PointResult, point_result
from simulator.workload.build import build_requests

WARMUP_REQUESTS = pd.DataFrame({  # a few shapes through every code path before timing
    "request_id": [0, 1, 2], "arrival_s": [0.0, 0.0, 0.0],
    "prompt_tokens": [16, 48, 7], "output_tokens": [4, 3, 5],
})


def engine_device(dep: Deployment) -> torch.device:
    """The torch device for ``dep``'s hardware, or a ConfigError if this machine lacks it."""
    if dep.replicas != 1:
        raise ConfigError(f"cluster.replicas = {dep.replicas}: the engine backend serves one "
                          "replica; set cluster.replicas = 1")
    if dep.tp != 1:
        raise ConfigError(f"hardware.tp = {dep.tp}: the engine backend has no tensor "
                          "parallelism; set hardware.tp = 1")
    if dep.weight_dtype not in TORCH_DTYPES:
        raise ConfigError(f"model.weight_dtype = {dep.weight_dtype!r}: the engine runs "
                          f"{', '.join(TORCH_DTYPES)}")
    if dep.hardware.name == "cpu":
        return torch.device("cpu")
    if not torch.cuda.is_available():
        raise ConfigError(f"hardware.gpu = {dep.hardware.name!r}: this machine has no CUDA "
                          "GPU; the engine backend runs on the scenario's hardware (use "
                          "hardware.gpu = \"cpu\", or --backend sim)")
    device = torch.device("cuda")
    here = hardware_name(device)
    if here != dep.hardware.name:
        raise ConfigError(f"hardware.gpu = {dep.hardware.name!r}: this machine's GPU is "
                          f"{here!r}")
    return device


def warm_up(em: EngineModel, dep: Deployment) -> None:
    """Serve a few short requests untimed: first-call allocations stay out of the run."""
    replay(WARMUP_REQUESTS, em, make_policy("continuous"), kv_blocks=64,
           block_size=dep.block_size, seed=12345)


def run_point_engine(labels: dict[str, Any], point: dict[str, Any], *,
                     threads: int = 1, em: EngineModel | None = None,
                     progress: Callable[[int, int], None] | None = None
                     ) -> tuple[PointResult, EngineRun]:
    """Serve one scenario point on the engine; ``em`` reuses an already built model."""
    dep = resolve(point)
    device = engine_device(dep)
    if getattr(dep.policy, "num_speculative_tokens", 0):
        raise ConfigError("speculative.num_tokens > 0: the engine backend serves random "
                          "weights, whose drafts' acceptance means nothing; measure the real "
                          "engine's with benchmarks/speculative_engine.py (docs/speculative.md)")
    # On every device: the fingerprint records it, and `servesim profile` / `calibrate --here`
    # set the same count on CUDA too, so a GPU run and its profile compare as one machine.
    torch.set_num_threads(threads)
    if em is None or em.spec != dep.model or em.dtype != dep.weight_dtype:
        em = build_model(dep.model, dtype=dep.weight_dtype, device=device, seed=dep.seed)
        warm_up(em, dep)
    built = build_requests(dep.workload, np.random.default_rng(dep.seed),
                           dep.model.max_context_tokens, dep.cost.step_time)
    before = probe(em)  # the machine's speed now, on steps the profile knows
    run = replay(built.table, em, dep.policy, dep.kv_blocks, block_size=dep.block_size,
                 horizon_s=dep.horizon_s, seed=dep.seed, progress=progress,
                 max_concurrency=built.max_concurrency, segments=built.segments,
                 prefix_caching=dep.prefix_caching)
    speed_probe = merge(before, probe(em))
    res = run.result
    durations = (res.steps["end_s"] - res.steps["start_s"]).to_numpy()
    outside = durations - run.forward_s  # loop work outside the batch runner, per step
    summary = summarize(res.requests, res.steps, dep.slo, kv_blocks_total=dep.kv_blocks,
                        num_replicas=1)
    if res.prefix_stats is not None:  # prefix caching's keys, as the simulator's summary
        summary |= prefix_summary(res.prefix_stats)
    engine = {
        "device": str(device), "threads": torch.get_num_threads(),
        "torch": torch.__version__, "transformers": transformers.__version__,
        "python": platform.python_version(), "cpus": os.cpu_count(),
        "load_avg": os.getloadavg()[0] if hasattr(os, "getloadavg") else None,
        "steps": len(res.steps), "wall_s": res.wall_s,
        "median_step_ms": float(np.median(durations)) * 1e3 if len(durations) else None,
        "median_overhead_ms": float(np.median(outside)) * 1e3 if len(outside) else None,
        "speed_probe": speed_probe,  # engine/speed_probe.py; validate's drift correction
    }
    fingerprint = machine_fingerprint(device, torch.get_num_threads())
    # The KV cache holds the weights' dtype; a CPU has no GPUs to count.
    result = point_result(labels, point, dep, built, summary, res, backend="engine",
                          kv_dtype=dep.weight_dtype, num_gpus=0 if device.type == "cpu" else 1,
                          cost_profile="measured by the engine", engine=engine,
                          fingerprint=fingerprint)
    return result, run
