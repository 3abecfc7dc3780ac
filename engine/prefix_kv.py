"""Prefix reuse on the engine: real KV blocks kept by chained hash, mirroring the simulator.

The shared policy runs the simulator's :class:`~simulator.prefix_cache.PrefixBlockManager`
(``[kv] prefix_caching = true``): it decides which request hits which cached blocks, and
starts a hit request's ``num_computed`` at its hit. :class:`PrefixKV` makes the engine
actually hold that KV. It is the manager's listener (``reused``, ``evicted``) and keeps::

    blocks: hash -> (K, V), each (layers, kv_heads, block_size, head_dim)

The choice, the simplest that is exact:

- **Filled after each step** from the slot cache (:meth:`after_step`): every block of a
  request that is full of computed tokens (below its ``num_computed``), that the manager
  caches (``is_cached``) and the store lacks is copied out of its slot. A block the
  manager registers later (decoding under the lazy policies' ``settle``; a preempted
  request's blocks, registered when it is freed during scheduling) is stored at the next
  look, at the latest right before the slots change (:meth:`before_sync`). A block
  computed while its hash is stored already (two requests prefilling one new prefix in
  the same step; vLLM keeps both copies) is not stored twice.
- **Dropped** when the manager evicts that hash (``evicted``): the store holds at most the
  manager's cached blocks (the test checks ``len(blocks) == manager.num_cached``).
- **Copied in before the hit request's first step** (:meth:`before_step`): the manager's
  ``reused(request_id, hashes)`` lists the blocks, block ``j`` goes to positions ``j x
  block_size ..`` of the request's slot, then the step computes the rest of the prompt from
  position ``hit`` (a packed prefill chunk after cached context). A block the manager
  registered in this same step (vLLM: ``cache_blocks`` in ``allocate_slots``, so a request
  admitted later in the step already finds it) is not computed yet: it is copied inside the
  forward, per layer, right after the slot cache writes the step's keys
  (``SlotCache.copies``), as vLLM's paged attention reads a block another request's rows of
  the same forward have just written. A hit row of one token (a decode-sized prefill) whose
  source is a prefill chunk joins the packed forward, so its source is written first.

Only the engine's memory differs from a paged cache: a hit costs one copy of the blocks
into the request's slot (the slot cache keeps one contiguous row per request), which is
part of the step's measured time.
"""

from __future__ import annotations

import torch

from engine.slot_cache import SlotCache
from engine.step_runner import RowWork
from simulator.policies import Sequence
from simulator.prefix_cache import PrefixBlockManager
from simulator.prefix_cache_chain import block_hashes


