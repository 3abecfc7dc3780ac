"""Static batching: wait for ``batch_size`` requests, run them to completion as one padded batch."""

from __future__ import annotations

from dataclasses import dataclass

from simulator.errors import ConfigError
from simulator.policies.padded import form_group, group_repeats, group_step
from simulator.policies.state import Batch, ServerState, Wait
from simulator.scenario_fields import spec


@dataclass(slots=True, frozen=True)
class StaticPolicy:
    """Fixed-size padded batches. A short batch runs only once no more requests will come."""

    batch_size: int = spec(8, unit="requests", low=1)

    def __post_init__(self) -> None:
        if self.batch_size < 1:
            raise ConfigError(f"policy.batch_size = {self.batch_size}: must be >= 1")

    def schedule(self, state: ServerState, now: float) -> Batch | Wait:
        """The next step: continue the batch in flight, start a full one, or wait."""
        if state.group is not None:
            return group_step(state)
        n = len(state.waiting)
        if n >= self.batch_size or (n > 0 and state.arrivals_done):
            batch = form_group(state, self.batch_size)
            if batch is not None:
                return batch
        return Wait()

    def repeats(self, state: ServerState, batch: Batch) -> int:
        """Identical pure-decode steps ahead (for the simulator's fast-forward)."""
        return group_repeats(state) if not batch.prefill else 1
