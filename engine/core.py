"""One engine replica: the simulator's policy schedules, real forward passes run the steps.

The loop is the simulator's (``schedule -> run -> complete``) with a model where the
simulator has a cost model::

    core = EngineCore(em, policy, BlockManager(blocks, 16))
    core.arrive(seq, prompt_ids)          # a request reaches the server
    decision = core.schedule(now)         # Batch | Wait, from the shared policy
    finished = core.run(decision, start)  # forward passes, then policies.complete()

Nothing here reads the clock except :meth:`run`, which stamps the step's end with the
``clock`` it was given; callers own time (a replay of a trace, or a live server).
"""

from __future__ import annotations

import time
from array import array
from collections.abc import Callable

from engine.models import TORCH_DTYPES, EngineModel
from engine.prefix_kv import PrefixKV
from engine.slot_cache import SlotCache
from engine.speculative import SpecDecoder
from engine.step_runner import BatchRunner, RowWork, batch_work, forward_groups
from simulator.kvcache import BlockManager
from simulator.policies import Batch, Policy, Sequence, ServerState, Wait, complete
from simulator.policies.step import decode_emitters
from simulator.prefix_cache import PrefixBlockManager
from simulator.speculative_stats import SpecStats
from simulator.steplog import StepLog

TokenCallback = Callable[[Sequence, int, float], None]  # (request, token id, time emitted)


