"""Decode-side KV reserved before the prompt's KV is sent (``disaggregated.decode_reserve``).

Real disaggregated stacks do not push KV at a decode server that has no room for it:

- ``"before_transfer"`` (default; vLLM v1's P/D connectors): the prefill replica keeps
  the prompt's KV after its prefill; the decode side allocates the prompt's blocks when
  its scheduler admits the request, and only then pulls the KV (vllm/v1/core/sched/
  scheduler.py, ``WAITING_FOR_REMOTE_KVS``). Until the decode replica has the blocks,
  the prompt's KV stays lent on the prefill replica.
- ``"before_prefill"`` (SGLang's PD disaggregation): the decode server pre-allocates the
  prompt's KV before the prefill server runs the prompt (python/sglang/srt/disaggregation/
  decode.py, ``DecodePreallocQueue``); the request waits for it before prefilling.
- ``"on_arrival"``: no reservation: the KV crosses at once and the request waits at the
  decode replica's queue head until blocks are free there (servesim before stop 21).

:class:`DecodeReservations` holds one first-come-first-served queue per decode replica.
Reservations are granted by the decode replica's own scheduler, at its decisions (the
decode policy, ``DecodeArrivals``, grants before it schedules), so a decode run in
flight never loses blocks it was planned with; asking wakes the replica as an arrival
does (an idle one decides at once, a busy one at its step's end). A reservation lends the
prompt's blocks on that replica (``LendingBlockManager.lend``: taken, held by no running
request); ``DecodeArrivals`` turns them into the request's own blocks when it joins the
batch.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable

from simulator.policies import Sequence
from simulator.replica import Replica


class DecodeReservations:
    """Per decode replica, the requests waiting for their prompt's blocks, in order."""

    __slots__ = ("queues", "reserved", "dest_of")

    def __init__(self, decode_pool: list[Replica], reserved: dict[int, int]) -> None:
        self.queues: dict[int, deque[tuple[Sequence, int, Callable[[], None]]]] = {
            r.index: deque() for r in decode_pool}
        # request id -> blocks lent for it on its decode replica; shared with the decode
        # policy (DecodeArrivals), which takes them over when the request joins its batch
        self.reserved = reserved
        self.dest_of: dict[int, Replica] = {}  # request id -> its decode replica, once granted

    def ask(self, dest: Replica, seq: Sequence, go: Callable[[], None]) -> None:
        """Reserve ``seq``'s prompt blocks on ``dest``, then call ``go`` (at once, or when
        blocks come free there). A request that can never fit on ``dest`` goes at once
        without a reservation: the decode replica refuses it on arrival, naming why."""
        kv = dest.state.kv
        if kv.blocks_for(seq.prompt_tokens + seq.output_tokens) > kv.num_blocks:
            self.dest_of[seq.request_id] = dest  # nothing lent: the replica refuses it
            go()
            return
        self.queues[dest.index].append((seq, kv.blocks_for(seq.prompt_tokens), go))
        dest._wake()  # its scheduler grants it at its next decision

    def grant(self, dest: Replica) -> None:
        """Grant ``dest``'s waiting reservations in order while its free blocks allow
        (called by its decode policy as it schedules)."""
        queue = self.queues[dest.index]
        if not queue:
            return
        # preempted requests (recomputing: num_computed 0) go first, as at the front of
        # vLLM's waiting queue: nothing is granted while one waits
        if not all(s.num_computed for s in dest.state.waiting):
            return
        kv = dest.state.kv
        while queue and queue[0][1] <= kv.num_free:
            seq, blocks, go = queue.popleft()
            kv.lend(blocks)  # type: ignore[attr-defined]  # a LendingBlockManager
            self.reserved[seq.request_id] = blocks
            self.dest_of[seq.request_id] = dest
            go()

    def release(self, seq: Sequence) -> None:
        """``seq`` is gone (finished, or refused before it used its blocks): forget it, and
        give back its blocks if its decode replica has not taken them over yet."""
        dest = self.dest_of.pop(seq.request_id, None)
        lent = self.reserved.pop(seq.request_id, 0)
        if dest is not None and lent:
            dest.state.kv.give_back(lent)  # type: ignore[attr-defined]
            dest._wake()

    def waiting(self) -> int:
        """Requests still waiting for a reservation (0 at the end of a run that drained)."""
        return sum(len(q) for q in self.queues.values())
