"""``[disaggregated]`` resolved into a :class:`~simulator.fleet.disagg_spec.DisaggSpec`.

Each pool gets the cost model, KV capacity and policy it would get as an aggregated
deployment on its own GPU and tensor parallelism (the same ``[cost]``, ``[kv]`` and
``[policy]`` settings, the pool's knob table over ``[policy]``'s). What the two pools
can run is checked here, with messages naming the field.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from simulator.costs.base import CostModel
from simulator.costs.from_config import cost_model_from_config
from simulator.errors import CapacityError, ConfigError
from simulator.fleet.disagg_section import DisaggSection
from simulator.fleet.disagg_spec import DisaggSpec, PoolSpec
from simulator.policies import ContinuousPolicy, Policy
from simulator.specs.hardware import get_hardware
from simulator.specs.links import get_link
from simulator.stack_presets import StackPreset, cost_args, stack_weight_bytes


def build_disagg(sc: Any, policy: Policy, cost: CostModel, preset: StackPreset | None
                 ) -> DisaggSpec:
    """The pools and link of the scenario ``sc`` (a :class:`~simulator.scenario_types.
    Scenario` with ``disaggregated`` on); ``policy`` and ``cost``: the aggregated ones,
    reused by a pool on ``[hardware]``'s GPU and tp; ``preset``: the scenario's stack."""
    section: DisaggSection = sc.disaggregated
    _check_compatible(sc, policy)
    assert isinstance(policy, ContinuousPolicy)
    model = sc.model_spec()
    weight, kv_dtype = sc.model.weight_dtype, sc.model.kv_dtype_used
    pools = {}
    kv = sc.kv.without_held_windows()  # no hybrid KV manager beside a KV connector
    for pool in ("prefill", "decode"):
        gpu = getattr(section, f"{pool}_gpu") or sc.hardware.gpu
        tp = getattr(section, f"{pool}_tp") or sc.hardware.tp
        hw = get_hardware(gpu)
        same = hw.name == sc.hardware_spec().name and tp == sc.hardware.tp
        where = f"disaggregated.{pool}_gpu / {pool}_tp ({hw.name}, tp {tp})"
        pool_cost, source = (cost, "") if same else cost_model_from_config(
            dict(sc.cost), model, hw, tp, weight, kv_dtype, where=where,
            **cost_args(preset, model, hw, tp, kv_dtype))
        try:
            blocks = kv.capacity_blocks(
                memory_bytes=hw.memory_bytes, tp=tp,
                weight_bytes=stack_weight_bytes(preset, model, hw, tp, weight),
                kv_bytes_per_token=kv.pool_bytes_per_token(model, kv_dtype, tp))
        except CapacityError as e:  # kept a CapacityError: the planner skips what cannot fit
            raise CapacityError(f"{where}: {e}") from None
        knobs = section.knobs(pool)
        pools[pool] = PoolSpec(hw.name, tp, getattr(section, f"{pool}_replicas"),
                               replace(policy, **knobs) if knobs else policy,
                               pool_cost, blocks, getattr(section, f"{pool}_router"),
                               source)
    return DisaggSpec(pools["prefill"], pools["decode"], get_link(section.link),
                      section.link_scope, model.kv_bytes_per_token(kv_dtype),
                      section.decode_reserve)


def _check_compatible(sc: Any, policy: Policy) -> None:
    """What ``[disaggregated]`` does not run with (yet), each refused naming its field."""
    if not isinstance(policy, ContinuousPolicy):
        raise ConfigError(f"policy.name = {sc.policy.name!r}: [disaggregated] needs the "
                          "continuous or chunked policy (a padded batch cannot take a request "
                          "whose prompt was computed elsewhere)")
    if policy.num_speculative_tokens or policy.num_scheduler_steps > 1:
        raise ConfigError("policy.num_speculative_tokens / num_scheduler_steps: not with "
                          "[disaggregated] (not modelled yet)")
    refused = {
        "kv.prefix_caching": sc.kv.prefix_caching,
        "[admission]": sc.admission.enabled,
        "[autoscale]": sc.autoscale.enabled,
        "cluster.replicas": sc.cluster.replicas != 1,
    }
    for name, on in refused.items():
        if on:
            raise ConfigError(f"{name}: not with [disaggregated] (its pools set the replicas: "
                              "disaggregated.prefill_replicas and decode_replicas; prefix "
                              "caching, admission control and autoscaling are not modelled "
                              "for the pools yet)")
