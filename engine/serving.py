"""Replaying a request table through the real engine in real time (``--backend engine``).

Arrivals happen at their ``arrival_s`` on the wall clock (open loop), or ``think_s`` after
the client's previous request ended (closed loop); with ``max_concurrency = C`` an open
loop's request due while C are outstanding is sent when the first of them ends (as the
simulator does, simulator/driver.py ``Driver``). The engine keeps a *logical* time
``now`` exactly as the simulator does: a busy engine's next step starts where the last
one ended; an idle one starts at the arrival or timeout it waited for, even if the OS
woke it a little later (that lag is part of the step's measured duration). Requests are
admitted at step boundaries. So the step log's durations, fed to the simulator, replay
the same batches at the same times (tests/test_engine_serving.py,
``test_simulator_replays_engine_schedule_exactly``). Every request record names the
replica that served it (0: one engine is one replica), as the simulator's do.

Prompts of synthetic requests are random token ids drawn from ``(seed, request_id)``, so a
request gets the same prompt whether it runs alone or batched; a table with prefix
identity gives every request naming a segment the same ids for it
(engine/prefix_prompts.py), and ``prefix_caching`` reuses their KV as the simulator's
prefix cache says (engine/prefix_kv.py).
"""

from __future__ import annotations

import heapq
import math
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pandas as pd

from engine.core import EngineCore
from engine.models import EngineModel
from engine.prefix_prompts import SegmentPrompts
from simulator.cluster import SimResult
from simulator.policies import Policy, Sequence, Wait
from simulator.prefix_cache import PrefixBlockManager
from simulator.prefix_cache_run import block_manager, with_cached_tokens
from simulator.records import STEP_COLUMNS, empty_table, token_table
from simulator.served_requests import Arrivals, read_arrivals, request_records
from simulator.workload.prefixes import PrefixIdentity, PrefixSegments


@dataclass(slots=True)
class EngineRun:
    """What a replay produced: the simulator's result tables plus per-token data."""

    result: SimResult  # request records and step log (contract 4), as the simulator writes
    tokens: pd.DataFrame  # request_id, token_index, time_s: when each output token appeared
    outputs: dict[int, list[int]]  # request id -> generated token ids
    model: EngineModel  # the model that served them (reusable for the next run)
    forward_s: np.ndarray  # per step: seconds in the batch runner; the rest is loop overhead
    # per step, parts of forward_s (0 where not speculative): draft passes, verify pass
    draft_s: np.ndarray | None = None
    verify_s: np.ndarray | None = None
    # per speculative step: tokens each decode row emitted (ReplayAcceptance replays them)
    accepted: list[list[int]] | None = None


def prompt_ids(request_id: int, length: int, vocab_size: int, seed: int = 0) -> list[int]:
    """Deterministic random prompt ids for a synthetic request (0 is left for padding)."""
    rng = np.random.default_rng([seed, request_id])
    return rng.integers(1, vocab_size, size=length).tolist()


class _Arrivals:
    """Requests not yet sent, by due time (open loop), or per client (closed loop)."""

    def __init__(self, read: Arrivals, max_concurrency: int | None = None) -> None:
        if read.closed and max_concurrency is not None:
            raise ValueError(f"{max_concurrency=}: only for an open loop (arrival_s given)")
        # capped open loop: when each free slot was freed (a min-heap); None = no cap
        self.slots: list[float] | None = (
            None if max_concurrency is None else [0.0] * max_concurrency)
        self.heap: list[tuple[float, int, Sequence]] = []
        self.unsent = len(read.seqs)
        self.clients: dict[int, deque[tuple[Sequence, float]]] = {}
        self._held: list[tuple[float, Sequence]] = []  # sends due at a step's end (done)
        self._held_slots: list[float] = []  # slots freed at a step's end (capped open loop)
        if read.closed:
            for seq, t in zip(read.seqs, read.think_s, strict=True):
                self.clients.setdefault(seq.client_id, deque()).append((seq, t))
            for queue in self.clients.values():  # a first request's think_s: its start
                first, start_s = queue.popleft()
                self._push(start_s, first)
        else:
            for seq in read.seqs:
                self._push(seq.arrival_s, seq)

    def _push(self, due: float, seq: Sequence) -> None:
        heapq.heappush(self.heap, (due, seq.request_id, seq))

    def next_due(self) -> float:
        """When the next request is sent (inf if none is scheduled, or every slot is busy:
        then the next send follows a finish)."""
        if not self.heap or self.slots == []:
            return math.inf
        return self.heap[0][0] if self.slots is None else max(self.heap[0][0], self.slots[0])

    def pop_due(self, now: float) -> list[Sequence]:
        """Requests due at or before ``now``, with their arrival times set."""
        out = []
        while self.next_due() <= now:
            due, _, seq = heapq.heappop(self.heap)
            if self.slots is not None:  # sent when both due and given a slot
                due = max(due, heapq.heappop(self.slots))
            seq.arrival_s = due
            out.append(seq)
        self.unsent -= len(out)
        return out

    def done(self, seq: Sequence, now: float) -> None:
        """A request ended: its client sends the next one after thinking, or (capped open
        loop) its slot frees. A send due at once (no think time, or a waiting request
        given the freed slot) is held until the next schedule has been decided, as the
        simulator's driver sends it through an event of its own after the step's end
        (simulator/driver.py ``_send_later``): it joins at the following step boundary."""
        end = seq.finish_s if not math.isnan(seq.finish_s) else now
        if self.slots is not None:
            self._held_slots.append(end)
        queue = self.clients.get(seq.client_id)
        if queue:
            nxt, think = queue.popleft()
            if think <= 0:
                self._held.append((end, nxt))
            else:
                self._push(end + think, nxt)

    def release_held(self) -> None:
        """The sends :meth:`done` held (the next schedule has been decided)."""
        for due, seq in self._held:
            self._push(due, seq)
        if self.slots is not None:
            for freed in self._held_slots:
                heapq.heappush(self.slots, freed)
        self._held.clear()
        self._held_slots.clear()


