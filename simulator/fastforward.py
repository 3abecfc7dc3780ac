"""Fast-forward over runs of identical pure-decode steps.

A replica whose next ``k`` steps are pure decodes with no arrival, completion or KV event
in between does not need ``k`` SimPy events: this module prices the ``k`` steps in one
vectorised call and applies them at once, giving the same records and step log as
stepping one token at a time (the tests check it to float tolerance).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from simulator.costs.decode_terms import DecodeTerms
from simulator.kvcache import blocks_opened, blocks_used_after_steps
from simulator.policies.state import Batch, Sequence, ServerState
from simulator.policies.step import decode_cohort, finish_members, join_decoders
from simulator.shapes import StepShapes, filled
from simulator.steplog import AnyStepLog


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
        kv_after = filled(k, kv.used)
        return DecodeRun(seqs, shapes, live, filled(k, len(state.running)), kv_after)
    d = len(seqs)
    cohort = batch.cohort or decode_cohort(seqs, kv.block_size)
    # KV already holds the first step's token; steps 2..k each write one more per sequence.
    kv_after = blocks_used_after_steps(cohort.block_openings, k - 1, kv.used)
    finished = np.zeros(k, dtype=np.int64)
    finished[-1] = cohort.num_at_min if k == cohort.min_remaining else 0
    context = np.arange(batch.shape.decode_context_tokens, batch.shape.decode_context_tokens
                        + d * k, d, dtype=np.int64) if d else np.zeros(k, dtype=np.int64)
    shapes = StepShapes.decode_run(d, context, finished)
    return DecodeRun(seqs, shapes, filled(k, d), filled(k, len(state.running)), kv_after)


def steps_reaching(k: int, start_s: float, stop_s: float, first_s: float) -> int:
    """Steps of a decode run to plan so that the one in progress at ``stop_s`` is among
    them, when the first takes ``first_s`` and later ones (attending more tokens) no less:
    planning all ``k`` and cutting most away cost more than the steps run. A cost model
    whose later steps are cheaper only makes the replica plan again, further."""
    if first_s <= 0.0:
        return k
    steps = (stop_s - start_s) / first_s  # inf when no request will come
    return k if steps >= k else min(k, int(steps) + 2)


def apply_decode_run(state: ServerState, batch: Batch, ends: np.ndarray | list[float],
                     opened: int | None = None) -> list[Sequence]:
    """Advance ``batch``'s rows by ``len(ends)`` decode steps ending at ``ends``; return what
    finished. ``batch`` was the run's first step, as planned by :func:`plan_decode_run`.

    ``opened``: the KV blocks steps 2..k open, when the caller counted them (a
    :class:`ShortRun`'s :meth:`~ShortRun.opened`); read only for a clock batch."""
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
        if opened is None:  # the first step's are taken
            opened = blocks_opened(clock.openings_after(), k - 1)
        kv.take(opened)
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


@dataclass(slots=True)
class ShortRun:
    """A continuous-batching decode run priced step by step in plain Python (a few steps:
    numpy's per-call cost would dominate), with the step-log values known before it runs."""

    start_s: float  # the first step's start
    ends: list[float]  # each step's end: start + t_1 + ... + t_i, summed in order
    rows: int  # D of every step
    context_tokens: int  # C of the first step (each later step attends D more)
    num_running: int  # logged after every step but the last (nothing finishes before it)
    queue_len: int  # likewise: nobody arrives before the last step ends
    kv_used: int  # kv_blocks_used after the first step (its blocks are taken)
    # blocks the later steps open, ``openings[i % len]`` at the i-th of them (the cohort's
    # block openings): kv_blocks_used after each step but the last, without a list of them
    openings: list[int]

    def __init__(self, start_s: float, ends: list[float], rows: int, context_tokens: int,
                 num_running: int, queue_len: int, kv_used: int, openings: list[int]
                 ) -> None:
        # written out (the dataclass keeps it): native when compiled (simulator/accel.py)
        self.start_s = start_s
        self.ends = ends
        self.rows = rows
        self.context_tokens = context_tokens
        self.num_running = num_running
        self.queue_len = queue_len
        self.kv_used = kv_used
        self.openings = openings

    def opened(self) -> int:
        """Blocks the steps after the first open (they are not taken yet)."""
        return blocks_opened(self.openings, len(self.ends) - 1)


def plan_short_run(state: ServerState, batch: Batch, k: int, start_s: float, stop_s: float,
                   price: Callable[[int, int, int], float], first_s: float | None = None
                   ) -> ShortRun:
    """The decode run of up to ``k`` steps starting with ``batch`` (every running request
    decodes, no padded group), cut after the step in progress at ``stop_s``: the same
    steps, ends and log values as :func:`plan_decode_run` and the replica's cut give.

    ``first_s``: ``price(D, C, 0)`` of the first step, when the caller has it (the replica
    priced it to choose this path); used only when the first step is not the last."""
    cohort = batch.cohort or decode_cohort(batch.decode, state.kv.block_size)
    d = len(batch.decode)
    c = c0 = batch.shape.decode_context_tokens
    ends: list[float] = []
    append = ends.append
    t = start_s
    plain = k - 1  # steps before the last: nobody finishes at them
    cut = False
    if plain and first_s is not None:
        t += first_s
        append(t)
        cut = t >= stop_s
        plain -= 1
        c += d
    if not cut:
        if isinstance(price, DecodeTerms):  # the terms read once, each step summed inline
            t, c, cut = _terms_steps(price, ends, plain, d, c, t, stop_s)
        else:
            for _ in range(plain):
                t += price(d, c, 0)
                append(t)
                if t >= stop_s:
                    cut = True
                    break
                c += d
        if not cut:
            t += price(d, c, cohort.num_at_min if k == cohort.min_remaining else 0)
            append(t)
    return ShortRun(start_s, ends, d, c0, len(state.running), len(state.waiting),
                    state.kv.used, cohort.block_openings)


def _terms_steps(price: DecodeTerms, ends: list[float], steps: int, d: int, c: int,
                 t: float, stop_s: float) -> tuple[float, int, bool]:
    """Up to ``steps`` decode steps of ``d`` rows (nobody finishing) from ``t`` with
    context ``c``, each priced as ``price(d, c, 0)`` is, term by term in its order; their
    ends appended to ``ends``. Stops after the step in progress at ``stop_s``. Returns
    the clock, the next step's context and whether it stopped there."""
    base, context_s, admitted = price.base(d), price.context_s, price.admitted
    finishing = price.finish_s * 0.0  # price(d, c, 0)'s last term
    append = ends.append
    for _ in range(steps):
        t += base + context_s * float(c) + admitted + finishing
        append(t)
        if t >= stop_s:
            return t, c, True
        c += d
    return t, c, False


def log_short_run(log: AnyStepLog, run: ShortRun, batch: Batch, state: ServerState,
                  finished: list[Sequence]) -> None:
    """Write ``run``'s steps to the step log once they are applied (``finished`` ended it)."""
    log.add_decode_rows(run.start_s, run.ends, batch.shape, run.rows, run.num_running,
                        run.queue_len, run.kv_used, run.openings,
                        (len(state.running), len(state.waiting), state.kv.used), finished)
