"""Resolving one scenario point into a runnable deployment (specs, policy, cost, KV, traffic)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from simulator.cluster import ClusterSpec
from simulator.costs.base import CostModel
from simulator.costs.from_config import cost_model_from_config
from simulator.costs.host import request_delay_s
from simulator.errors import ConfigError
from simulator.kvcache import KVCacheConfig
from simulator.policies import Policy, make_policy, policy_knobs
from simulator.router import ROUTERS
from simulator.slo import SLO
from simulator.specs.hardware import HardwareSpec, get_hardware
from simulator.specs.models import ModelSpec, get_model
from simulator.workload.config import WorkloadConfig


@dataclass(frozen=True, slots=True)
class Deployment:
    """Everything one simulation needs, validated."""

    model: ModelSpec
    hardware: HardwareSpec
    tp: int  # tensor-parallel degree (GPUs per replica)
    weight_dtype: str
    kv_dtype: str
    policy_name: str
    policy: Policy
    cost: CostModel
    cost_source: str  # which profile priced the steps
    kv_blocks: int  # per replica
    block_size: int
    replicas: int
    router: str
    workload: WorkloadConfig
    slo: SLO | None
    seed: int
    horizon_s: float | None
    fast_forward: bool
    request_s: float = 0.0  # host latency before a request reaches the engine ([cost] overhead)

    def cluster(self) -> ClusterSpec:
        """The simulator's view of this deployment."""
        return ClusterSpec(self.policy, self.cost, self.kv_blocks, self.block_size,
                           self.replicas, self.router, request_s=self.request_s)


def _int(table: dict[str, Any], key: str, where: str, default: int, low: int = 1) -> int:
    value = table.get(key, default)
    if not isinstance(value, int) or isinstance(value, bool) or value < low:
        raise ConfigError(f"{where}.{key} = {value!r}: must be an integer >= {low}")
    return value


def resolve(point: dict[str, Any]) -> Deployment:
    """Validate one (non-sweep) scenario point and build its parts."""
    model_t, hw_t = point.get("model", {}), point.get("hardware", {})
    model = get_model(model_t.get("name", "llama-3.1-8b"))
    hw = get_hardware(hw_t.get("gpu", "h100-sxm"))
    tp = _int(hw_t, "tp", "hardware", 1)
    weight_dtype = model_t.get("weight_dtype", "bf16")
    kv_dtype = model_t.get("kv_dtype", "bf16" if weight_dtype in ("fp16", "bf16") else "fp8")
    if weight_dtype == "fp32":
        kv_dtype = model_t.get("kv_dtype", "bf16")
    kv_cfg = KVCacheConfig(**point.get("kv", {}))
    kv_blocks = kv_cfg.capacity_blocks(
        memory_bytes=hw.memory_bytes, tp=tp, weight_bytes=model.weight_bytes(weight_dtype),
        kv_bytes_per_token=model.kv_bytes_per_token(kv_dtype))
    policy_t = dict(point.get("policy", {}))
    name = policy_t.pop("name", "continuous")
    if not isinstance(name, str):
        raise ConfigError(f"policy.name = {name!r}: must be a policy name")
    own = policy_knobs(name)
    specific = policy_t.get(name, {})  # [policy.<name>] overrides the shared knobs
    knobs = {k: v for k, v in {**policy_t, **specific}.items() if k in own}
    policy = make_policy(name, **knobs)
    cost, source = cost_model_from_config(point.get("cost", {}), model, hw, tp, weight_dtype,
                                          kv_dtype)
    cluster_t = point.get("cluster", {})
    router = cluster_t.get("router", "round_robin")
    if router not in ROUTERS:
        raise ConfigError(f"cluster.router = {router!r}: unknown; known: {sorted(ROUTERS)}")
    run_t = point.get("run", {})
    horizon = run_t.get("horizon_s")
    if horizon is not None and not (isinstance(horizon, int | float) and horizon > 0):
        raise ConfigError(f"run.horizon_s = {horizon!r}: must be a number > 0")
    base_dir = point.get("_base_dir")
    workload = WorkloadConfig.from_dict(point.get("workload", {}),
                                        base_dir=Path(base_dir) if base_dir else None)
    replicas = _int(cluster_t, "replicas", "cluster", 1)
    _check_static_fills(policy, workload, replicas)
    return Deployment(
        model=model, hardware=hw, tp=tp, weight_dtype=weight_dtype, kv_dtype=kv_dtype,
        policy_name=name, policy=policy, cost=cost, cost_source=source,
        kv_blocks=kv_blocks, block_size=kv_cfg.block_size,
        replicas=replicas, router=router, workload=workload,
        slo=SLO.from_dict(point["slo"]) if point.get("slo") else None,
        seed=_int(point, "seed", "seed", 0, low=0),
        horizon_s=None if horizon is None else float(horizon),
        fast_forward=bool(run_t.get("fast_forward", True)),
        request_s=request_delay_s(cost),
    )


def _check_static_fills(policy: Policy, workload: WorkloadConfig, replicas: int) -> None:
    """A closed loop with fewer clients than static batches need would never start a batch."""
    size = getattr(policy, "batch_size", None)
    clients = workload.concurrency
    if workload.arrival == "closed" and size is not None and clients is not None:
        if size * replicas > clients:
            raise ConfigError(
                f"policy.batch_size = {size}: {replicas} replica(s) x {size} exceeds "
                f"workload.concurrency = {clients}, so static batches would never fill; "
                "lower batch_size or raise concurrency")
