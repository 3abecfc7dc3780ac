"""One function per inference phase (gpt-fast style), and a timer around them.

    inputs = prefill_inputs(batch, prompt_len, vocab)    # random ids, left-padded
    logits = prefill(model, inputs)                      # (B, 1, V): logits_to_keep=1
    state  = decode_state(model, batch, context_len, vocab)   # a cache of context_len tokens
    logits = decode(model, state); rewind(state)         # one token per row, cache restored

Inputs are built outside the timed call, so a timing is the forward pass alone. The timer
warms each new shape up first, synchronises CUDA before every clock read, and reports the
median wall time (``time.perf_counter``) with the process CPU time (``time.process_time``)
beside it.
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
from transformers import DynamicCache, PreTrainedModel


@cache
def _forward_names(model_cls: Any) -> tuple[str, str | None]:
    """(cache keyword, logits-to-keep keyword or None) of this transformers version."""
    params = inspect.signature(model_cls.forward).parameters
    cache_kw = "cache" if "cache" in params else "past_key_values"  # renamed in v5
    keep = next((k for k in ("logits_to_keep", "num_logits_to_keep") if k in params), None)
    return cache_kw, keep


def _forward(model: PreTrainedModel, ids: torch.Tensor, mask: torch.Tensor,
             pos: torch.Tensor, kv: Any) -> torch.Tensor:
    """Logits of the last position only: (B, 1, V)."""
    model_cls: Any = type(model)  # hashable; typed Any as torch's __hash__ stub confuses mypy
    cache_kw, keep = _forward_names(model_cls)
    kwargs: dict[str, Any] = {cache_kw: kv, "use_cache": kv is not None}
    if keep:
        kwargs[keep] = 1
    logits = model(input_ids=ids, attention_mask=mask, position_ids=pos, **kwargs).logits
    return logits if keep else logits[:, -1:, :]


def new_cache(model: PreTrainedModel) -> Any:
    """An empty dynamic KV cache (transformers >= 5 wants the config)."""
    try:
        return DynamicCache(config=model.config)
    except TypeError:
        return DynamicCache()


@dataclass(slots=True)
class PrefillInputs:
    """A left-padded batch of prompts."""

    input_ids: torch.Tensor  # (B, T) int64 token ids; padding positions hold 0
    attention_mask: torch.Tensor  # (B, T) 1 = real token, 0 = left padding
    position_ids: torch.Tensor  # (B, T) 0-based position of each real token (padding: 0)


def prefill_inputs(batch: int, prompt_len: int, vocab_size: int, *,
                   lengths: list[int] | None = None, device: str | torch.device = "cpu",
                   generator: torch.Generator | None = None) -> PrefillInputs:
    """Random prompts of ``lengths`` (default: all ``prompt_len``), left-padded to prompt_len."""
    lengths = lengths or [prompt_len] * batch
    if len(lengths) != batch or not all(1 <= n <= prompt_len for n in lengths):
        raise ValueError(f"{lengths=} must be {batch} lengths in [1, {prompt_len}]")
    ids = torch.randint(0, vocab_size, (batch, prompt_len), generator=generator)  # (B, T)
    col = torch.arange(prompt_len)  # (T,)
    mask = (col[None, :] >= prompt_len - torch.tensor(lengths)[:, None]).long()  # (B, T)
    pos = (mask.cumsum(-1) - 1).clamp(min=0)  # (B, T)
    ids = ids * mask
    return PrefillInputs(ids.to(device), mask.to(device), pos.to(device))


@torch.inference_mode()
def prefill(model: PreTrainedModel, inputs: PrefillInputs, kv: Any = None) -> torch.Tensor:
    """Run whole prompts (into ``kv`` if given); logits of the last position: (B, 1, V)."""
    return _forward(model, inputs.input_ids, inputs.attention_mask, inputs.position_ids, kv)


@dataclass(slots=True)
class DecodeState:
    """A batch mid-generation: ``context_len`` tokens cached per row, one token to feed."""

    cache: Any  # transformers Cache holding context_len tokens per row
    next_ids: torch.Tensor  # (B, 1) the token each row decodes next
    attention_mask: torch.Tensor  # (B, context_len + 1): cached tokens and the new one
    position_ids: torch.Tensor  # (B, 1) = context_len
    context_len: int  # tokens in the cache before the decode step


@torch.inference_mode()
def decode_state(model: PreTrainedModel, batch: int, context_len: int, vocab_size: int, *,
                 device: str | torch.device = "cpu",
                 generator: torch.Generator | None = None) -> DecodeState:
    """Prefill ``context_len`` random tokens per row into a fresh cache; greedy next token."""
    inputs = prefill_inputs(batch, context_len, vocab_size, device=device, generator=generator)
    kv = new_cache(model)
    logits = prefill(model, inputs, kv)  # (B, 1, V)
    ones = torch.ones(batch, 1, dtype=torch.long, device=inputs.attention_mask.device)
    return DecodeState(
        cache=kv, next_ids=logits.argmax(-1),
        attention_mask=torch.cat([inputs.attention_mask, ones], dim=1),
        position_ids=torch.full((batch, 1), context_len, dtype=torch.long, device=ones.device),
        context_len=context_len,
    )


@torch.inference_mode()
def decode(model: PreTrainedModel, state: DecodeState) -> torch.Tensor:
    """One token for every row over its cache: logits (B, 1, V); the cache grows by one."""
    return _forward(model, state.next_ids, state.attention_mask, state.position_ids,
                    state.cache)


def rewind(state: DecodeState) -> None:
    """Drop the token :func:`decode` appended, so the same step can be timed again."""
    extra = state.cache.get_seq_length() - state.context_len
    if extra > 0:
        state.cache.crop(-extra)  # a negative count: the meaning both v4 and v5 share


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
    spread every shape over the whole run instead. (Needs every step's inputs alive at
    once: for CPU models, not for GPU models whose caches fill the GPU.) ``progress(n)``
    is called after each run with the runs just done.
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
                w, c = _timed_runs(step, device, 1, 0, None)
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