class EngineCore:
    """A real-model replica driven by a shared policy (see the module docstring)."""

    def __init__(self, em: EngineModel, policy: Policy, kv: BlockManager, *,
                 capacity: int = 256, max_cache_positions: int | None = None,
                 clock: Callable[[], float] = time.perf_counter,
                 on_token: TokenCallback | None = None,
                 on_done: Callable[[Sequence], None] | None = None,
                 draft: EngineModel | None = None) -> None:
        self.em = em
        self.policy = policy
        self.state = ServerState(kv=kv)
        self.clock = clock  # end-of-step timestamps (the caller's time base)
        self.on_token = on_token
        self.on_done = on_done  # once per request that finishes or is rejected
        self.log = StepLog(0)
        spec = em.spec
        self.cache = SlotCache(spec.num_layers, spec.num_kv_heads, spec.head_dim,
                               capacity=max(1, capacity), dtype=TORCH_DTYPES[em.dtype],
                               device=em.device, max_positions=max_cache_positions)
        self.runner = BatchRunner(em, self.cache)
        # a prefix-caching manager: the engine keeps the KV of its cached blocks (prefix_kv.py)
        self.prefix: PrefixKV | None = None
        if isinstance(kv, PrefixBlockManager):
            self.prefix = PrefixKV(self.cache, kv)
            kv.listener = self.prefix
        # speculative batches (policy num_speculative_tokens > 0): the draft proposes, the
        # model verifies (engine/speculative.py); None: such a batch raises
        self.speculator = None if draft is None else SpecDecoder(self.runner, draft)
        self.spec_stats = SpecStats()  # drafts verified and tokens emitted, per row-step
        self.slots: list[Sequence] = []  # mirrors state.running, in order
        self.tokens: dict[int, list[int]] = {}  # request id -> prompt ids, then outputs
        # request id -> time of each output (8 bytes a token, where a list of floats takes 32)
        self.token_times: dict[int, array[float]] = {}
        self.arrived: list[Sequence] = []
        self.last_end = 0.0  # end of the last step run
        self.forward_s: list[float] = []  # per step: seconds in the runner (inputs + forwards)
        # per step, parts of forward_s: the draft's passes and the verify pass (0.0 on a step
        # that is not speculative); accepted: per speculative step, tokens each decode row
        # emitted (what simulator.speculative_acceptance.ReplayAcceptance replays)
        self.draft_s: list[float] = []
        self.verify_s: list[float] = []
        self.accepted: list[list[int]] = []
        self._forget: set[int] = set()  # finished, ids to drop once their slot is gone

    def arrive(self, seq: Sequence, prompt_ids: list[int]) -> bool:
        """A request reaches the server; False if it can never fit (then it is done)."""
        if len(prompt_ids) != seq.prompt_tokens:
            raise ValueError(f"request {seq.request_id}: {len(prompt_ids)} prompt ids for "
                             f"prompt_tokens={seq.prompt_tokens}")
        seq.replica = self.log.replica  # the records' replica column: this engine's
        self.arrived.append(seq)
        self.tokens[seq.request_id] = list(prompt_ids)
        self.token_times[seq.request_id] = array("d")
        if self.state.arrive(seq):
            return True
        self._done(seq)
        return False

    def schedule(self, now: float) -> Batch | Wait:
        """The policy's decision at ``now``; requests it rejects are reported done."""
        decision = self.policy.schedule(self.state, now)
        for seq in self.state.rejected:
            self._done(seq)
        self.state.rejected.clear()
        return decision

    def run(self, batch: Batch, start: float,
            arrivals: Callable[[float], None] | None = None) -> list[Sequence]:
        """Run ``batch`` (its step began at ``start``), apply it, log it; return what finished.

        ``arrivals(end)``, if given, hands over the requests that arrived during the step
        before it is logged, so the step's queue length counts them as the simulator does.
        """
        if self.prefix is not None:  # blocks cached while scheduling (a preempted request's)
            self.prefix.before_sync(self.slots)
        self._sync_slots()
        state = self.state
        emitted_count = decode_emitters(batch)
        slot_of = {s.request_id: i for i, s in enumerate(self.slots)}
        work = batch_work(batch, slot_of)
        padded = len(self.slots) if state.group is not None else None
        slot_tokens = [self.tokens[s.request_id] for s in self.slots]
        drafts = ({slot_of[s.request_id]: n for s, n in zip(batch.decode, batch.spec_drafts,
                                                             strict=True)}
                  if batch.spec_tokens else {})
        spec_rows = [w for w in work if w.slot in drafts]
        emitted: dict[int, list[int]] = {}
        f0 = time.perf_counter()
        late = set() if self.prefix is None else self.prefix.before_step(self.slots, work)
        for forward in forward_groups([w for w in work if w.slot not in drafts], padded, late):
            emitted.update((s, [t]) for s, t in self.runner.forward(forward, slot_tokens).items())
        self._speculate(spec_rows, drafts, slot_tokens, emitted)
        self.forward_s.append(time.perf_counter() - f0)
        end = self.clock()
        self.last_end = end
        for slot, new in emitted.items():
            seq = self.slots[slot]
            for token in new:
                self.tokens[seq.request_id].append(token)
                self.token_times[seq.request_id].append(end)
                if self.on_token is not None:
                    self.on_token(seq, token, end)
        accepted = None
        if batch.spec_tokens:
            accepted = [len(emitted[slot_of[s.request_id]]) for s in batch.decode]
            self.accepted.append(accepted)
            self.spec_stats.add(batch.spec_drafts, accepted)
        finished = complete(state, batch, start, end, accepted)
        if self.prefix is not None:  # before the slots change: store the blocks just filled
            self.prefix.after_step(self.slots, finished)
        if arrivals is not None:
            arrivals(end)
        self.log.add(start, end, batch.shape, emitted_count, len(state.running),
                     len(state.waiting), state.kv.used)
        self._sync_slots()
        for seq in finished:
            self._done(seq)
        return finished

    def _speculate(self, rows: list[RowWork], drafts: dict[int, int],
                   slot_tokens: list[list[int]], emitted: dict[int, list[int]]) -> None:
        """Run a speculative batch's decode ``rows`` (none: not speculative) into
        ``emitted``; log the step's draft and verify seconds."""
        if not rows:
            self.draft_s.append(0.0)
            self.verify_s.append(0.0)
            return
        if self.speculator is None:
            raise ValueError("the policy speculates (num_speculative_tokens > 0) but the "
                             "engine has no draft model (EngineCore(draft=...))")
        res = self.speculator.step(rows, drafts, slot_tokens)
        emitted.update(res.emitted)
        self.draft_s.append(res.draft_s)
        self.verify_s.append(res.verify_s)

    def abort(self, request_id: int, reason: str) -> bool:
        """Drop a waiting or running request (its client left): free its KV, report it done
        with ``reason``. False if it is unknown, already done, or a row of a padded batch
        (which runs to its end as one tensor)."""
        state = self.state
        seq = next((s for s in state.waiting if s.request_id == request_id), None)
        if seq is not None:
            state.waiting.remove(seq)
        else:
            seq = next((s for s in state.running if s.request_id == request_id), None)
            if seq is None or state.group is not None:
                return False
            if seq.clock is not None:
                seq.clock.leave(seq, state.kv)
            state.running.remove(seq)
            state.kv.free(request_id)
            if self.prefix is not None:  # the blocks its free just cached, before its slot goes
                self.prefix.before_sync(self.slots)
                self.prefix.forget(request_id)
            self._sync_slots()
        seq.reason = reason
        self._done(seq)
        return True

    def forget_tokens(self, request_id: int) -> None:
        """Drop a finished request's token ids (a long-lived server keeps only its records
        and token times; a replay keeps the ids to return them). A row of a padded batch
        (static, dynamic) still runs until the batch ends, so its ids go when its slot does."""
        if any(s.request_id == request_id for s in self.slots):
            self._forget.add(request_id)
        else:
            self.tokens.pop(request_id, None)

    def _drop_forgotten(self) -> None:
        """Forget the ids of finished requests whose slots are gone (``forget_tokens``)."""
        if self._forget:
            held = {s.request_id for s in self.slots}
            for rid in [r for r in self._forget if r not in held]:
                self.tokens.pop(rid, None)
                self._forget.discard(rid)

    def _done(self, seq: Sequence) -> None:
        if self.on_done is not None:
            self.on_done(seq)

    def _sync_slots(self) -> None:
        """Make the slots mirror the running list: drop who left, append who joined."""
        running = self.state.running
        if len(self.slots) == len(running) and all(
                a is b for a, b in zip(self.slots, running, strict=True)):
            return
        if not running:  # a padded batch ended, or the last request left: nothing to move
            self.slots.clear()
            self._drop_forgotten()
            self.cache.reserve(0, 0)  # a bounded cache gives back what a long request took
            return
        keep = {id(s) for s in running}
        i = 0
        length = max((len(self.tokens[s.request_id]) for s in self.slots), default=0)
        while i < len(self.slots):
            if id(self.slots[i]) in keep:
                i += 1
                continue
            self.cache.remove_row(i, len(self.slots), length)
            del self.slots[i]
        if any(a is not b for a, b in zip(self.slots, running, strict=False)):
            raise RuntimeError("the policy reordered its running requests; the slot cache "
                               "keeps them in admission order")
        self.slots.extend(running[len(self.slots):])
        self._drop_forgotten()
        need = max((s.prompt_tokens + s.output_tokens for s in self.slots), default=1)
        self.cache.reserve(len(self.slots), need)
