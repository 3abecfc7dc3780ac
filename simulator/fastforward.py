"""Fast-forward over runs of identical pure-decode steps.

A replica whose next ``k`` steps are pure decodes with no arrival, completion or KV event
in between does not need ``k`` SimPy events: this module prices the ``k`` steps in one
vectorised call and applies them at once, giving the same records and step log as
stepping one token at a time (the tests check it to float tolerance).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from simulator.kvcache import blocks_opened, blocks_used_after_steps
from simulator.policies.state import Batch, Sequence, ServerState
from simulator.policies.step import decode_cohort, finish_members, join_decoders
from simulator.shapes import StepShapes


@dataclass(slots=True)
class DecodeRun:
    """The ``k`` pure-decode steps ahead of a replica, before they run."""

    seqs: list[Sequence]  # rows that emit tokens (padded groups: the live rows)
    shapes: StepShapes  # what each step costs
    emitted: np.ndarray  # output tokens each step emits (ITL weights)
    running_after: np.ndarray  # num_running logged after each step (before completions)
    kv_after: np.ndarray  # kv_blocks_used after each step (before completions)


def plan_decode_run(state: ServerState, batch: Batch, k: int) -> DecodeRun:
    """Shapes and per-step log values of ``k`` decode steps, the first of them ``batch``.

    Called after the policy scheduled ``batch`` (its KV is already allocated).
    """
    seqs = batch.decode
    group = state.group
    kv = state.kv
    if group is not None:
        offsets = np.arange(k)
        remaining = np.fromiter((s.remaining for s in seqs), np.int64, len(seqs))
        n = len(group.rows)
        ctx = n * (group.max_prompt + group.decode_steps_done + 1 + offsets)
        finishing = np.bincount(np.minimum(remaining, k + 1) - 1, minlength=k + 1)[:k]
        live = len(seqs) - np.concatenate(([0], np.cumsum(finishing)[:-1]))
        shapes = StepShapes.decode_run(n, ctx, finishing)
        kv_after = np.full(k, kv.used, dtype=np.int64)
        return DecodeRun(seqs, shapes, live, np.full(k, len(state.running)), kv_after)
    d = len(seqs)
    cohort = batch.cohort or decode_cohort(seqs, kv.block_size)
    # KV already holds the first step's token; steps 2..k each write one more per sequence.
    kv_after = blocks_used_after_steps(cohort.block_openings, k - 1, kv.used)
    finished = np.zeros(k, dtype=np.int64)
    finished[-1] = cohort.num_at_min if k == cohort.min_remaining else 0
    context = np.arange(batch.shape.decode_context_tokens, batch.shape.decode_context_tokens
                        + d * k, d, dtype=np.int64) if d else np.zeros(k, dtype=np.int64)
    shapes = StepShapes.decode_run(d, context, finished)
    return DecodeRun(seqs, shapes, np.full(k, d), np.full(k, len(state.running)), kv_after)


def apply_decode_run(state: ServerState, batch: Batch, ends: np.ndarray) -> list[Sequence]:
    """Advance ``batch``'s rows by ``len(ends)`` decode steps ending at ``ends``; return what
    finished. ``batch`` was the run's first step, as planned by :func:`plan_decode_run`."""
    k = len(ends)
    seqs = batch.decode
    finished: list[Sequence] = []
    state.decode_steps += k
    group = state.group
    kv = state.kv
    if group is not None:
        for s in seqs:
            t = min(s.output_tokens - s.num_generated, k)
            s.num_computed += t
            s.num_generated += t
            if s.num_generated == s.output_tokens:
                s.finish_s = float(ends[t - 1])
                finished.append(s)
        group.decode_steps_done += k
        if group.decode_steps_left <= 0:
            for row in group.rows:
                kv.free(row.request_id)
            state.running.clear()
            state.group = None
        return finished
    if batch.cohort is not None:  # every running request decodes on the clock: O(1)
        clock = state.clock
        kv.take(blocks_opened(clock.openings_after(), k - 1))  # the first step's are taken
        finish_members(state, clock.advance(k), float(ends[-1]), finished)
        return finished
    block_size = kv.block_size
    for s in seqs:
        left = s.output_tokens - s.num_generated
        if left <= k:  # finishes in the run: its blocks go back, so it need not grow
            s.num_computed += left
            s.num_generated += left
            s.finish_s = float(ends[left - 1])
            finished.append(s)
            kv.free(s.request_id)
        else:
            before = s.num_computed  # holds blocks_for(before + 1): the first step's token
            s.num_computed += k
            s.num_generated += k
            if (before + k - 1) // block_size != before // block_size:
                kv.allocate(s.request_id, s.num_computed)
    if finished:
        state.running = [s for s in state.running if s.num_generated < s.output_tokens]
    join_decoders(state, batch)
    return finished
