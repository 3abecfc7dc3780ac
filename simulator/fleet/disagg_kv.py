"""The KV cache at both ends of a disaggregated transfer.

Prefill side: a request's prompt KV stays on its prefill replica from the end of its
prefill until its transfer ends. :class:`LendingBlockManager` counts those blocks as
*lent*: neither free nor held by a running request, so the policy's admission sees them
taken while the scheduler's invariants (used == blocks held by running requests) hold::

    num_blocks = used (running requests) + lent (KV being sent) + free

Decode side: a request arrives with its prompt's KV (``num_computed = prompt``, first
token emitted). :class:`DecodeArrivals` wraps the decode pool's policy: at each schedule,
arrived requests join the running batch, FCFS, as soon as ``blocks_for(prompt)``
blocks are free and ``max_num_seqs`` allows (until then they wait at the queue's head,
unseen by the inner policy), and decode from the next step on: nothing of the prompt
is computed again (SGLang's decode server merges the received KV into the running batch
without a forward pass, python/sglang/srt/disaggregation/decode.py). A request preempted
there later is recomputed as any preempted request is (its KV is gone). A request whose
blocks were reserved before its transfer (simulator/fleet/disagg_reserve.py) has them
lent on the decode replica; joining turns them into its own (``reserved``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from simulator.kvcache import BlockManager
from simulator.policies import Batch, Policy, ServerState, Wait


class LendingBlockManager(BlockManager):
    """A paged KV cache that can lend blocks to transfers in flight (module docstring)."""

    __slots__ = ("lent",)

    def __init__(self, num_blocks: int, block_size: int) -> None:
        super().__init__(num_blocks, block_size)
        self.lent = 0  # blocks held by KV transfers in flight

    @property
    def num_free(self) -> int:
        """Blocks neither held by a sequence nor lent."""
        return self.num_blocks - self.used - self.lent

    def can_allocate(self, seq_id: int, num_tokens: int, reserve_blocks: int = 0) -> bool:
        return self.extra_for(seq_id, num_tokens) + reserve_blocks <= self.num_free

    def allocate(self, seq_id: int, num_tokens: int) -> None:
        if self.extra_for(seq_id, num_tokens) > self.num_free:
            raise RuntimeError(f"KV overcommit: seq {seq_id} needs "
                               f"{self.extra_for(seq_id, num_tokens)}, {self.num_free} free")
        super().allocate(seq_id, num_tokens)

    def take(self, num_blocks: int) -> None:
        if num_blocks > self.num_free:
            raise RuntimeError(f"KV overcommit: {num_blocks} blocks wanted, "
                               f"{self.num_free} free")
        self.used += num_blocks

    def lend(self, num_blocks: int) -> None:
        """A finished prefill's ``num_blocks`` blocks stay taken until its transfer ends."""
        if num_blocks > self.num_free:
            raise RuntimeError(f"KV overcommit: lending {num_blocks}, {self.num_free} free")
        self.lent += num_blocks

    def give_back(self, num_blocks: int) -> None:
        """A transfer ended: its blocks are free again."""
        self.lent -= num_blocks

    def check(self) -> None:
        super().check()
        assert 0 <= self.lent and self.used + self.lent <= self.num_blocks, (
            f"KV used {self.used} + lent {self.lent} of {self.num_blocks}")


@dataclass(slots=True, frozen=True)
class DecodeArrivals:
    """A decode pool's policy: ``inner`` after arrived KV has joined the running batch."""

    inner: Policy
    max_num_seqs: int  # the inner policy's limit on running requests
    reserved: dict[int, int] = field(default_factory=dict)  # request id -> lent blocks
    grant: Callable[[], None] | None = None  # grants this replica's waiting reservations

    def schedule(self, state: ServerState, now: float) -> Batch | Wait:
        """Reservations are granted first, then arrived KV joins; arrivals that do not fit
        yet stay out of the inner policy's sight (it would admit them as prompts to
        compute) and keep the queue's head."""
        if self.grant is not None:
            self.grant()
        waiting = state.waiting
        if not waiting or state.group is not None:
            return self.inner.schedule(state, now)
        join_arrivals(state, self.max_num_seqs, self.reserved)
        held = [s for s in waiting if s.num_computed > 0]
        if not held:
            return self.inner.schedule(state, now)
        rest = [s for s in waiting if s.num_computed == 0]
        waiting.clear()
        waiting.extend(rest)
        try:
            return self.inner.schedule(state, now)
        finally:
            waiting.extendleft(reversed(held))

    def repeats(self, state: ServerState, batch: Batch) -> int:
        return self.inner.repeats(state, batch)

    def __getattr__(self, name: str) -> object:
        # the replica and the invariant checks read knobs (max_num_batched_tokens, ...)
        return getattr(self.inner, name)


def join_arrivals(state: ServerState, max_num_seqs: int,
                  reserved: dict[int, int] | None = None) -> int:
    """Move arrived requests (``num_computed > 0``: their KV came over the link) from the
    queue into the running batch, in queue order, while blocks and ``max_num_seqs`` allow;
    a request recomputing after a preemption is skipped (the policy admits it); the blocks
    ``reserved`` for a request (lent on ``state.kv``) become its own as it joins. Returns
    how many joined."""
    kv, running, clock = state.kv, state.running, state.clock
    joined = 0
    kept = []
    waiting = state.waiting
    while waiting:
        seq = waiting[0]
        if seq.num_computed == 0:  # preempted here: recomputed through admission
            kept.append(waiting.popleft())
            continue
        if len(running) >= max_num_seqs:
            break
        lent = reserved.pop(seq.request_id, 0) if reserved else 0
        if lent:
            kv.give_back(lent)  # type: ignore[attr-defined]  # a LendingBlockManager
        if not kv.can_allocate(seq.request_id, seq.num_computed):
            break  # (a reserved request always fits: its blocks were just given back)
        waiting.popleft()
        kv.allocate(seq.request_id, seq.num_computed)
        running.append(seq)
        clock.join(seq)
        joined += 1
    waiting.extendleft(reversed(kept))
    return joined
