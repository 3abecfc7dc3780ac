"""A live engine: one background thread serves requests as they arrive (the HTTP server's core).

Callers on any thread :meth:`LiveEngine.submit` a prompt with a :class:`RequestSink`; the
engine thread owns the :class:`~engine.core.EngineCore` and runs the simulator's loop::

    drain new requests into core.arrive -> core.schedule(now) -> core.run(batch, now, drain)

Time is handled exactly as in :func:`engine.serving.replay`, so a live run's records and
step log can be replayed by the simulator like an offline one:

- a request's ``arrival_s`` is when it reached the server (seconds since the engine was
  built; the HTTP layer stamps it before reading the body), and requests are admitted
  at step boundaries, in arrival order, never before they arrived;
- the engine keeps a *logical* ``now``: a busy engine's next step starts where the last
  one ended; an idle one starts at the arrival or policy timeout it waited for, even if
  the OS woke it a little later (that lag is part of the step's measured duration).

The sink's callbacks run on the engine thread, so they must be quick and thread-safe
(the HTTP layer hands each event to its event loop with ``call_soon_threadsafe``).

Memory is bounded by the KV budget, ``kv_blocks x block_size`` token positions. The slot
cache (engine/slot_cache.py) gives each request in the core a row as long as the longest
of them, so a request is handed to the core only while ``(requests in the core + 1) x
(longest prompt + max_tokens among them and it)`` stays within the budget; until then it
waits, in arrival order (one that does not fit holds back those behind it, so a long
request is not starved). A request longer than the whole budget goes to the core at
once, which rejects it (``needs N KV blocks ...; the replica has M``): the HTTP layer
answers 400 and the records keep it as ``rejected``.

A request that a stop string ended (:meth:`LiveEngine.end_early`) leaves the core the
same way but is recorded as ``finished``, its ``output_tokens`` the tokens it generated.
A request whose client went away (:meth:`LiveEngine.cancel`) is dropped from the queue or
the core, its KV blocks and slot freed, and recorded with status ``aborted``.

The records are bounded too: at most ``keep_records`` requests' records (and their token
times and step-log rows) stay in memory; older ended ones go to ``spill_to`` or are
dropped and counted (engine/server/record_keeper.py).
"""

from __future__ import annotations

import bisect
import math
import queue
import sys
import threading
import time
import traceback
from dataclasses import dataclass
from pathlib import Path

from engine.core import EngineCore
from engine.models import EngineModel
from engine.server.live_api import (
    EngineUnavailable,
    Gauges,
    RequestSink,
    Snapshot,
)
from engine.server.record_keeper import DEFAULT_KEEP_RECORDS, Evicted, RecordKeeper
from engine.server.record_spill import RecordSpill
from engine.server.records import mark_aborted
from simulator.kvcache import BlockManager
from simulator.policies import Policy, Sequence, Wait
from simulator.records import token_table
from simulator.served_requests import request_records


@dataclass(slots=True, frozen=True)
class _Cancel:
    request_id: int
    reason: str
    early: bool = False  # a stop string ended it: a finished request, not an aborted one


@dataclass(slots=True)
class _Submission:
    seq: Sequence
    prompt_ids: list[int]
    sink: RequestSink