class PrefixKV:
    """The engine's prefix-cache KV, kept in step with the manager (module docstring)."""

    def __init__(self, cache: SlotCache, kv: PrefixBlockManager) -> None:
        self.cache = cache
        self.kv = kv
        self.identity = kv.identity
        self.block_size = kv.block_size
        self.blocks: dict[int, tuple[torch.Tensor, torch.Tensor]] = {}
        self.copied_blocks = 0  # blocks copied into slots (from the store or within a step)
        self._pending: dict[int, list[int]] = {}  # request -> hit hashes not copied in yet
        self._chains: dict[int, list[int]] = {}  # request -> its stream's block hashes
        self._stored: dict[int, int] = {}  # request -> leading blocks already stored or known
        self._computed: dict[int, int] = {}  # request -> positions its slot held at step end

    # --- the manager's listener (simulator.prefix_cache_stats.PrefixEvents) ---
    def reused(self, request_id: int, hashes: list[int]) -> None:
        """The manager admitted ``request_id`` starting from these cached blocks."""
        self._pending[request_id] = list(hashes)

    def evicted(self, block_hash: int) -> None:
        """The manager evicted a cached block: its KV goes too."""
        self.blocks.pop(block_hash, None)

    # --- the serving loop ---
    def chain(self, seq: Sequence) -> list[int]:
        """``seq``'s block hashes, as the manager computes them (prefix_cache_chain.py)."""
        rid = seq.request_id
        out = self._chains.get(rid)
        if out is None:
            ids, lens = self.identity.of(rid)
            out = block_hashes(ids, lens, rid, seq.prompt_tokens + seq.output_tokens,
                               self.block_size)
            self._chains[rid] = out
        return out

    def before_step(self, slots: list[Sequence], work: list[RowWork]) -> set[int]:
        """Copy the step's hit blocks into their slots (or set up the in-forward copies of
        blocks computed in this step); return the slots whose row must run packed."""
        self.cache.copies = []
        bs = self.block_size
        for w in work:  # a request whose progress went back (preempted) stores anew
            rid = slots[w.slot].request_id
            if rid not in self._pending and self._stored.get(rid, 0) > w.start // bs:
                self._stored[rid] = w.start // bs
        if not self._pending:
            return set()
        computing: dict[int, RowWork] = {}  # hash -> the row completing it this step
        for w in work:
            chain = self.chain(slots[w.slot])
            for j in range(w.start // bs, min((w.start + w.count) // bs, len(chain))):
                computing.setdefault(chain[j], w)
        row_of = {w.slot: w for w in work}
        slot_of = {s.request_id: i for i, s in enumerate(slots)}
        late: set[int] = set()
        for rid, hashes in self._pending.items():
            dst = slot_of[rid]
            for j, h in enumerate(hashes):
                lo, hi = j * bs, (j + 1) * bs
                kv = self.blocks.get(h)
                if kv is not None:
                    for layer in range(self.cache.num_layers):
                        self.cache.keys[layer][dst, :, lo:hi] = kv[0][layer]
                        self.cache.values[layer][dst, :, lo:hi] = kv[1][layer]
                    continue
                src = computing.get(h)
                if src is None:
                    raise RuntimeError(f"request {rid}: cached block {j} (hash {h}) is neither "
                                       "stored nor computed in this step")
                self.cache.copies.append((src.slot, dst, lo, hi))
                if src.count > 1 and row_of[dst].count == 1:
                    late.add(dst)
            self.copied_blocks += len(hashes)
            self._stored[rid] = len(hashes)
        self._pending.clear()
        return late

    def after_step(self, slots: list[Sequence], finished: list[Sequence]) -> None:
        """Store the blocks the step filled that the manager caches; forget finished
        requests (their slots go next)."""
        self.cache.copies = []
        for slot, seq in enumerate(slots):
            self._computed[seq.request_id] = seq.num_computed
            self._capture(slot, seq)
        for seq in finished:
            self.forget(seq.request_id)

    def forget(self, request_id: int) -> None:
        """Drop what is kept about a request that left for good (finished or aborted)."""
        for d in (self._chains, self._stored, self._computed, self._pending):
            d.pop(request_id, None)

    def before_sync(self, slots: list[Sequence]) -> None:
        """Before the slots change (a step's start): store blocks the manager cached since
        the last step (a preempted request's, registered when it was freed)."""
        for slot, seq in enumerate(slots):
            self._capture(slot, seq)

    def _capture(self, slot: int, seq: Sequence) -> None:
        """Store ``seq``'s full computed blocks that the manager caches and the store lacks;
        a block the manager does not cache (yet) is looked at again next time."""
        rid = seq.request_id
        bs = self.block_size
        done = self._stored.get(rid, 0)
        chain = self.chain(seq)
        full = min(self._computed.get(rid, 0) // bs, len(chain))
        leading = True
        for j in range(done, full):
            h = chain[j]
            if h not in self.blocks and self.kv.is_cached(h):
                lo, hi = j * bs, (j + 1) * bs
                k = torch.stack([b[slot, :, lo:hi] for b in self.cache.keys])
                v = torch.stack([b[slot, :, lo:hi] for b in self.cache.values])
                self.blocks[h] = (k, v)
            if leading and h in self.blocks:
                done = j + 1
            else:
                leading = False
        self._stored[rid] = done
