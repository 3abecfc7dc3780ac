"""Fast-forward over runs of identical pure-decode steps.

A replica whose next ``k`` steps are pure decodes with no arrival, completion or KV event
in between does not need ``k`` SimPy events: this module prices the ``k`` steps in one
vectorised call and applies them at once, giving the same records and step log as
stepping one token at a time (the tests check it to float tolerance).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from simulator.kvcache import blocks_after_steps
from simulator.policies.state import Sequence, ServerState
from simulator.shapes import StepShapes


@dataclass(slots=True)
class DecodeRun:
    """The ``k`` pure-decode steps ahead of a replica, before they run."""

    seqs: list[Sequence]  # rows that emit tokens (padded groups: the live rows)
    shapes: StepShapes  # what each step costs
    emitted: np.ndarray  # output tokens each step emits (ITL weights)
    running_after: np.ndarray  # num_running logged after each step (before completions)
    kv_after: np.ndarray  # kv_blocks_used after each step (before completions)


def plan_decode_run(state: ServerState, seqs: list[Sequence], k: int) -> DecodeRun:
    """Shapes and per-step log values of the next ``k`` decode steps over ``seqs``.

    Called after the policy scheduled the first step (its KV is already allocated).
    """
    offsets = np.arange(k)
    remaining = np.fromiter((s.remaining for s in seqs), np.int64, len(seqs))
    group = state.group
    kv = state.kv
    if group is not None:
        n = len(group.rows)
        ctx = n * (group.max_prompt + group.decode_steps_done + 1 + offsets)
        finishing = np.bincount(np.minimum(remaining, k + 1) - 1, minlength=k + 1)[:k]
        live = len(seqs) - np.concatenate(([0], np.cumsum(finishing)[:-1]))
        shapes = StepShapes.decode_run(n, ctx, finishing)
        kv_after = np.full(k, kv.used, dtype=np.int64)
        return DecodeRun(seqs, shapes, live, np.full(k, len(state.running)), kv_after)
    computed = np.fromiter((s.num_computed for s in seqs), np.int64, len(seqs))
    d = len(seqs)
    ctx = int(computed.sum()) + d + d * offsets
    finishing = np.zeros(k, dtype=np.int64)
    finishing[-1] = int((remaining == k).sum())
    held = np.fromiter((kv.held(s.request_id) for s in seqs), np.int64, d)
    extra = blocks_after_steps(computed + 1, held, kv.block_size, k - 1)
    kv_after = kv.used + np.concatenate(([0], extra))
    shapes = StepShapes.decode_run(d, ctx, finishing)
    return DecodeRun(seqs, shapes, np.full(k, d), np.full(k, len(state.running)), kv_after)


def apply_decode_run(state: ServerState, seqs: list[Sequence], ends: np.ndarray) -> list[Sequence]:
    """Advance ``seqs`` by ``len(ends)`` decode steps ending at ``ends``; return what finished."""
    k = len(ends)
    finished: list[Sequence] = []
    for s in seqs:
        t = min(s.remaining, k)
        s.num_computed += t
        s.num_generated += t
        if s.num_generated == s.output_tokens:
            s.finish_s = float(ends[t - 1])
            finished.append(s)
    group = state.group
    kv = state.kv
    if group is not None:
        group.decode_steps_done += k
        if group.decode_steps_left <= 0:
            for row in group.rows:
                kv.free(row.request_id)
            state.running.clear()
            state.group = None
        return finished
    for s in seqs:
        kv.allocate(s.request_id, s.num_computed)
    if finished:
        for s in finished:
            kv.free(s.request_id)
        state.running = [s for s in state.running if s.num_generated < s.output_tokens]
    return finished
