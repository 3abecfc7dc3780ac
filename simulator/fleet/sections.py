"""The fleet's scenario sections: ``[admission]`` (the front door) and ``[autoscale]``.

Both are off unless the scenario has the section (``Scenario.admission`` /
``Scenario.autoscale`` hold the "off" instances below), so a scenario without them runs
exactly as before. docs/fleet.md describes every field with a worked example.
"""

from __future__ import annotations

from dataclasses import dataclass

from simulator.errors import ConfigError
from simulator.scenario_fields import check_fields, spec

QUEUE_SCOPES = ("replica", "fleet")
SIGNALS = ("queue", "kv", "ttft")


@dataclass(frozen=True, slots=True)
class AdmissionSection:
    """``[admission]``: a token-bucket rate limit and a bounded queue at the fleet's door.

    A request reaching the door is first checked against the bucket (``rate_limit``
    tokens per second, at most ``burst`` held, full at t = 0; a request passing takes
    one), then against the queue bound: refused when ``max_queue`` requests already wait
    to be scheduled on the replica the router picked (``queue_scope = "replica"``) or on
    all serving replicas together (``"fleet"``). A refused request is recorded as rejected
    with its reason; it takes no token and reaches no replica.
    """

    rate_limit: float | None = spec(None, unit="req/s", low=0, low_open=True)  # None: none
    burst: int = spec(1, unit="requests", low=1)  # the bucket's size
    max_queue: int | None = spec(None, unit="requests", low=1)  # None: unbounded
    queue_scope: str = spec("replica", choices=QUEUE_SCOPES)

    def __post_init__(self) -> None:
        check_fields(self, "admission")

    @property
    def enabled(self) -> bool:
        """Whether the door refuses anything at all."""
        return self.rate_limit is not None or self.max_queue is not None


@dataclass(frozen=True, slots=True)
class AutoscaleSection:
    """``[autoscale]``: replicas added when a signal is high, drained when it stays low.

    Every ``interval_s`` the autoscaler reads ``signal`` over the serving replicas:
    ``queue`` (requests waiting per serving replica), ``kv`` (mean KV blocks used /
    blocks), or ``ttft`` (the ``percentile``-th TTFT in ms of requests that finished in
    the last ``window_s``). Above ``scale_up_above`` it starts ``scale_up_step`` replicas
    (up to ``max_replicas``, none while one is still starting), which serve
    ``cold_start_s`` later and cost from their start. Below ``scale_down_below`` at every
    evaluation for ``down_hold_s`` it drains one (down to ``min_replicas``): the replica
    takes no new request and leaves, and stops costing, when its last one is done.
    ``[cluster] replicas`` is the count at t = 0.
    """

    enabled: bool = spec(True)  # the section's presence turns it on; false keeps it off
    min_replicas: int = spec(1, unit="replicas", low=1)
    max_replicas: int = spec(8, unit="replicas", low=1)
    signal: str = spec("queue", choices=SIGNALS)
    scale_up_above: float = spec(4.0, low=0)  # in the signal's unit (requests, fraction, ms)
    scale_down_below: float = spec(1.0, low=0)
    down_hold_s: float = spec(60.0, unit="s", low=0)
    interval_s: float = spec(10.0, unit="s", low=0, low_open=True)
    cold_start_s: float = spec(60.0, unit="s", low=0)
    scale_up_step: int = spec(1, unit="replicas", low=1)
    window_s: float = spec(60.0, unit="s", low=0, low_open=True)  # signal = "ttft" only
    percentile: float = spec(90.0, low=0, high=100)  # signal = "ttft" only
    # None: the shipped price table's figure for the GPU (simulator/capacity/prices.toml)
    usd_per_gpu_hour: float | None = spec(None, unit="US$ per GPU-hour", low=0)

    def __post_init__(self) -> None:
        check_fields(self, "autoscale")
        if self.min_replicas > self.max_replicas:
            raise ConfigError(f"autoscale.min_replicas = {self.min_replicas}: must be <= "
                              f"autoscale.max_replicas = {self.max_replicas}")
        if self.scale_down_below > self.scale_up_above:
            raise ConfigError(f"autoscale.scale_down_below = {self.scale_down_below:g}: must "
                              f"be <= autoscale.scale_up_above = {self.scale_up_above:g}")

    def check_start(self, replicas: int) -> None:
        """``[cluster] replicas`` (the count at t = 0) must lie in [min, max]."""
        if not self.min_replicas <= replicas <= self.max_replicas:
            raise ConfigError(
                f"cluster.replicas = {replicas}: with [autoscale] it is the count at t = 0 and "
                f"must lie in [autoscale.min_replicas, autoscale.max_replicas] = "
                f"[{self.min_replicas}, {self.max_replicas}]")


ADMISSION_OFF = AdmissionSection()
AUTOSCALE_OFF = AutoscaleSection(enabled=False)