def replay(table: pd.DataFrame, em: EngineModel, policy: Policy, kv_blocks: int, *,
           block_size: int = 16, horizon_s: float | None = None, seed: int = 0,
           prompts: dict[int, list[int]] | None = None,
           progress: Callable[[int, int], None] | None = None,
           max_concurrency: int | None = None, draft: EngineModel | None = None,
           segments: PrefixSegments | None = None, prefix_caching: bool = False) -> EngineRun:
    """Serve ``table`` (contract 1) on ``em`` with ``policy`` in real time; at most
    ``max_concurrency`` requests in flight when given (open loop); ``draft`` proposes the
    tokens of a speculating policy (engine/speculative.py). ``segments``: the table's
    prefix identity (its segment columns slice them): requests naming a segment get the
    same ids for it (engine/prefix_prompts.py); ``prefix_caching`` reuses the KV of cached
    blocks as the simulator's manager says (engine/prefix_kv.py) and records each
    request's ``cached_tokens``."""
    read = read_arrivals(table)
    seqs = read.seqs
    arrivals = _Arrivals(read, max_concurrency)
    t0 = time.perf_counter()

    def clock() -> float:
        return time.perf_counter() - t0

    done_count = [0]
    now = 0.0

    def on_done(seq: Sequence) -> None:
        if shared is not None:  # a session's next turn reads this answer (prefix_prompts.py)
            shared.finished(seq.request_id, seq.prompt_tokens,
                            core.tokens[seq.request_id][seq.prompt_tokens:])
        arrivals.done(seq, now)
        done_count[0] += 1
        if progress is not None:
            progress(done_count[0], len(seqs))

    capacity = max((s.prompt_tokens + s.output_tokens for s in seqs), default=1)
    kv = block_manager(kv_blocks, block_size,  # the engine's KV store mirrors every block
                       PrefixIdentity(table, segments) if prefix_caching else None,
                       mirrored=True)
    shared = None if segments is None else SegmentPrompts(table, segments, em.vocab_size, seed)
    core = EngineCore(em, policy, kv, capacity=capacity,
                      clock=clock, on_done=on_done, draft=draft)

    def admit(until: float) -> None:
        for seq in arrivals.pop_due(until):
            ids = (prompts or {}).get(seq.request_id) or (
                shared.prompt(seq.request_id, seq.prompt_tokens) if shared is not None
                else prompt_ids(seq.request_id, seq.prompt_tokens, em.vocab_size, seed))
            core.arrive(seq, ids)
        if arrivals.unsent == 0:
            core.state.arrivals_done = True

    while True:
        admit(now)
        if horizon_s is not None and now >= horizon_s:
            break
        decision = core.schedule(now)
        arrivals.release_held()  # sent at the last step's end: seen from the next decision
        if isinstance(decision, Wait):
            until = decision.until if decision.until is not None else math.inf
            target = min(until, arrivals.next_due())
            if horizon_s is not None:
                target = min(target, horizon_s)
            if math.isinf(target):
                break  # nothing runs and nothing will arrive
            time.sleep(max(0.0, target - clock()))
            now = target
            continue
        core.run(decision, now, admit)
        now = core.last_end
    steps = core.log.table() if len(core.log) else empty_table(STEP_COLUMNS)
    records = request_records(core.arrived)
    stats = kv.stats if isinstance(kv, PrefixBlockManager) else None
    result = SimResult(requests=records if stats is None else with_cached_tokens(records, stats),
                       steps=steps, prefix_stats=stats,
                       kv_blocks_total=kv_blocks, num_replicas=1, num_events=len(core.log),
                       wall_s=clock())
    outputs = {s.request_id: core.tokens[s.request_id][s.prompt_tokens:] for s in core.arrived}
    return EngineRun(result, token_table(core.token_times), outputs, em,
                     np.asarray(core.forward_s, dtype=np.float64),
                     np.asarray(core.draft_s, dtype=np.float64),
                     np.asarray(core.verify_s, dtype=np.float64), core.accepted)
