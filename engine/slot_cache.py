"""An in-place KV cache with one row (slot) per running request, for iteration-level batching.

Per layer, keys and values live in preallocated buffers of shape
``(slots, kv_heads, capacity + 1, head_dim)``. A request's token at position ``p`` is
written at column ``p`` of its slot, so rows need no left padding inside the cache and a
step writes only its new tokens (``index_put_``), never copying the cache as
``DynamicCache``'s ``torch.cat`` does. Column ``capacity`` is scratch: padding tokens of
the step's input write there and attention never reads it.

Slots follow the order of the policy's running list: a request that joins takes the next
slot; one that leaves is removed by shifting the rows behind it down by one (the only
copy, once per departure). The rows of a step are a contiguous slot range, so the keys
and values handed to attention are views, ``buffer[lo:hi, :, :length]``.

transformers calls :meth:`update` from each attention layer (duck-typed ``Cache``); the
step's write columns and key length are set beforehand with :meth:`prepare`.

Memory is ``rows x (capacity + 1)`` positions per layer, i.e. the number of running
requests times the longest of them. Given ``max_positions`` (the live server passes
``kv_blocks x block_size``), the buffers never hold more than that many positions (plus
the scratch column of each row); growing past it raises, so the caller must admit only
what fits (engine/server/live.py does). A bounded cache also shrinks after a long request
leaves: :meth:`reserve` reallocates once the buffers are more than four times what the
rows need (never below the first allocation). An unbounded one (an offline replay, whose
run is finite) only grows, so its steps pay no reallocation after an idle spell.
"""

from __future__ import annotations

from typing import Any

import torch