class LiveEngine:
    """An :class:`EngineCore` run by one background thread; see the module docstring."""

    def __init__(self, em: EngineModel, policy: Policy, kv_blocks: int, *,
                 block_size: int = 16, capacity: int = 256,
                 keep_records: int = DEFAULT_KEEP_RECORDS,
                 spill_to: Path | None = None) -> None:
        spill = None if spill_to is None else RecordSpill(spill_to)
        if spill is not None:
            spill.check()
        self.keeper = RecordKeeper(keep_records, spill)
        self.kv_blocks = kv_blocks
        self.block_size = block_size
        self.max_request_tokens = kv_blocks * block_size  # the KV budget, in positions
        self._t0 = time.perf_counter()
        self.core = EngineCore(em, policy, BlockManager(kv_blocks, block_size),
                               capacity=capacity, max_cache_positions=self.max_request_tokens,
                               clock=self.clock, on_token=self._on_token,
                               on_done=self._on_done)
        self.gauges = Gauges()
        self.error: BaseException | None = None  # why the engine thread died, if it did
        self._inbox: queue.SimpleQueue[_Submission | _Cancel | None] = queue.SimpleQueue()
        self._pending: list[_Submission] = []  # taken from the inbox, by arrival; not arrived
        self._sinks: dict[int, RequestSink] = {}  # engine thread only
        self._aborted: set[int] = set()  # requests whose client left before they ended
        self._stopped: set[int] = set()  # requests a stop string ended (end_early)
        self._lock = threading.Lock()  # held by the engine thread while it touches the core
        self._readers = 0  # snapshot() calls waiting for the lock (the engine lets them in)
        self._readers_lock = threading.Lock()
        self._no_readers = threading.Event()
        self._no_readers.set()
        self._submit_lock = threading.Lock()  # request ids, and nothing after shutdown
        self._next_id = 0
        self._closed = False  # set once the engine thread has ended: submit() refuses
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._main, name="servesim-engine", daemon=True)

    def clock(self) -> float:
        """Seconds since the engine was built: the time base of its records."""
        return time.perf_counter() - self._t0

    @property
    def alive(self) -> bool:
        """The engine thread is running and has not failed."""
        return self._thread.is_alive() and self.error is None and not self._stop.is_set()

    def start(self) -> None:
        """Start the engine thread (once)."""
        if not self._thread.is_alive():
            self._thread.start()

    def stop(self, timeout_s: float = 30.0) -> None:
        """Stop after the current step; requests still in flight get ``sink.fail``."""
        self._stop.set()
        self._inbox.put(None)  # wake a waiting engine
        if self._thread.is_alive():
            self._thread.join(timeout_s)

    def submit(self, prompt_ids: list[int], max_tokens: int, sink: RequestSink,
               arrival_s: float | None = None) -> int:
        """Queue a request (any thread); return its request id. Raises EngineUnavailable.

        ``arrival_s`` (engine clock) is when the request reached the server, if the caller
        knows better than now (the HTTP layer stamps it before reading the body).
        """
        with self._submit_lock:
            if self.error is not None:
                raise EngineUnavailable(f"the engine failed: {self.error!r}")
            if self._closed or self._stop.is_set():
                raise EngineUnavailable("the engine is shutting down")
            rid = self._next_id
            self._next_id += 1
            now = self.clock()
            seq = Sequence(rid, now if arrival_s is None else min(arrival_s, now),
                           len(prompt_ids), max_tokens)
            seq.replica = 0
            self._inbox.put(_Submission(seq, list(prompt_ids), sink))
        return rid

    def cancel(self, request_id: int, reason: str = "aborted: the client went away") -> None:
        """Stop working on a request (any thread): it is recorded with status ``aborted``
        and ``reason``, and its sink gets ``aborted``. A request that already ended is left
        as it is."""
        self._inbox.put(_Cancel(request_id, reason))

    def end_early(self, request_id: int) -> None:
        """Stop generating for a request whose output a stop string ended (any thread): it
        is recorded as ``finished`` with the tokens it generated (``output_tokens`` is
        lowered to that count) and its sink gets ``done``. A row of a padded batch runs
        to its batch's end, as for :meth:`cancel`."""
        self._inbox.put(_Cancel(request_id, "stopped: a stop string ended the output", True))

    def snapshot(self) -> Snapshot:
        """Request records, step log and token times so far (waits for the current step)."""
        with self._readers_lock:
            self._readers += 1
            self._no_readers.clear()
        try:
            with self._lock:
                core = self.core
                requests = mark_aborted(request_records(list(core.arrived)),
                                         self._aborted)
                steps = self.keeper.steps(core)
                tokens = token_table(core.token_times)
                now = self.clock()
                spilled, dropped = self.keeper.spilled, self.keeper.dropped
        finally:
            with self._readers_lock:
                self._readers -= 1
                if self._readers == 0:
                    self._no_readers.set()
        return Snapshot(requests, steps, tokens, self.kv_blocks, now, spilled, dropped)

    # --- the engine thread -------------------------------------------------------------

    def _main(self) -> None:
        try:
            self._loop()
        except Exception as e:  # reported to every waiting request, and on stderr
            self.error = e
            print("servesim: the engine thread failed:", file=sys.stderr)
            traceback.print_exc()
            self._fail_all(f"the engine failed: {e!r}")
            return
        self._fail_all("the server is shutting down")

    def _loop(self) -> None:
        core, now = self.core, 0.0
        while not self._stop.is_set():
            with self._lock:
                self._admit(now)
                decision = core.schedule(now)
                if not isinstance(decision, Wait):
                    core.run(decision, now, self._admit)
                    now = core.last_end
                self._publish()
                evicted = self._evict()  # counted at once; a snapshot adds up
            if evicted is not None:  # disk writes outside the lock
                self.keeper.write(evicted)
            self._no_readers.wait()  # a busy engine would re-take the lock before a reader
            if isinstance(decision, Wait):
                now = self._wait(now, decision.until)

    def _admit(self, until: float) -> None:
        """Hand the core every request that arrived by ``until``, in arrival order."""
        while True:
            try:
                item = self._inbox.get_nowait()
            except queue.Empty:
                break
            if item is not None:
                self._take(item)
        while self._pending and self._pending[0].seq.arrival_s <= until and self._fits():
            sub = self._pending.pop(0)
            self._sinks[sub.seq.request_id] = sub.sink
            self.core.arrive(sub.seq, sub.prompt_ids)

    def _fits(self) -> bool:
        """The first pending request can join the core within the KV budget (module
        docstring): rows x longest, counting every request the core holds."""
        seq = self._pending[0].seq
        total = seq.prompt_tokens + seq.output_tokens
        state = self.core.state
        held = [*state.waiting, *state.running]
        if not held or total > self.max_request_tokens:  # alone, or rejected at once
            return True
        longest = max(total, max(s.prompt_tokens + s.output_tokens for s in held))
        return (len(held) + 1) * longest <= self.max_request_tokens

    def _wait(self, now: float, until: float | None) -> float:
        """Block until ``until`` or the next arrival; return the logical time to wake at."""
        deadline = math.inf if until is None else until
        if self._pending and self._fits():  # already here, stamped after `now`
            return max(now, min(deadline, self._pending[0].seq.arrival_s))
        timeout = None if until is None else max(0.0, until - self.clock())
        try:
            item = self._inbox.get(timeout=timeout)
        except queue.Empty:
            return max(now, deadline)
        if item is None:  # stop() woke us
            return now
        self._take(item)
        if not self._pending or not self._fits():  # a cancellation, or it must wait
            return max(now, min(deadline, self.clock()))
        return max(now, min(deadline, self._pending[0].seq.arrival_s))

    def _take(self, item: _Submission | _Cancel) -> None:
        """Keep pending requests in arrival order (stamps can come out of inbox order);
        carry out a cancellation."""
        if isinstance(item, _Submission):
            bisect.insort(self._pending, item, key=lambda s: s.seq.arrival_s)
            return
        if item.early:  # it emitted a token, so it is in the core (or already ended)
            if item.request_id in self._sinks:
                self._stopped.add(item.request_id)
                self.core.abort(item.request_id, item.reason)
            return
        for sub in self._pending:
            if sub.seq.request_id == item.request_id:  # not in the core yet: it never will be
                self._pending.remove(sub)
                sub.seq.reason = item.reason
                self.core.arrived.append(sub.seq)
                self._aborted.add(sub.seq.request_id)
                sub.sink.aborted(sub.seq)
                return
        if item.request_id in self._sinks:  # in the core and not ended
            self._aborted.add(item.request_id)
            # False for a row of a padded batch: it ends with its batch, still aborted.
            self.core.abort(item.request_id, item.reason)

    def _evict(self) -> Evicted | None:
        """Take the oldest ended requests' records past the bound (module docstring)."""
        since = self._pending[0].seq.arrival_s if self._pending else math.inf
        return self.keeper.take(self.core, lambda rid: rid not in self._sinks,
                                self._aborted, since)

    def _publish(self) -> None:
        state = self.core.state
        waiting = len(state.waiting) + len(self._pending) + self._inbox.qsize()
        self.gauges = Gauges(len(state.running), waiting, state.kv.used)

    def _on_token(self, seq: Sequence, token_id: int, time_s: float) -> None:
        self._sinks[seq.request_id].token(seq, token_id, time_s)

    def _on_done(self, seq: Sequence) -> None:
        self._publish()  # the step is applied: a client that reads /metrics next sees it
        sink = self._sinks.pop(seq.request_id)
        if seq.request_id in self._stopped:
            self._stopped.discard(seq.request_id)
            self._finished_early(seq)
        if seq.request_id in self._aborted:
            sink.aborted(seq)
        else:
            sink.done(seq)
        self.core.forget_tokens(seq.request_id)  # streamed already; keep the server's memory flat

    def _finished_early(self, seq: Sequence) -> None:
        """A stop string ended ``seq``: it finished with the tokens it generated."""
        seq.reason = ""
        seq.output_tokens = seq.num_generated
        times = self.core.token_times.get(seq.request_id)
        if times:
            seq.finish_s = times[-1]

    def _fail_all(self, message: str) -> None:
        sinks = list(self._sinks.values()) + [s.sink for s in self._pending]
        with self._submit_lock:  # nothing can be submitted after this
            self._closed = True
            while True:
                try:
                    item = self._inbox.get_nowait()
                except queue.Empty:
                    break
                if isinstance(item, _Submission):
                    sinks.append(item.sink)
        self._sinks.clear()
        self._pending.clear()
        for sink in sinks:
            sink.fail(message)

