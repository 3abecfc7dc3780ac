"""Lazy decode counters: a decode step over every decoding request in O(1), not O(requests).

Near saturation most continuous-batching steps decode one token for each of the ~60
running requests. Walking them in Python every step dominated the simulator's cost, so
the running requests that are decoding share one clock instead: a pure-decode step is
``clock.steps += 1``, and per-request counters are written back only when a request
leaves the clock (it finishes, is preempted, or an eager step needs its true values).
"""

from __future__ import annotations

import heapq
from typing import TYPE_CHECKING

from simulator.kvcache import BlockManager
from simulator.policies.identity import remove_same

if TYPE_CHECKING:
    from simulator.policies.state import Sequence


class DecodeClock:
    """One replica's decoding requests (the *members*) advanced together.

    Invariants (between steps, with no padded batch in flight; ``ServerState.check``
    asserts them):

    - The members are exactly the running sequences that are decoding, and a member has
      ``seq.clock is self``. A member's true counters are its bases plus ``steps``::

          num_computed  = seq.computed_base  + steps
          num_generated = seq.generated_base + steps

    - ``size`` members; ``base_sum`` is the sum of their ``computed_base``, so the next
      decode step attends ``C = base_sum + size * (steps + 1)`` tokens.
    - ``by_residue[q]`` members have ``-computed_base % block_size == q``, and
      ``by_residue[q + block_size]`` too (the list holds the counts twice over, so the
      rotation :meth:`openings_after` returns is one slice). The step from
      ``steps`` to ``steps + 1`` writes each member's token at position
      ``computed_base + steps``, which opens a KV block exactly for the members with
      ``q == steps % block_size``.
    - ``finishing[f]``: the members (in join order) that emit their last token at the step
      that takes ``steps`` to ``f`` (``f = output_tokens - generated_base``); ``finish_heap``
      holds every key of ``finishing`` (and possibly stale keys, skipped on reading).
    - ``kv.used`` counts the members' blocks exactly, but the block manager's per-sequence
      record of a member is stale (the blocks it held when it joined) until
      :meth:`settle`.
    """

    __slots__ = ("steps", "size", "base_sum", "block_size", "by_residue", "finishing",
                 "finish_heap", "rejoin")

    def __init__(self, block_size: int) -> None:
        self.block_size = block_size
        self.steps = 0  # decode steps the members took together
        self.size = 0
        self.base_sum = 0
        self.by_residue = [0] * (2 * block_size)
        self.finishing: dict[int, list[Sequence]] = {}
        self.finish_heap: list[int] = []
        self.rejoin = False  # an eager step is in flight: every decoder rejoins after it

    def join(self, seq: Sequence) -> None:
        """Make the decoding sequence ``seq`` a member (its counters are exact now)."""
        base = seq.computed_base - self.steps
        seq.computed_base = base
        seq.generated_base -= self.steps
        seq.clock = self
        self.size += 1
        self.base_sum += base
        q = -base % self.block_size
        self.by_residue[q] += 1
        self.by_residue[q + self.block_size] += 1
        finish = seq.output_tokens - seq.generated_base
        bucket = self.finishing.get(finish)
        if bucket is None:
            self.finishing[finish] = [seq]
            heapq.heappush(self.finish_heap, finish)
        else:
            bucket.append(seq)

    def leave(self, seq: Sequence, kv: BlockManager) -> None:
        """Write ``seq``'s counters and KV blocks back and take it off the clock."""
        base = seq.computed_base
        self.size -= 1
        self.base_sum -= base
        q = -base % self.block_size
        self.by_residue[q] -= 1
        self.by_residue[q + self.block_size] -= 1
        finish = seq.output_tokens - seq.generated_base
        bucket = self.finishing[finish]
        remove_same(bucket, seq)
        if not bucket:
            del self.finishing[finish]
        self._write_back(seq, kv)

    def _write_back(self, seq: Sequence, kv: BlockManager) -> None:
        seq.clock = None
        seq.computed_base += self.steps
        seq.generated_base += self.steps
        kv.settle(seq.request_id, seq.computed_base)

    def flush(self, running: list[Sequence], kv: BlockManager) -> None:
        """Write every member back (before an eager step); they rejoin after that step."""
        if self.size:
            for seq in running:
                if seq.clock is self:
                    self._write_back(seq, kv)
        self.steps = self.size = self.base_sum = 0
        self.by_residue = [0] * (2 * self.block_size)
        self.finishing.clear()
        self.finish_heap.clear()
        self.rejoin = True

    def rejoin_all(self, running: list[Sequence]) -> None:
        """After an eager step: every running sequence that decodes becomes a member."""
        self.rejoin = False
        for seq in running:
            if seq.clock is None and seq.decoding:
                self.join(seq)

    def context_tokens(self) -> int:
        """C of the next decode step over every member: tokens each attends, summed."""
        return self.base_sum + self.size * (self.steps + 1)

    def openings_now(self) -> int:
        """Members whose next token opens a KV block."""
        return self.by_residue[self.steps % self.block_size]

    def openings_after(self) -> list[int]:
        """``[t]``: members opening a block at their ``t``-th token after the next one
        (``kvcache.new_block_counts`` of their tokens cached after the next step)."""
        s = (self.steps + 1) % self.block_size
        return self.by_residue[s:s + self.block_size]

    def soonest_finish(self) -> tuple[int, int]:
        """(fewest tokens any member has left, this step's included; how many have that)."""
        heap, finishing = self.finish_heap, self.finishing
        while heap[0] not in finishing:
            heapq.heappop(heap)
        return heap[0] - self.steps, len(finishing[heap[0]])

    def next_step(self) -> tuple[int, int, int, int]:
        """The next decode step over every member (there is one): :meth:`openings_now`,
        :meth:`context_tokens` and :meth:`soonest_finish` in one call, for the policy's
        per-decision path."""
        steps = self.steps
        heap, finishing = self.finish_heap, self.finishing
        while heap[0] not in finishing:
            heapq.heappop(heap)
        soonest = heap[0]
        return (self.by_residue[steps % self.block_size],
                self.base_sum + self.size * (steps + 1), soonest - steps,
                len(finishing[soonest]))

    def advance(self, num_steps: int) -> list[Sequence]:
        """Take ``num_steps`` decode steps (no member finishes before the last); return the
        members that finish at the last one, still members, in join order."""
        self.steps += num_steps
        return self.finishing.get(self.steps, [])

    def tick(self) -> None:
        """Take one decode step that no member finishes at (:meth:`advance` without its
        list: a chunked run's step, policies/chunk_runs.py)."""
        self.steps += 1

    def release(self, done: list[Sequence], kv: BlockManager) -> None:
        """Take the members in ``done`` (all finishing now) off the clock and free their KV."""
        for seq in list(done):
            self.leave(seq, kv)
            kv.free(seq.request_id)

    def check(self, running: list[Sequence], kv: BlockManager) -> None:
        """Assert the invariants and make the block manager's records exact (tests)."""
        members = [s for s in running if s.clock is self]
        assert members == [s for s in running if s.decoding], "a decoder is off the clock"
        assert self.size == len(members)
        assert self.base_sum == sum(s.computed_base for s in members)
        residues = [0] * self.block_size
        for seq in members:
            residues[-seq.computed_base % self.block_size] += 1
            assert seq in self.finishing[seq.output_tokens - seq.generated_base]
            kv.settle(seq.request_id, seq.num_computed)
        assert residues + residues == self.by_residue
        assert sum(map(len, self.finishing.values())) == self.size
