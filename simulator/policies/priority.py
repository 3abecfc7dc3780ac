"""Priority scheduling of the continuous policy (``scheduling = "priority"``).

Each request carries a priority class (``Sequence.priority``: lower is more urgent, as
vLLM's ``priority`` and SGLang's priority scheduling). Under ``scheduling = "priority"``:

- the waiting queue is kept ordered by ``(priority, arrival_s, request_id)``
  (:class:`PriorityWaiting`), so admission takes the most urgent first, FCFS within a
  class. A preempted request goes back to its place by that key, not to the head:
  vLLM v1's ``PriorityRequestQueue`` is a heap on ``(priority, arrival_time)``, and a
  preempted request is pushed back onto it (vllm/v1/core/sched/request_queue.py);
- a running request that needs a KV block none has evicts the *least urgent* running
  request, the max ``(priority, arrival_s)``: vLLM v1 ``Scheduler.schedule``
  (vllm/v1/core/sched/scheduler.py, ``max(self.running, key=lambda r: (r.priority,
  r.arrival_time))``) (``preemption.victim("priority", ...)``);
- before a step is built, the most urgent waiting request that cannot start (no KV room,
  or ``max_num_seqs`` running) evicts running requests of a strictly less urgent class,
  least urgent first, until it can: vLLM v0's ``_schedule_priority_preemption``
  (vllm/core/scheduler.py), which forces out lower-priority running groups for the
  waiting head (:func:`make_way`). v0 compares whole ``(priority, arrival_time)`` keys,
  so it also evicts a later arrival of the head's own class; here only a strictly less
  urgent class makes way, so one class alone is never reshuffled. vLLM v1 only preempts
  for KV growth; this is the one place the two differ.

Under ``admission = "no_evict"`` (TensorRT-LLM's GUARANTEED_NO_EVICT) nobody is evicted for
the head: that scheduler never takes back a running request's blocks, so the order of the
queue is all priority changes.

Victims are evicted by recompute, as everywhere in :mod:`simulator.policies.preemption`.
The default ``scheduling = "fcfs"`` never reaches this module: the replica's queue stays
a plain deque and every result stays as it was.
"""

from __future__ import annotations

from bisect import insort
from collections import deque
from collections.abc import Iterable
from typing import TYPE_CHECKING

from simulator.errors import ConfigError
from simulator.policies import admission as rule
from simulator.policies.preemption import victim
from simulator.policies.state import Sequence, ServerState

if TYPE_CHECKING:
    from simulator.policies.continuous import ContinuousPolicy

SCHEDULINGS = ("fcfs", "priority")


def urgency(seq: Sequence) -> tuple[int, float, int]:
    """The order of the priority queue: class, then arrival, then id (all ascending)."""
    return (seq.priority, seq.arrival_s, seq.request_id)


class PriorityWaiting(deque[Sequence]):
    """A waiting queue kept sorted by :func:`urgency`: ``append`` and ``appendleft``
    (arrivals, preemptions) both insert at the request's place; ``[0]`` and ``popleft``
    read the most urgent, as the FCFS deque's head. Insertion is O(log n) comparisons
    plus deque's O(n) insert (in C), paid only under priority scheduling."""

    def __init__(self, seqs: Iterable[Sequence] = ()) -> None:
        super().__init__(sorted(seqs, key=urgency))

    def append(self, seq: Sequence) -> None:
        """Insert ``seq`` after every request at least as urgent."""
        if not self or urgency(self[-1]) <= urgency(seq):
            super().append(seq)  # the common arrival: the newest of the least urgent class
        else:
            insort(self, seq, key=urgency)

    def appendleft(self, seq: Sequence) -> None:
        """A preempted request goes back to its place by urgency (vLLM v1)."""
        self.append(seq)


def ordered(state: ServerState) -> None:
    """Make ``state.waiting`` a :class:`PriorityWaiting` (once; later calls cost a check)."""
    if type(state.waiting) is not PriorityWaiting:
        state.waiting = PriorityWaiting(state.waiting)


def make_way(policy: ContinuousPolicy, state: ServerState) -> list[Sequence]:
    """Evict running requests of a less urgent class while the most urgent waiting one
    cannot start; the victims, in eviction order (see the module docstring).

    "Cannot start": ``max_num_seqs`` are running, or the KV cache (less the watermark)
    cannot hold its first chunk (its whole prompt without chunked prefill). Prefix-cache
    hits and the stack's admission rule are not counted, so this may evict one request
    more than admission then needs; a request admission would refuse evicts nobody.
    """
    evicted: list[Sequence] = []
    if policy.admission == "no_evict":
        return evicted  # it never takes blocks back: the queue's order alone
    waiting, running, kv = state.waiting, state.running, state.kv
    watermark = int(policy.kv_watermark * kv.num_blocks)  # as admit_fcfs
    while waiting and running:
        head = waiting[0]
        if rule.refusal(policy, head):
            break  # admission rejects it: nobody makes way for it
        n = head.pending
        if policy.chunked_prefill:
            n = min(n, policy.max_num_batched_tokens)
        if len(running) < policy.max_num_seqs and kv.can_allocate(head.request_id, n,
                                                                  watermark):
            break
        out = victim("priority", running)
        if out.priority <= head.priority:
            break  # nobody less urgent is running: the head waits its turn
        state.preempt(out)
        evicted.append(out)
    return evicted


def priority_first(policy: ContinuousPolicy, state: ServerState) -> list[Sequence]:
    """Under priority scheduling, before each step: order the queue, make way for its head."""
    ordered(state)
    return make_way(policy, state)


def check_scheduling(policy: ContinuousPolicy) -> None:
    """ConfigError unless ``policy.scheduling`` is one of :data:`SCHEDULINGS`."""
    if policy.scheduling not in SCHEDULINGS:
        raise ConfigError(f"policy.scheduling = {policy.scheduling!r}: must be one of "
                          f"{list(SCHEDULINGS)}")
