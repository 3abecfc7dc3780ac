"""Dynamic batching (Triton-style).

A batch starts when ``max_batch_size`` requests wait or the oldest has waited ``max_wait_s``.
"""

from __future__ import annotations

from dataclasses import dataclass

from simulator.errors import ConfigError
from simulator.policies.padded import form_group, group_repeats, group_step
from simulator.policies.state import Batch, ServerState, Wait
from simulator.scenario_fields import spec


@dataclass(slots=True, frozen=True)
class DynamicPolicy:
    """Padded batches of up to ``max_batch_size``, released by size or by timeout."""

    max_batch_size: int = spec(8, unit="requests", low=1)
    max_wait_s: float = spec(0.05, unit="s", low=0)

    def __post_init__(self) -> None:
        if self.max_batch_size < 1:
            raise ConfigError(f"policy.max_batch_size = {self.max_batch_size}: must be >= 1")
        if self.max_wait_s < 0:
            raise ConfigError(f"policy.max_wait_s = {self.max_wait_s}: must be >= 0")

    def schedule(self, state: ServerState, now: float) -> Batch | Wait:
        """Continue the batch in flight, release a batch, or wait for size or timeout."""
        if state.group is not None:
            return group_step(state)
        if not state.waiting:
            return Wait()
        deadline = state.waiting[0].arrival_s + self.max_wait_s
        full = len(state.waiting) >= self.max_batch_size
        if full or now >= deadline:
            batch = form_group(state, self.max_batch_size)
            if batch is not None:
                return batch
            return Wait()  # KV full cannot happen with no batch in flight; be safe
        return Wait(until=deadline)

    def repeats(self, state: ServerState, batch: Batch) -> int:
        """Identical pure-decode steps ahead (for the simulator's fast-forward)."""
        return group_repeats(state) if not batch.prefill else 1
