"""``[disaggregated]``: a prefill pool and a decode pool joined by a KV link (docs/fleet.md).

Off unless the scenario has the section (``Scenario.disaggregated`` then holds
:data:`DISAGG_OFF`), so a scenario without it runs exactly as before. Each pool has its
own GPU, tensor parallelism, replica count and (optionally) policy knobs over
``[policy]``'s; the model, dtypes, ``[kv]`` and ``[cost]`` settings are shared.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from simulator.errors import ConfigError
from simulator.fleet.disagg_spec import RESERVE_MODES
from simulator.scenario_fields import check_fields, spec
from simulator.specs.hardware import get_hardware
from simulator.specs.links import LINKS, get_link

LINK_SCOPES = ("replica", "pool")
POOL_ROUTERS = ("round_robin", "least_outstanding", "shortest_queue")


@dataclass(frozen=True, slots=True)
class DisaggSection:
    """``[disaggregated]``: where prompts are computed, where tokens are decoded, and the link.

    ``prefill_gpu``/``decode_gpu`` and ``*_tp`` default to ``[hardware]``'s (None here);
    ``prefill_policy``/``decode_policy`` are tables of ``[policy]`` knobs overriding
    ``[policy]``'s for that pool. ``link`` names a link in simulator/specs/links.py;
    ``link_scope = "replica"``: each prefill replica sends over its own link (its GPUs'
    NICs), ``"pool"``: every transfer shares one link. A link carries one transfer at a
    time, first come first served. ``decode_reserve``: when the decode replica reserves
    the prompt's KV blocks: ``"before_transfer"`` (vLLM's P/D connectors: the KV is sent
    once they are reserved, and stays on the prefill replica until then),
    ``"before_prefill"`` (SGLang: the prompt is not computed until they are) or
    ``"on_arrival"`` (no reservation: the KV is sent at once and waits at the decode
    replica for free blocks).
    """

    enabled: bool = spec(True)  # the section's presence turns it on; false keeps it off
    prefill_replicas: int = spec(1, unit="replicas", low=1)
    decode_replicas: int = spec(1, unit="replicas", low=1)
    prefill_gpu: str | None = spec(None)  # None: [hardware] gpu
    decode_gpu: str | None = spec(None)
    prefill_tp: int | None = spec(None, unit="GPUs per replica", low=1)  # None: [hardware] tp
    decode_tp: int | None = spec(None, unit="GPUs per replica", low=1)
    prefill_router: str = spec("least_outstanding", choices=POOL_ROUTERS)
    decode_router: str = spec("least_outstanding", choices=POOL_ROUTERS)
    link: str = spec("infiniband-ndr", choices=tuple(LINKS))
    link_scope: str = spec("replica", choices=LINK_SCOPES)
    decode_reserve: str = spec("before_transfer", choices=RESERVE_MODES)
    # knob tables over [policy]'s, per pool (a tuple of (knob, value) pairs once built)
    prefill_policy: Any = spec(None)
    decode_policy: Any = spec(None)

    def __post_init__(self) -> None:
        check_fields(self, "disaggregated")
        for pool in ("prefill", "decode"):
            gpu = getattr(self, f"{pool}_gpu")
            if gpu is not None:
                try:
                    get_hardware(gpu)
                except ConfigError as e:
                    raise ConfigError(f"disaggregated.{pool}_gpu = {gpu!r}: "
                                      f"{str(e).split(' ', 1)[1]}") from None
            field = f"{pool}_policy"
            object.__setattr__(self, field, _knobs(getattr(self, field), field))
        get_link(self.link, "disaggregated.link")

    def knobs(self, pool: str) -> dict[str, Any]:
        """The ``[policy]`` knobs ``pool`` ("prefill" or "decode") overrides."""
        return dict(getattr(self, f"{pool}_policy") or ())


def _knobs(table: Any, field: str) -> tuple[tuple[str, Any], ...] | None:
    """A pool's knob table as sorted (knob, value) pairs, each checked as ``[policy]`` would."""
    if table is None:
        return None
    if isinstance(table, tuple):  # already built (dataclasses.replace)
        return table
    if not isinstance(table, Mapping):
        raise ConfigError(f"disaggregated.{field} = {table!r}: must be a table of "
                          "[policy] knobs")
    from simulator.policies import check_knob  # policies sit beside the fleet, not below

    return tuple(sorted((str(k), check_knob(str(k), v, f"disaggregated.{field}"))
                        for k, v in table.items()))


DISAGG_OFF = DisaggSection(enabled=False)