class SlotCache:
    """Per-layer K/V buffers addressed by (slot, position); see the module docstring."""

    def __init__(self, num_layers: int, kv_heads: int, head_dim: int, *, slots: int = 8,
                 capacity: int = 256, dtype: torch.dtype = torch.float32,
                 device: torch.device | str = "cpu", max_positions: int | None = None) -> None:
        self.num_layers = num_layers
        self.max_positions = max_positions  # rows x capacity at most (None: unbounded)
        self.kv_heads = kv_heads
        self.head_dim = head_dim
        self.dtype = dtype
        self.device = torch.device(device)
        self.slots = 0  # rows allocated
        self.capacity = 0  # positions per row (column `capacity` is scratch)
        self.keys: list[torch.Tensor] = []
        self.values: list[torch.Tensor] = []
        if max_positions is not None:  # start small enough to be within the bound
            capacity = max(1, min(capacity, max_positions))
            slots = max(1, min(slots, max_positions // capacity))
        self._first = (slots, capacity)  # never shrink below the first allocation
        self._alloc(slots, capacity)
        self._rows = slice(0, 0)  # this step's slot range
        self._row_index = torch.zeros(0, 1, dtype=torch.long)  # (B, 1) slots of the rows
        self._columns = torch.zeros(0, 0, dtype=torch.long)  # (B, W) write column per token
        self._length = 0  # key columns attention reads this step
        self._packed = False  # this step is one packed row (engine/segment_attention.py)
        self._token_slots = torch.zeros(0, dtype=torch.long)  # packed: slot of each token
        # (src slot, dst slot, lo, hi): columns lo..hi-1 copied src -> dst in each layer right
        # after the step's write (prefix blocks computed in the same step, engine/prefix_kv.py)
        self.copies: list[tuple[int, int, int, int]] = []

    def _alloc(self, slots: int, capacity: int) -> None:
        """(Re)allocate for ``slots`` rows of ``capacity`` positions, keeping what is cached."""
        shape = (slots, self.kv_heads, capacity + 1, self.head_dim)
        keep_rows, keep_cols = min(slots, self.slots), min(capacity, self.capacity)
        for store in (self.keys, self.values):
            for i in range(self.num_layers):
                new = torch.zeros(shape, dtype=self.dtype, device=self.device)
                if i < len(store):
                    new[:keep_rows, :, :keep_cols] = store[i][:keep_rows, :, :keep_cols]
                    store[i] = new
                else:
                    store.append(new)
        self.slots, self.capacity = slots, capacity

    @property
    def positions(self) -> int:
        """Positions allocated per layer, scratch column excluded (rows x capacity)."""
        return self.slots * self.capacity

    @property
    def nbytes(self) -> int:
        """Bytes held by the key and value buffers of every layer."""
        return sum(b.numel() * b.element_size() for b in (*self.keys, *self.values))

    def reserve(self, slots: int, capacity: int) -> None:
        """Make ``slots`` rows of ``capacity`` positions fit: grow by doubling (within
        ``max_positions``), or, when bounded, shrink if more than four times that is held.

        Raises RuntimeError if ``slots x capacity`` exceeds ``max_positions``.
        """
        need = max(slots * capacity, 1)
        bound = self.max_positions
        if bound is not None and need > bound:
            raise RuntimeError(f"the slot cache needs {slots} rows x {capacity} positions = "
                               f"{need}, more than its bound of {bound} positions")
        first_slots, first_cap = self._first
        if slots <= self.slots and capacity <= self.capacity:
            if bound is not None and self.positions > max(4 * need, first_slots * first_cap):
                smaller = self._grown(slots, capacity, first_slots, first_cap)
                if smaller[0] * smaller[1] < self.positions:
                    self._alloc(*smaller)
            return
        self._alloc(*self._grown(slots, capacity, self.slots, self.capacity))

    def _grown(self, slots: int, capacity: int, from_slots: int,
               from_capacity: int) -> tuple[int, int]:
        """Rows and capacity to allocate: doubled from ``from_*`` until ``slots x capacity``
        fit, each dimension cut back to what is needed where doubling would pass the bound."""
        new_slots, new_cap = max(1, from_slots), max(1, from_capacity)
        while new_slots < slots:
            new_slots *= 2
        while new_cap < capacity:
            new_cap *= 2
        bound = self.max_positions
        if bound is not None and new_slots * new_cap > bound:
            new_cap = max(capacity, min(new_cap, bound // new_slots))
            if new_slots * new_cap > bound:
                new_slots = max(slots, bound // new_cap)
        return new_slots, new_cap

    def remove_row(self, row: int, num_rows: int, length: int) -> None:
        """Drop slot ``row`` of ``num_rows`` in use: rows behind it move down by one.

        Only the first ``length`` columns (the longest request's tokens) are moved.
        """
        if row < num_rows - 1:
            for store in (self.keys, self.values):
                for buf in store:
                    buf[row:num_rows - 1, :, :length] = buf[row + 1:num_rows, :, :length].clone()

    def prepare(self, lo: int, columns: torch.Tensor, length: int) -> None:
        """Set this step's rows ``lo .. lo + B - 1``, write columns (B, W) and key length.

        ``columns[b, w]`` is the position where input token ``w`` of row ``b`` is cached
        (``self.capacity`` for padding); attention reads key columns ``0 .. length - 1``.
        """
        num = columns.shape[0]
        self._packed = False
        self._rows = slice(lo, lo + num)
        self._row_index = torch.arange(lo, lo + num, device=self.device)[:, None]
        self._columns = columns.to(self.device)
        self._length = length

    def prepare_packed(self, slots: torch.Tensor, columns: torch.Tensor) -> None:
        """Set a packed step: token ``i`` of the one input row is cached at
        ``(slots[i], columns[i])``; attention (per segment) reads the whole buffers."""
        self._packed = True
        self._token_slots = slots.to(self.device)
        self._columns = columns.to(self.device)

    def update(self, key_states: torch.Tensor, value_states: torch.Tensor, layer_idx: int,
               *args: Any, **kwargs: Any) -> tuple[torch.Tensor, torch.Tensor]:
        """Write the step's keys/values (B, H, W, D) in place; return the rows' views (or,
        packed, the whole buffers)."""
        k, v = self.keys[layer_idx], self.values[layer_idx]
        if self._packed:  # (1, H, N, D) -> (N, H, D) at (slot, column) per token
            k[self._token_slots, :, self._columns] = key_states[0].transpose(0, 1).to(k.dtype)
            v[self._token_slots, :, self._columns] = value_states[0].transpose(0, 1).to(v.dtype)
            self._copy(k, v)
            return k, v
        # Advanced indices (B, 1) and (B, W) around a slice index (B, W, H, D).
        k[self._row_index, :, self._columns] = key_states.transpose(1, 2).to(k.dtype)
        v[self._row_index, :, self._columns] = value_states.transpose(1, 2).to(v.dtype)
        self._copy(k, v)
        return k[self._rows, :, :self._length], v[self._rows, :, :self._length]

    def _copy(self, k: torch.Tensor, v: torch.Tensor) -> None:
        """Apply this step's in-forward block copies (:attr:`copies`) to one layer."""
        for src, dst, lo, hi in self.copies:
            k[dst, :, lo:hi] = k[src, :, lo:hi]
            v[dst, :, lo:hi] = v[src, :, lo:hi]

    def get_seq_length(self, layer_idx: int = 0) -> int:
        """Key columns of the current step (transformers asks only without position ids)."""
        return self._length
