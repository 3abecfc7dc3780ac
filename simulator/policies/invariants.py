"""Invariants of a replica's scheduling state, checked after each ``schedule()`` when asked.

A run with ``ClusterSpec(check_invariants=True)`` (tests turn it on) calls
:func:`check_batch` on every batch a policy returns and :func:`check_state` after every
step is applied. A broken invariant raises ``AssertionError`` naming it, so a scheduler
bug fails at the step that caused it rather than as a wrong figure at the end. The
checks walk the running and waiting requests, so they cost O(requests) per step: debug
runs only.
"""

from __future__ import annotations

from simulator.policies.admission import reserved_blocks
from simulator.policies.state import Batch, ServerState


def _require(ok: bool, invariant: str, detail: str) -> None:
    if not ok:
        raise AssertionError(f"scheduler invariant broken: {invariant} ({detail})")


def check_batch(policy: object, state: ServerState, batch: Batch) -> None:
    """The batch ``policy`` just returned keeps within the policy's limits."""
    max_seqs = getattr(policy, "max_num_seqs", None)
    if max_seqs is not None:
        _require(len(state.running) <= max_seqs, "running <= max_num_seqs",
                 f"{len(state.running)} running, max_num_seqs = {max_seqs}")
    budget = getattr(policy, "max_num_batched_tokens", None)
    if budget is not None:
        tokens = sum(n for _, n in batch.prefill) + len(batch.decode) + sum(batch.spec_drafts)
        alone = (getattr(policy, "long_prompt_alone", False) and len(batch.prefill) == 1
                 and not batch.decode)  # SGLang 0.2: a long prompt runs over it alone
        _require(tokens <= budget or alone, "batch tokens <= max_num_batched_tokens",
                 f"{tokens} tokens, budget {budget}")
    for seq, n in batch.prefill:
        _require(0 < n <= seq.pending, "0 < tokens computed <= pending",
                 f"request {seq.request_id}: {n} tokens, {seq.pending} pending")
    size = getattr(policy, "batch_size", None) or getattr(policy, "max_batch_size", None)
    if size is not None and state.group is not None:
        _require(len(state.group.rows) <= size, "padded batch rows <= batch size",
                 f"{len(state.group.rows)} rows, batch size {size}")
    if getattr(policy, "admission", None) == "no_evict":
        kv = state.kv
        reserved = reserved_blocks(state)  # what admission holds back, as it computes it
        _require(reserved <= kv.num_blocks, "no_evict: running requests' whole prompt + "
                 "output fits the KV cache", f"{reserved} blocks reserved of {kv.num_blocks}")
        _require(not batch.preempted, "no_evict never preempts",
                 f"requests {[s.request_id for s in batch.preempted]}")
    in_batch = [s for s, _ in batch.prefill] + batch.decode
    _require(len({id(s) for s in in_batch}) == len(in_batch), "a request is once in a batch",
             f"{len(in_batch)} entries")
    running = {id(s) for s in state.running}
    _require(all(id(s) in running for s in in_batch), "every request in the batch is running",
             f"requests {[s.request_id for s in in_batch if id(s) not in running]}")


def check_state(state: ServerState, *, accepted: int, finished: int) -> None:
    """Between steps: request accounting, counts, and the KV and decode-clock records.

    ``accepted``: requests this replica queued (arrived and not refused on arrival or by
    the policy); ``finished``: how many of them have finished.
    """
    waiting = {id(s) for s in state.waiting}
    running = {id(s) for s in state.running}
    _require(len(waiting) == len(state.waiting), "a request waits once", "duplicate in queue")
    _require(len(running) == len(state.running), "a request runs once", "duplicate in running")
    both = [s.request_id for s in state.running if id(s) in waiting]
    _require(not both, "no request both waits and runs", f"requests {both}")
    # A padded batch keeps its finished rows (and their KV) until its longest row ends.
    done_rows = 0 if state.group is None else sum(
        1 for s in state.running if s.num_generated == s.output_tokens)
    total = len(waiting) + len(running) - done_rows + finished
    _require(total == accepted, "every request is in exactly one of waiting/running/finished",
             f"{len(waiting)} waiting + {len(running) - done_rows} running + {finished} "
             "finished != "
             f"{accepted} accepted")
    for seq in (*state.running, *state.waiting):
        _require(0 <= seq.num_generated <= seq.output_tokens, "0 <= generated <= output_tokens",
                 f"request {seq.request_id}: {seq.num_generated} of {seq.output_tokens}")
        _require(0 <= seq.num_computed <= seq.num_tokens, "0 <= computed <= known tokens",
                 f"request {seq.request_id}: {seq.num_computed} of {seq.num_tokens}")
        _require(seq.preemptions >= 0, "preemptions >= 0", f"request {seq.request_id}")
    kv = state.kv
    _require(0 <= kv.used <= kv.num_blocks, "0 <= KV blocks used <= KV blocks",
             f"{kv.used} of {kv.num_blocks}")
    if state.group is None:
        state.clock.check(state.running, kv)  # also makes the KV records exact
        for seq in state.running:
            need = kv.blocks_for(seq.num_computed)
            _require(kv.held(seq.request_id) == need, "a running request holds "
                     "blocks_for(num_computed) KV blocks",
                     f"request {seq.request_id} holds {kv.held(seq.request_id)}, needs {need}")
    held = kv.blocks_in_use([s.request_id for s in state.running])  # a shared block once
    _require(kv.used == held, "KV blocks used == sum of blocks held by running requests",
             f"used {kv.used}, held {held}")
    kv.check()
