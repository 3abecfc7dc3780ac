"""Chunked prefill's runs of mixed steps: one prompt chunked beside a stable decode set.

A long prompt under chunked prefill takes several steps, each the decode clock's members
(:mod:`simulator.policies.lazy`) decoding one token and the prompt's next chunk filling
the rest of the token budget. While nothing arrives, that is what
:meth:`ContinuousPolicy.schedule <simulator.policies.continuous.ContinuousPolicy.schedule>`
decides step after step (through :func:`~simulator.policies.clock_chunks.clock_and_chunks`)
as long as: the prompt is the one running request off the clock (the tail of
``running``), no member finishes (the decode set stays), the prompt still has tokens
pending (its last chunk emits its first token and it joins the clock after that step; a
recompute after preemption joins it with one token left, which it then decodes),
the free KV blocks cover the members' openings and the chunk's new blocks (else the
general loop preempts), and admission cannot take anyone (the chunk fills the budget,
or nobody waits, or the sequence limit is reached). :func:`chunk_run` lists those steps
after a batch the policy decided, so a replica that knows nothing arrives before they
end can run them without scheduling each (``replica_runs.ChunkRuns``), the way a decode
run follows a pure-decode step (:meth:`ContinuousPolicy.repeats`).
"""

from __future__ import annotations

from simulator.policies.continuous import ContinuousPolicy
from simulator.policies.state import Batch, DecodeCohort, ServerState
from simulator.shapes import StepShape


def runs_chunks(policy: ContinuousPolicy) -> bool:
    """Whether ``policy`` schedules chunked prefill's mixed steps through the decode clock
    and nothing else between them (no priority classes, speculation or multi-step)."""
    return (policy.chunked_prefill and policy.mixed_chunks and policy.scheduling == "fcfs"
            and policy.num_speculative_tokens == 0 and policy.num_scheduler_steps == 1)


def chunking_policy(policy: object) -> ContinuousPolicy | None:
    """``policy`` when it is continuous batching that :func:`runs_chunks`, else None."""
    return policy if isinstance(policy, ContinuousPolicy) and runs_chunks(policy) else None


def prompt_goes_on(batch: Batch) -> bool:
    """Whether ``batch``'s one prompt chunk leaves the prompt pending (it stays off the
    clock), the first thing :func:`chunk_run` needs: cheap, for every mixed step."""
    if len(batch.prefill) != 1:
        return False
    seq, n = batch.prefill[0]
    generated = seq.generated_base
    # pending after ``batch``, above the one a recompute then decodes (see chunk_run)
    left = seq.prompt_tokens + generated - seq.computed_base - n
    return seq.clock is None and left > (1 if generated > 0 else 0)


def chunk_run(policy: ContinuousPolicy, state: ServerState, batch: Batch) -> ChunkRun | None:
    """The steps the policy would decide after ``batch`` (scheduled, its KV allocated, not
    yet run) if nothing arrives, ``batch``'s one prompt going on beside the same decoders
    (:class:`ChunkRun`); None when the next step is not such a step."""
    if not prompt_goes_on(batch):
        return None  # the prompt ends with ``batch`` (it then joins the clock)
    seq, n = batch.prefill[0]
    clock, kv, running = state.clock, state.kv, state.running
    cohort = batch.cohort
    members = clock.size
    if (cohort is None or batch.preempted or state.group is not None or clock.rejoin
            or kv.caches_prefixes or len(running) != members + 1 or running[-1] is not seq
            or not members or not runs_chunks(policy)):
        return None
    per_step = policy.max_num_batched_tokens - members  # the budget each chunk gets
    if per_step <= 0:
        return None
    return ChunkRun(policy, state, batch, cohort, per_step)


class ChunkRun:
    """(chunk, step shape) of each step that follows a mixed step: :meth:`next_shape` one
    step at a time (a replica stops at the next arrival), every figure derived from the
    state as it was when made (running the steps between does not move it).

    The checks are :func:`~simulator.policies.clock_chunks.clock_and_chunks`'s and
    :func:`~simulator.policies.admit_fcfs.admit_fcfs`'s loop condition, on the state
    each earlier step leaves; the shapes are ``unpadded_shape``'s (the same floats). A
    plain class, not a generator: compiled, its figures are native fields that each step
    reads and writes in place (simulator/accel.py)."""

    def __init__(self, policy: ContinuousPolicy, state: ServerState, batch: Batch,
                 cohort: DecodeCohort, per_step: int) -> None:
        seq, n = batch.prefill[0]
        clock, kv = state.clock, state.kv
        self.members = clock.size
        self.per_step = per_step
        self.may_admit = bool(state.waiting) and len(state.running) < policy.max_num_seqs
        self.block_size = kv.block_size
        self.by_residue = clock.by_residue
        self.steps = clock.steps
        # after ``batch``; off the clock: the counters themselves
        self.computed = seq.computed_base + n
        generated = seq.generated_base
        self.pending = seq.prompt_tokens + generated - self.computed
        self.held = kv.held(seq.request_id)
        self.free = kv.num_free
        self.context = batch.shape.decode_context_tokens
        self.min_left = cohort.min_remaining
        self.at_min = cohort.num_at_min
        self.last_token = seq.output_tokens - generated == 1  # its next token is its last
        # a recompute (tokens emitted before its preemption) with one token left decodes
        # it: it joins the clock (step.join_decoders), so its run ends a token early
        self.joins_at = 1 if generated > 0 else 0
        self.j = 1  # the step after ``batch``: no member has finished before it (j < min_left)

    def next_shape(self) -> StepShape | None:
        """The next step's shape (its chunk is ``num_prefill_tokens``), or None: the run is
        over (the prompt's last chunk, a member finishing, admission or a preemption
        decides the next step)."""
        pending, j = self.pending, self.j
        if pending <= self.joins_at or j >= self.min_left:
            return None
        per_step = self.per_step
        n = pending if pending < per_step else per_step
        if n < per_step and self.may_admit:
            return None  # budget left over and someone waiting: admission decides this step
        opening = self.by_residue[(self.steps + j) % self.block_size]
        computed = self.computed
        extra = -(-(computed + n) // self.block_size) - self.held
        extra = extra if extra > 0 else 0
        if opening + extra > self.free:
            return None  # the general loop would preempt
        self.free -= opening + extra
        self.held += extra
        members = self.members
        self.context += members
        attn = 0.0
        attn += n * (computed + n / 2)
        finishing = 1 if n == pending and self.last_token else 0
        if self.min_left - j == 1:
            finishing += self.at_min
        self.computed = computed + n
        self.pending = pending - n
        self.j = j + 1
        return StepShape(num_prefill_tokens=n, prefill_attn_work=attn,
                         num_decode_seqs=members, decode_context_tokens=self.context,
                         num_admitted=0, num_finished=finishing)
