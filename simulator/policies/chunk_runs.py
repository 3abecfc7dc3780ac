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

from collections.abc import Iterator

from simulator.policies.continuous import ContinuousPolicy
from simulator.policies.state import Batch, ServerState
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


def chunk_run(policy: ContinuousPolicy, state: ServerState, batch: Batch
              ) -> Iterator[tuple[int, StepShape]]:
    """(chunk, step shape) of each step the policy would decide after ``batch`` (scheduled,
    its KV allocated, not yet run) if nothing arrives: ``batch``'s one prompt going on
    beside the same decoders; none when the next step is not such a step. Lazily, one
    step at a time (a replica stops at the next arrival), every figure derived from the
    state as it was at the first ``next()`` (running the steps between does not move it).

    The checks are :func:`~simulator.policies.clock_chunks.clock_and_chunks`'s and
    :func:`~simulator.policies.admit_fcfs.admit_fcfs`'s loop condition, on the state
    each earlier step leaves; the shapes are ``unpadded_shape``'s (the same floats)."""
    if not prompt_goes_on(batch):
        return  # the prompt ends with ``batch`` (it then joins the clock)
    seq, n = batch.prefill[0]
    clock, kv, running = state.clock, state.kv, state.running
    cohort = batch.cohort
    members = clock.size
    if (cohort is None or batch.preempted or state.group is not None or clock.rejoin
            or kv.caches_prefixes or len(running) != members + 1 or running[-1] is not seq
            or not members or not runs_chunks(policy)):
        return
    per_step = policy.max_num_batched_tokens - members  # the budget each chunk gets
    if per_step <= 0:
        return
    may_admit = bool(state.waiting) and len(running) < policy.max_num_seqs
    block_size, by_residue, steps = kv.block_size, clock.by_residue, clock.steps
    computed = seq.computed_base + n  # after ``batch``; off the clock: the counters themselves
    generated = seq.generated_base
    pending = seq.prompt_tokens + generated - computed
    held, free = kv.held(seq.request_id), kv.num_free
    context = batch.shape.decode_context_tokens
    min_left, at_min = cohort.min_remaining, cohort.num_at_min
    last_token = seq.output_tokens - generated == 1  # its next token is its last
    # a recompute (tokens emitted before its preemption) with one token left decodes it:
    # it joins the clock (step.join_decoders), so its run ends a token early
    joins_at = 1 if generated > 0 else 0
    j = 1  # the step after ``batch``: no member has finished before it while j < min_left
    while pending > joins_at and j < min_left:
        n = pending if pending < per_step else per_step
        if n < per_step and may_admit:
            break  # budget left over and someone waiting: admission decides this step
        opening = by_residue[(steps + j) % block_size]
        extra = -(-(computed + n) // block_size) - held
        extra = extra if extra > 0 else 0
        if opening + extra > free:
            break  # the general loop would preempt
        free -= opening + extra
        held += extra
        context += members
        attn = 0.0
        attn += n * (computed + n / 2)
        finishing = 1 if n == pending and last_token else 0
        if min_left - j == 1:
            finishing += at_min
        yield n, StepShape(num_prefill_tokens=n, prefill_attn_work=attn,
                           num_decode_seqs=members, decode_context_tokens=context,
                           num_admitted=0, num_finished=finishing)
        computed += n
        pending -= n
        j += 1
