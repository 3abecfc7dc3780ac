"""A speed probe: this machine's speed right now, on a few fixed steps the profile also knows.

A shared VM's speed drifts by 5-10% between minutes (docs/calibration.md, "Issue 10":
the same loop served 0.92-0.95 of one profile, and 1.02 of the next an hour later). A validation
run minutes after calibrating compares the simulator with the machine's *drift* as much as
with the engine. So the engine times three fixed serving-loop steps (engine/step_timing.py)
just before and just after it serves a point, and ``servesim validate`` scales the profile
by (probe now) / (the profile's prediction for the same steps): the speed of the machine,
measured where the engine ran, on steps that are no part of the workload.

The shapes are on the profiler's default grid (a 4-row and a 1-row decode at 256 cached
tokens, a 128-token prefill), so every profile made by ``calibrate --here`` measured them.
"""

from __future__ import annotations

from typing import Any

import torch

from engine.models import EngineModel
from engine.profiler import time_step
from engine.step_timing import step_for_shape
from engine.sweep import shape_row

PROBE_SHAPES = (("decode", 4, 256), ("decode", 1, 256), ("prefill", 1, 128))
PROBE_REPEATS = 8  # per shape: ~0.3 s in all for tiny on one CPU thread


def probe(em: EngineModel, repeats: int = PROBE_REPEATS, seed: int = 0) -> list[dict[str, Any]]:
    """Profile-table rows (contract 2 columns, ``time_s`` = mean of ``repeats``) of the
    probe shapes, timed now."""
    generator = torch.Generator().manual_seed(seed)
    rows = []
    for phase, batch, length in PROBE_SHAPES:
        step = step_for_shape(em, phase, batch, length, generator=generator)
        timing = time_step(step, em.device, repeats=repeats, warmup=2)
        rows.append(shape_row(phase, batch, length, timing))
    return rows


def merge(before: list[dict[str, Any]], after: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One probe from the probes before and after a run: each shape's mean of the two."""
    return [{**b, "time_s": (b["time_s"] + a["time_s"]) / 2, "before_s": b["time_s"],
             "after_s": a["time_s"]} for b, a in zip(before, after, strict=True)]
