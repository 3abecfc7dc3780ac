"""A profiling sweep: prefill, decode and mixed shapes -> profile-table rows (contract 2).

Each shape is timed as the serving loop runs it (engine/step_timing.py) and maps to P, A,
D, C as the cost model counts them (design.md, "Cost models"):

    prefill (batch b, prompt p):  P = b*p (padding included), A = b*p*(p/2), D = C = 0
    decode (batch b, context c):  P = A = 0, D = b, C = b*(c+1) (cached tokens + the new one)
    mixed (b rows at context c, one chunk n):  P = n, A = n*(n/2), D = b, C = b*(c+1)

``num_admitted`` is the prefill rows (each is a request entering the batch, with its own
attention segment); ``num_finished`` stays 0: no request's last token is timed here.
"""

from __future__ import annotations

import os
import platform
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from importlib.metadata import PackageNotFoundError, version
from typing import Any

import torch
import transformers

from engine.models import EngineModel
from engine.plan import SweepPlan
from engine.profiler import Timing, time_interleaved, time_step
from engine.step_timing import step_for_shape
from simulator.fingerprint import gpu_fields, this_machine


def shape_row(phase: str, batch: int, length: int, timing: Timing,
              context: int = 0) -> dict[str, Any]:
    """One profile-table row for a measured shape (see the module docstring for P/A/D/C)."""
    prefill_rows = batch if phase == "prefill" else (1 if phase == "mixed" else 0)
    decode_rows = 0 if phase == "prefill" else batch
    decode_ctx = length if phase == "decode" else context
    return {
        "phase": phase,
        "num_prefill_tokens": prefill_rows * length,
        "num_decode_seqs": decode_rows,
        "prefill_attn_work": prefill_rows * length * (length / 2),
        "decode_context_tokens": decode_rows * (decode_ctx + 1),
        "batch_size": prefill_rows + decode_rows,
        # Each prefill row is a request entering the batch: its own attention segment
        # (engine/segment_attention.py) has its own cost, fitted as admit_s.
        "num_admitted": prefill_rows,
        "time_s": timing.mean_s,
        "median_time_s": timing.wall_s,
        "cpu_time_s": timing.cpu_s,
        "time_spread": timing.spread,
        "time_cv": timing.cv,
        "repeats": timing.repeats,
    }


def measure_shape(em: EngineModel, phase: str, batch: int, length: int, plan: SweepPlan,
                  generator: torch.Generator) -> Timing:
    """Build one shape's serving-loop step (untimed) and time it."""
    step = step_for_shape(em, phase, batch, length, context=plan.mixed_context,
                          generator=generator)
    return time_step(step, em.device, repeats=plan.repeats, warmup=plan.warmup)


def run_sweep(em: EngineModel, plan: SweepPlan,
              progress: Callable[[int], None] | None = None) -> Iterator[dict[str, Any]]:
    """Measure every shape of ``plan``, yielding one row per shape in plan order.

    On CPU the shapes are timed in interleaved passes (``time_interleaved``), so rows
    arrive at the end; on CUDA one shape at a time (each shape's cache is freed before
    the next is built). ``progress(n)`` counts runs: ``(warmup + repeats) x shapes``.
    """
    generator = torch.Generator().manual_seed(plan.seed)
    shapes = plan.shapes()
    if em.device.type == "cpu":
        steps = [step_for_shape(em, ph, b, n, context=plan.mixed_context, generator=generator)
                 for ph, b, n in shapes]
        timings = time_interleaved(steps, em.device, repeats=plan.repeats, warmup=plan.warmup,
                                   progress=progress)
        for (phase, batch, length), timing in zip(shapes, timings, strict=True):
            yield shape_row(phase, batch, length, timing, context=plan.mixed_context)
        return
    for phase, batch, length in shapes:
        timing = measure_shape(em, phase, batch, length, plan, generator)
        if progress is not None:
            progress(plan.warmup + plan.repeats)
        yield shape_row(phase, batch, length, timing, context=plan.mixed_context)


def hardware_name(device: torch.device) -> str:
    """The hardware-catalogue key for ``device`` ("cpu", "h100-sxm", ...), else its name."""
    if device.type != "cuda":
        return "cpu"
    name = torch.cuda.get_device_name(device).lower()
    rules = [("h100", "pcie", "h100-pcie"), ("h100", "", "h100-sxm"), ("h200", "", "h200"),
             ("a100", "40gb", "a100-40gb"), ("a100", "", "a100-80gb"), ("l40s", "", "l40s"),
             ("4090", "", "rtx4090"), ("b200", "", "b200")]
    return next((key for a, b, key in rules if a in name and b in name), name)


def device_description(device: torch.device) -> str:
    """The raw device name: the GPU's, or the CPU model from /proc/cpuinfo."""
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    try:
        with open("/proc/cpuinfo") as f:
            model = next((ln.split(":", 1)[1].strip() for ln in f if ln.startswith("model name")),
                         None)
    except OSError:
        model = None
    return f"{model or platform.processor() or 'cpu'} ({os.cpu_count()} logical CPUs)"


def machine_fingerprint(device: torch.device, threads: int) -> dict[str, Any]:
    """This machine's fingerprint (simulator/fingerprint.py) for the engine on ``device``."""
    if device.type != "cuda":
        return this_machine("cpu", threads)
    props = torch.cuda.get_device_properties(device)
    gpu = {"device": props.name, "gpu_memory_mib": int(props.total_memory // 2**20),
           "driver": _driver_version()}
    return this_machine("cuda", threads, gpu=gpu)


def _driver_version() -> str:
    found = gpu_fields()
    return str(found["driver"]) if found else f"cuda {torch.version.cuda}"


@dataclass(slots=True)
class RunLoad:
    """1/5/15-minute load averages before and after the sweep (other processes' load)."""

    before: tuple[float, ...] = field(default_factory=os.getloadavg)
    after: tuple[float, ...] = ()

    def finish(self) -> None:
        """Record the load at the end of the run."""
        self.after = os.getloadavg()


def engine_version() -> str:
    """``servesim 0.1.0``: the engine that measured (a profile table's ``engine_version``)."""
    try:
        return f"servesim {version('servesim')}"
    except PackageNotFoundError:
        return "servesim (not installed)"


def run_metadata(em: EngineModel, threads: int, load: RunLoad, plan: SweepPlan,
                 engine_version: str) -> dict[str, Any]:
    """Metadata of a profile table (``simulator.profile_table.METADATA_KEYS``)."""
    meta: dict[str, Any] = {
        "device": hardware_name(em.device), "device_name": device_description(em.device),
        "model": em.spec.name, "dtype": em.dtype, "tp": 1,
        "engine_version": engine_version, "torch_version": torch.__version__,
        "transformers_version": transformers.__version__, "threads": threads,
        "repeats": plan.repeats, "fingerprint": machine_fingerprint(em.device, threads),
        "load": {"before": [round(x, 2) for x in load.before],
                 "after": [round(x, 2) for x in load.after]},
        "source": "servesim profile (engine/sweep.py): the serving loop's own steps "
                  "(engine/step_timing.py); time_s = mean of repeats after warm-up "
                  "(median in median_time_s); on CPU in interleaved passes over all shapes",
    }
    if em.dtype in ("bf16", "fp16"):
        meta["kv_dtype"] = em.dtype  # fp32 KV has no cost-profile dtype; calibrate picks bf16
    return meta
