"""Timing engine steps, and the one forward call the engine makes.

The timer warms each new shape up first, synchronises CUDA before every clock read, and
reports the mean and median wall time (``time.perf_counter``) with the process CPU time
(``time.process_time``) and the repeats' spread beside them. ``time_interleaved`` times
many shapes in passes (each pass runs every shape once), so a slow period of a shared
machine is spread over every shape rather than landing on one. The steps themselves are
the serving loop's (engine/step_timing.py); inputs are built outside the clock.
"""

from __future__ import annotations

import gc
import inspect
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from typing import Any

import torch
from transformers import PreTrainedModel


@cache
def forward_names(model_cls: Any) -> tuple[str, str | None]:
    """(cache keyword, logits-to-keep keyword or None) of this transformers version."""
    params = inspect.signature(model_cls.forward).parameters
    cache_kw = "cache" if "cache" in params else "past_key_values"  # renamed in v5
    keep = next((k for k in ("logits_to_keep", "num_logits_to_keep") if k in params), None)
    return cache_kw, keep


def forward_last(model: PreTrainedModel, ids: torch.Tensor, mask: torch.Tensor,
                 pos: torch.Tensor, kv: Any, last: int = 1) -> torch.Tensor:
    """Logits of the last ``last`` positions only: (B, last, V)."""
    model_cls: Any = type(model)  # hashable; typed Any as torch's __hash__ stub confuses mypy
    cache_kw, keep = forward_names(model_cls)
    kwargs: dict[str, Any] = {cache_kw: kv, "use_cache": kv is not None}
    if keep:
        kwargs[keep] = last
    logits = model(input_ids=ids, attention_mask=mask, position_ids=pos, **kwargs).logits
    return logits if keep else logits[:, -last:, :]


@dataclass(slots=True)
class Timing:
    """Repeated measurements of one step shape."""

    wall_s: float  # median wall time (time.perf_counter), seconds
    cpu_s: float  # median process CPU time (time.process_time), seconds, all threads
    spread: float  # (max - min) / median of the wall times: repeat-to-repeat noise
    repeats: int  # timed runs (warm-up runs excluded)
    mean_s: float = 0.0  # mean wall time: what a sum of many such steps averages to
    cv: float = 0.0  # standard deviation / mean of the wall times


    @classmethod
    def of(cls, walls: list[float], cpus: list[float]) -> Timing:
        """Summary of timed runs (seconds)."""
        median = statistics.median(walls)
        mean = statistics.fmean(walls)
        cv = statistics.pstdev(walls) / mean if len(walls) > 1 else 0.0
        return cls(median, statistics.median(cpus), (max(walls) - min(walls)) / median,
                   len(walls), mean, cv)


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)  # kernels are async: wait before reading the clock


def time_step(step: Callable[[], object], device: torch.device, *, repeats: int = 3,
              warmup: int = 1, reset: Callable[[], None] | None = None) -> Timing:
    """Run ``step`` ``warmup`` times untimed, then ``repeats`` times timed; ``reset`` after each
    run (untimed) restores its inputs. The garbage collector is paused meanwhile (as
    ``timeit`` does), so a collection never lands inside one repeat."""
    if repeats < 1 or warmup < 0:
        raise ValueError(f"{repeats=} must be >= 1 and {warmup=} >= 0")
    gc.collect()
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        walls, cpus = _timed_runs(step, device, repeats, warmup, reset)
    finally:
        if was_enabled:
            gc.enable()
    return Timing.of(walls, cpus)


def time_interleaved(steps: list[Callable[[], object]], device: torch.device, *,
                     repeats: int = 3, warmup: int = 1,
                     progress: Callable[[int], None] | None = None) -> list[Timing]:
    """Time several steps in ``repeats`` passes, each pass running every step once.

    On a shared machine the speed drifts for seconds at a time; timing each shape in one
    burst would give a whole shape a slow period and bend the fitted surface. Passes
    spread every shape over the whole run instead; each timed run follows one untimed run
    of the same shape, so it starts with that shape's data in the caches. (Needs every
    step's inputs alive at once: for CPU models, not for GPU models whose caches fill the
    GPU.) ``progress(n)`` is called after each timed run with the runs just done.
    """
    if repeats < 1 or warmup < 0:
        raise ValueError(f"{repeats=} must be >= 1 and {warmup=} >= 0")
    walls: list[list[float]] = [[] for _ in steps]
    cpus: list[list[float]] = [[] for _ in steps]
    gc.collect()
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        for step in steps:
            _timed_runs(step, device, 0, warmup, None)
            if progress is not None:
                progress(warmup)
        for _ in range(repeats):
            for i, step in enumerate(steps):
                # One untimed run first: a step's time depends on what ran before it, and a
                # server runs similar steps back to back (benchmarks/cpu_noise.py).
                w, c = _timed_runs(step, device, 1, 1, None)
                walls[i] += w
                cpus[i] += c
                if progress is not None:
                    progress(1)
    finally:
        if was_enabled:
            gc.enable()
    return [Timing.of(w, c) for w, c in zip(walls, cpus, strict=True)]


def _timed_runs(step: Callable[[], object], device: torch.device, repeats: int, warmup: int,
                reset: Callable[[], None] | None) -> tuple[list[float], list[float]]:
    """Wall and CPU seconds of each timed run (warm-up runs discarded)."""
    walls, cpus = [], []
    for i in range(warmup + repeats):
        _sync(device)
        w0, c0 = time.perf_counter(), time.process_time()
        step()
        _sync(device)
        w1, c1 = time.perf_counter(), time.process_time()
        if reset is not None:
            reset()
        if i >= warmup:
            walls.append(w1 - w0)
            cpus.append(c1 - c0)
    return walls, cpus
