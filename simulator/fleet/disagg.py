"""Disaggregated serving at run time: a prefill pool, a decode pool and KV transfers.

:class:`DisaggFleet` stands where :class:`~simulator.fleet.fleet.Fleet` stands for the
driver (simulator/driver.py): it routes each arriving request to a prefill replica,
which computes the prompt and emits the first token (the request runs there as a copy
with ``output_tokens = 1``). The prompt's KV (``kv_bytes_per_token x prompt`` bytes)
then waits for its link (one per prefill replica, or one for the pool; a link carries one
transfer at a time, first come first served), crosses it in ``latency + bytes /
(bandwidth x lanes)``, and the prefill replica's blocks are freed when it ends. The
request then joins a decode replica (picked when its transfer starts) with its prompt's
KV in place (simulator/fleet/disagg_kv.py) and decodes the rest there.

TTFT: the first token reaches the client when the transfer ends, as in SGLang's PD
disaggregation, where the decode server streams every token, the first one included
(it comes with the KV; python/sglang/srt/disaggregation/decode.py). ``first_token_s`` is
therefore the transfer's end and TTFT includes the wait for the link and the transfer;
the prefill's own end is in the record's ``prefill_done_s``. A request whose output is
one token ends at its prefill (nothing to transfer).

Decode KV is reserved before it is sent (``DisaggSpec.decode_reserve``,
simulator/fleet/disagg_reserve.py): by default the transfer starts only once the decode
replica has lent the prompt's blocks (the prompt's KV stays on the prefill replica
meanwhile), or, as SGLang, before the prefill runs; the wait is the record's
``kv_reserve_wait_s`` and is part of TTFT.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
import simpy

from simulator.fleet.disagg_kv import DecodeArrivals, LendingBlockManager
from simulator.fleet.disagg_reserve import DecodeReservations
from simulator.fleet.disagg_spec import DisaggSpec, PoolSpec
from simulator.policies import Policy, Sequence
from simulator.replica import Replica
from simulator.router import make_router


@dataclass(slots=True)
class Transfers:
    """Every KV transfer of a run, one entry per request transferred, in start order."""

    request_id: list[int] = field(default_factory=list)
    prefill_replica: list[int] = field(default_factory=list)
    prefill_done_s: list[float] = field(default_factory=list)  # end of its prefill step
    wait_s: list[float] = field(default_factory=list)  # waiting for the link
    transfer_s: list[float] = field(default_factory=list)  # on the link
    num_bytes: list[int] = field(default_factory=list)
    reserve_wait_s: list[float] = field(default_factory=list)  # for decode-side blocks
    link_busy_s: list[float] = field(default_factory=list)  # per link: time carrying KV


@dataclass(slots=True, frozen=True)
class ReplicaOptions:
    """How the driver runs every replica (the same as for an aggregated fleet)."""

    fast_forward: bool = True
    check_invariants: bool = False
    step_log: str = "full"
    horizon_s: float | None = None
    max_step_rows: int | None = None  # over all replicas


class _PrefillDoor:
    """What the driver submits a routed request to: its prefill replica's front."""

    __slots__ = ("fleet", "replica")

    def __init__(self, fleet: DisaggFleet, replica: Replica) -> None:
        self.fleet, self.replica = fleet, replica

    def submit(self, seq: Sequence) -> None:
        self.fleet.prefill(seq, self.replica)


