"""A profiling sweep: prefill and decode shapes -> profile-table rows (data contract 2).

Each shape maps to P, A, D, C as the cost model counts them (design.md, "Cost models"):

    prefill (batch b, prompt p):  P = b*p (padding included), A = b*p*(p/2), D = C = 0
    decode (batch b, context c):  P = A = 0, D = b, C = b*(c+1) (cached tokens + the new one)

``num_admitted``/``num_finished`` stay 0: a bare forward pass does no per-request
scheduling work (the serving loop measures that).
"""

from __future__ import annotations

import os
import platform
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import torch
import transformers

from engine.models import EngineModel
from engine.plan import SweepPlan
from engine.profiler import (
    Timing,
    decode,
    decode_state,
    prefill,
    prefill_inputs,
    rewind,
    time_step,
)


def shape_row(phase: str, batch: int, length: int, timing: Timing) -> dict[str, Any]:
    """One profile-table row for a measured shape (see the module docstring for P/A/D/C)."""
    prefill_phase = phase == "prefill"
    return {
        "phase": phase,
        "num_prefill_tokens": batch * length if prefill_phase else 0,
        "num_decode_seqs": 0 if prefill_phase else batch,
        "prefill_attn_work": batch * length * (length / 2) if prefill_phase else 0.0,
        "decode_context_tokens": 0 if prefill_phase else batch * (length + 1),
        "batch_size": batch,
        "time_s": timing.wall_s,
        "cpu_time_s": timing.cpu_s,
        "time_spread": timing.spread,
        "repeats": timing.repeats,
    }


def measure_shape(em: EngineModel, phase: str, batch: int, length: int, plan: SweepPlan,
                  generator: torch.Generator) -> Timing:
    """Build the inputs for one shape (untimed) and time its step."""
    model, dev = em.model, em.device
    if phase == "prefill":
        inputs = prefill_inputs(batch, length, em.vocab_size, device=dev, generator=generator)
        return time_step(lambda: prefill(model, inputs), dev, repeats=plan.repeats,
                         warmup=plan.warmup)
    state = decode_state(model, batch, length, em.vocab_size, device=dev, generator=generator)
    return time_step(lambda: decode(model, state), dev, repeats=plan.repeats,
                     warmup=plan.warmup, reset=lambda: rewind(state))


def run_sweep(em: EngineModel, plan: SweepPlan) -> Iterator[dict[str, Any]]:
    """Measure every shape of ``plan`` in order, yielding one row per shape."""
    generator = torch.Generator().manual_seed(plan.seed)
    for phase, batch, length in plan.shapes():
        yield shape_row(phase, batch, length, measure_shape(em, phase, batch, length, plan,
                                                            generator))


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


@dataclass(slots=True)
class RunLoad:
    """1/5/15-minute load averages before and after the sweep (other processes' load)."""

    before: tuple[float, ...] = field(default_factory=os.getloadavg)
    after: tuple[float, ...] = ()

    def finish(self) -> None:
        """Record the load at the end of the run."""
        self.after = os.getloadavg()


def run_metadata(em: EngineModel, threads: int, load: RunLoad, plan: SweepPlan,
                 engine_version: str) -> dict[str, Any]:
    """Metadata of a profile table (``simulator.profile_table.METADATA_KEYS``)."""
    meta: dict[str, Any] = {
        "device": hardware_name(em.device), "device_name": device_description(em.device),
        "model": em.spec.name, "dtype": em.dtype, "tp": 1,
        "engine_version": engine_version, "torch_version": torch.__version__,
        "transformers_version": transformers.__version__, "threads": threads,
        "repeats": plan.repeats,
        "load": {"before": [round(x, 2) for x in load.before],
                 "after": [round(x, 2) for x in load.after]},
        "source": "servesim profile (engine/sweep.py): median of repeats after warm-up",
    }
    if em.dtype in ("bf16", "fp16"):
        meta["kv_dtype"] = em.dtype  # fp32 KV has no cost-profile dtype; calibrate picks bf16
    return meta
