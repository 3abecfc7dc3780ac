"""What a simulation is given and what it returns: :class:`ClusterSpec` and :class:`SimResult`.

Split from simulator/cluster.py (which re-exports both) so the arrival driver
(simulator/driver.py) and the entry point share them without a cycle.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import pandas as pd

from simulator.costs.base import CostModel
from simulator.fleet.disagg import Transfers
from simulator.fleet.disagg_spec import DisaggSpec
from simulator.fleet.members import FleetUsage
from simulator.fleet.sections import AdmissionSection, AutoscaleSection
from simulator.metrics_steps import StepStats
from simulator.policies import Policy, Sequence
from simulator.prefix_cache_stats import PrefixStats
from simulator.speculative_acceptance import AcceptanceModel
from simulator.speculative_stats import SpecStats


@dataclass(slots=True)
class SimResult:
    """What one simulation produced."""

    requests: pd.DataFrame  # request records, one row per request that arrived
    steps: pd.DataFrame  # step log of every replica
    kv_blocks_total: int  # KV blocks per replica
    num_replicas: int
    num_events: int  # SimPy events waited on (arrivals + replica steps and waits)
    wall_s: float  # wall-clock time the simulation took
    step_stats: StepStats | None = None  # the step log's figures when not kept ([run] step_log)
    prefix_stats: PrefixStats | None = None  # prefix caching's counters (None: off)
    spec_stats: SpecStats | None = None  # speculative decoding's counts (None: not speculating)
    fleet: FleetUsage | None = None  # replicas over time and their cost (with an autoscaler)
    transfers: Transfers | None = None  # [disaggregated]: every KV transfer (None: off)


@dataclass(slots=True, frozen=True)
class ClusterSpec:
    """The deployment being simulated."""

    policy: Policy
    cost: CostModel
    kv_blocks: int  # per replica
    block_size: int = 16  # tokens per KV block
    num_replicas: int = 1
    router: str = "round_robin"
    # Seconds from a request's arrival to the engine seeing it (API server, tokenising,
    # HTTP): it occupies no replica; TTFT and E2E include it (costs/host.py).
    request_s: float = 0.0
    # Check the scheduler's invariants after every schedule() and step (policies/
    # invariants.py): O(requests) per step, so tests turn it on, runs leave it off.
    check_invariants: bool = False
    step_log: str = "full"  # what is kept of the step log (steplog.STEP_LOG_MODES)
    prefix_caching: bool = False  # [kv] prefix_caching: reuse cached KV blocks (prefix_cache.py)
    # Speculative decoding: how many drafts each verified row gets accepted
    # (speculative_acceptance.py); needed exactly when the policy speculates.
    speculative: AcceptanceModel | None = None
    admission: AdmissionSection | None = None  # the front door (None: every request passes)
    autoscale: AutoscaleSection | None = None  # None: num_replicas serve throughout
    # [disaggregated]: prefill and decode pools and their KV link (simulator/fleet/disagg.py);
    # None: every replica prefills and decodes
    disaggregated: DisaggSpec | None = None
    # blocks each running request's sliding-window layers hold in the pool besides its
    # context's (vLLM's hybrid KV-cache manager: KVCacheConfig.window_blocks); 0: none
    window_blocks: int = 0

    def __post_init__(self) -> None:
        if not (self.request_s >= 0.0 and math.isfinite(self.request_s)):
            raise ValueError(f"request_s={self.request_s!r} must be a finite number >= 0")
        k = getattr(self.policy, "num_speculative_tokens", 0)
        if k and self.speculative is None:
            raise ValueError(f"num_speculative_tokens = {k} needs an acceptance model "
                             "(ClusterSpec.speculative)")


Progress = Callable[[int, int], None]
"""``progress(done, total)``: requests finished or refused so far, of those in the table."""
LeaveHook = Callable[[Sequence, float], None]
"""``on_leave(seq, sent_s)``: ``seq`` finished or was refused (its record is final)."""