class DisaggFleet:
    """Prefill pool, decode pool and links (module docstring); replicas are indexed
    prefill first (0 .. P-1), then decode (P .. P+D-1)."""

    scaler = None  # no autoscaler with [disaggregated]

    def __init__(self, env: simpy.Environment, spec: DisaggSpec,
                 on_done: Callable[[Sequence], None], options: ReplicaOptions,
                 block_size: int) -> None:
        self.env, self.spec, self.on_done = env, spec, on_done
        self._block_size = block_size  # tokens per KV block, both pools
        self._reserved_blocks: dict[int, int] = {}  # request id -> blocks lent on its decode
        total = spec.prefill.replicas + spec.decode.replicas
        rows = None if options.max_step_rows is None else max(1, options.max_step_rows // total)
        self.prefill_pool = [self._replica(i, spec.prefill, self._prefilled, options, rows,
                                           False) for i in range(spec.prefill.replicas)]
        p = spec.prefill.replicas
        self.decode_pool = [self._replica(p + i, spec.decode, self._decoded, options, rows,
                                          True) for i in range(spec.decode.replicas)]
        self._reservations = DecodeReservations(self.decode_pool, self._reserved_blocks)
        self._reserved_s: dict[int, float] = {}  # before_prefill: when the grant came
        self.replicas = [*self.prefill_pool, *self.decode_pool]
        self._doors = [_PrefillDoor(self, r) for r in self.prefill_pool]
        self._prefill_router = make_router(spec.prefill.router)
        self._decode_router = make_router(spec.decode.router)
        self.link_free_s = [0.0] * spec.num_links  # when each link is next free (FIFO)
        self.transfers = Transfers(link_busy_s=[0.0] * spec.num_links)
        self._real: dict[int, Sequence] = {}  # request id -> the request, while it prefills
        self.num_events = 0

    def _replica(self, index: int, pool: PoolSpec, on_done: Callable[[Sequence], None],
                 options: ReplicaOptions, rows: int | None, decode: bool) -> Replica:
        policy: Policy = pool.policy
        holder: list[Replica] = []
        if decode:  # reservations granted, then arrived KV joins the batch, first
            policy = DecodeArrivals(pool.policy, pool.policy.max_num_seqs,
                                    self._reserved_blocks,
                                    lambda: self._reservations.grant(holder[0]))
        kv = LendingBlockManager(pool.kv_blocks, self._block_size)
        replica = Replica(self.env, index, policy, pool.cost, kv,
                          on_done=on_done, fast_forward=options.fast_forward,
                          check_invariants=options.check_invariants,
                          step_log=options.step_log, horizon_s=options.horizon_s,
                          max_step_rows=rows)
        holder.append(replica)
        return replica

    def route(self, seq: Sequence) -> _PrefillDoor:
        """The prefill replica ``seq`` goes to (there is no front door here)."""
        return self._doors[self._prefill_router.pick(self.prefill_pool, seq)]

    def prefill(self, seq: Sequence, replica: Replica) -> None:
        """Send ``seq``'s prompt to ``replica`` as a copy that stops at its first token
        (with ``decode_reserve = "before_prefill"``, once its decode blocks are reserved)."""
        copy = Sequence(seq.request_id, seq.arrival_s, seq.prompt_tokens, 1,
                        client_id=seq.client_id)
        self._real[seq.request_id] = seq
        if self.spec.decode_reserve != "before_prefill" or seq.output_tokens == 1:
            replica.submit(copy)
            return
        dest = self.decode_pool[self._decode_router.pick(self.decode_pool, seq)]

        def go() -> None:
            self._reserved_s[seq.request_id] = self.env.now
            replica.submit(copy)
        self._reservations.ask(dest, seq, go)

    def _prefilled(self, copy: Sequence) -> None:
        """A prefill replica is done with ``copy``: refused, or its first token is out."""
        seq = self._real.pop(copy.request_id)
        seq.replica = copy.replica
        if copy.reason:
            seq.reason = copy.reason
            self._reserved_s.pop(seq.request_id, None)
            self._reservations.release(seq)
            self.on_done(seq)
            return
        seq.scheduled_s, seq.preemptions = copy.scheduled_s, copy.preemptions
        seq.num_computed, seq.num_generated = seq.prompt_tokens, 1
        now = self.env.now
        if seq.output_tokens == 1:  # nothing left to decode: it ends where it prefilled
            seq.first_token_s = seq.finish_s = now
            self.on_done(seq)
            return
        self._send(seq, self.prefill_pool[copy.replica], now)

    def _send(self, seq: Sequence, source: Replica, now: float) -> None:
        """Hold ``seq``'s KV on ``source`` and send it once its decode blocks are
        reserved (``decode_reserve``; at once with "on_arrival")."""
        kv = source.state.kv
        assert isinstance(kv, LendingBlockManager)
        blocks = kv.blocks_for(seq.prompt_tokens)
        kv.lend(blocks)
        mode = self.spec.decode_reserve
        if mode == "before_prefill":
            reserved_s = self._reserved_s.pop(seq.request_id)
            dest = self._reservations.dest_of[seq.request_id]
            self._transfer(seq, source, kv, blocks, dest, now, reserved_s - seq.arrival_s)
            return
        dest = self.decode_pool[self._decode_router.pick(self.decode_pool, seq)]
        if mode == "on_arrival":
            self._transfer(seq, source, kv, blocks, dest, now, 0.0)
            return
        self._reservations.ask(dest, seq, lambda: self._transfer(
            seq, source, kv, blocks, dest, now, self.env.now - now))

    def _transfer(self, seq: Sequence, source: Replica, kv: LendingBlockManager, blocks: int,
                  dest: Replica, done_s: float, reserve_wait_s: float) -> None:
        """Queue ``seq``'s KV on its link now; it joins ``dest`` when it is across."""
        spec = self.spec
        now = self.env.now
        link = source.index if spec.link_scope == "replica" else 0
        duration = spec.transfer_s(seq.prompt_tokens)
        start = max(now, self.link_free_s[link])
        end = start + duration
        self.link_free_s[link] = end
        t = self.transfers
        t.link_busy_s[link] += duration
        t.request_id.append(seq.request_id)
        t.prefill_replica.append(source.index)
        t.prefill_done_s.append(done_s)
        t.wait_s.append(start - now)
        t.transfer_s.append(duration)
        t.num_bytes.append(spec.kv_bytes(seq.prompt_tokens))
        t.reserve_wait_s.append(reserve_wait_s)
        self.num_events += 1
        self.env.timeout(end - now).callbacks.append(
            lambda _ev: self._arrive(seq, source, kv, blocks, dest, end))

    def _arrive(self, seq: Sequence, source: Replica, kv: LendingBlockManager, blocks: int,
                dest: Replica, end_s: float) -> None:
        """The transfer ended: the prefill side frees its blocks, the first token is out,
        and the request queues on its decode replica."""
        kv.give_back(blocks)
        # a prefill waiting for blocks may start now: wake the replica as an arrival does
        source._wake()
        seq.first_token_s = end_s
        dest.submit(seq)

    def _decoded(self, seq: Sequence) -> None:
        """A request left its decode replica (finished or refused): forget its
        reservation (given back if it never used it)."""
        self._reservations.release(seq)
        self.on_done(seq)

    def done(self, seq: Sequence) -> None:
        """Nothing to do: no autoscaler follows a disaggregated fleet."""

    def usage(self, horizon_s: float | None, all_done: bool) -> None:
        """No replica-seconds here: both pools serve throughout."""
        return None

    def columns(self, records: pd.DataFrame) -> pd.DataFrame:
        """``records`` with the transfer's columns: ``prefill_replica``, ``prefill_done_s``,
        ``kv_link_wait_s``, ``kv_transfer_s`` (wait + time on the link: TTFT's share) and
        ``kv_bytes`` (NaN / -1 / 0 for a request with no transfer)."""
        t = self.transfers
        at = pd.Index(np.asarray(t.request_id, dtype=np.int64))
        where = at.get_indexer(records["request_id"].to_numpy())
        found = where >= 0

        def pick(values: list, fill: float) -> np.ndarray:
            arr = np.asarray(values, dtype=float)
            out = np.full(len(records), fill)
            out[found] = arr[where[found]]
            return out

        wait, on_link = pick(t.wait_s, np.nan), pick(t.transfer_s, np.nan)
        return records.assign(
            kv_reserve_wait_s=pick(t.reserve_wait_s, np.nan),
            prefill_replica=pick(t.prefill_replica, -1).astype(np.int64),
            prefill_done_s=pick(t.prefill_done_s, np.nan),
            kv_link_wait_s=wait, kv_transfer_s=wait + on_link,
            kv_bytes=pick(t.num_bytes, 0).astype(np.int64))
