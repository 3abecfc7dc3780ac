"""Resolving one scenario point into a runnable deployment (specs, policy, cost, KV, traffic).

The point is read once, as a typed :class:`simulator.scenario_types.Scenario`; this module
only looks things up (model and device specs, the cost model, the KV capacity) from it.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from simulator.cluster import ClusterSpec
from simulator.costs.base import CostModel
from simulator.costs.from_config import cost_model_from_config
from simulator.costs.host import overlapped, request_delay_s
from simulator.costs.roofline import check_attention_dp
from simulator.costs.speculative import draft_cost
from simulator.errors import ConfigError
from simulator.fleet.disagg_build import build_disagg
from simulator.fleet.disagg_spec import DisaggSpec
from simulator.fleet.sections import (
    ADMISSION_OFF,
    AUTOSCALE_OFF,
    AdmissionSection,
    AutoscaleSection,
)
from simulator.policies import Policy
from simulator.policies.continuous import ContinuousPolicy, overlaps
from simulator.scenario_types import Scenario
from simulator.slo import SLO
from simulator.specs.hardware import HardwareSpec
from simulator.specs.models import ModelSpec
from simulator.speculative_acceptance import Acceptance
from simulator.stack_presets import cost_args, stack_weight_bytes
from simulator.workload.config import WorkloadConfig


@dataclass(frozen=True, slots=True)
class Deployment:
    """Everything one simulation needs, validated."""

    model: ModelSpec
    hardware: HardwareSpec
    tp: int  # tensor-parallel degree (GPUs per attention rank)
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
    check_invariants: bool = False  # assert the scheduler's invariants every step ([run])
    stack: str = "none"  # the serving stack's preset ([stack]): "vllm-v1 0.9", or "none"
    step_log: str = "full"  # what is kept of the step log ([run] step_log)
    prefix_caching: bool = False  # [kv] prefix_caching: reuse cached prompt prefixes
    speculative: Acceptance | None = None  # [speculative]: acceptance draws (None: off)
    admission: AdmissionSection = ADMISSION_OFF  # [admission]: the fleet's front door
    autoscale: AutoscaleSection = AUTOSCALE_OFF  # [autoscale]: replicas following load
    disaggregated: DisaggSpec | None = None  # [disaggregated]: prefill/decode pools (None: off)
    attention_dp: int = 1  # [hardware] attention_dp: attention ranks a replica's experts span
    # blocks a running request's sliding-window layers hold besides its context's ([kv]
    # window_held: vLLM's hybrid KV-cache manager); 0 for most models and stacks
    window_blocks: int = 0

    @property
    def gpus(self) -> int:
        """GPUs per replica: tp x attention_dp."""
        return self.tp * self.attention_dp

    def cluster(self) -> ClusterSpec:
        """The simulator's view of this deployment."""
        return ClusterSpec(self.policy, self.cost, self.kv_blocks, self.block_size,
                           self.replicas, self.router, request_s=self.request_s,
                           check_invariants=self.check_invariants, step_log=self.step_log,
                           prefix_caching=self.prefix_caching, speculative=self.speculative,
                           admission=self.admission if self.admission.enabled else None,
                           autoscale=self.autoscale if self.autoscale.enabled else None,
                           disaggregated=self.disaggregated,
                           window_blocks=self.window_blocks)


def resolve(point: dict[str, Any] | Scenario, source: str | None = None) -> Deployment:
    """Build one (non-sweep) scenario point's deployment: a typed :class:`Scenario`, or a
    point dict (checked by ``Scenario.from_dict``; ``source`` names it in errors)."""
    sc = point if isinstance(point, Scenario) else Scenario.from_dict(point, source)
    model, hw = sc.model_spec(), sc.hardware_spec()
    context = sc.served_context()
    if context > model.max_context_tokens:  # an engine built for longer sequences
        model = replace(model, max_context_tokens=context)
    tp, weight_dtype, kv_dtype = sc.hardware.tp, sc.model.weight_dtype, sc.model.kv_dtype_used
    dp = _attention_dp(sc, model, hw)
    preset = sc.stack.preset()
    weights = stack_weight_bytes(preset, model, hw, tp, weight_dtype)
    kv_blocks = sc.kv.capacity_blocks(
        memory_bytes=hw.memory_bytes, tp=tp * dp,
        weight_bytes=model.group_weight_bytes(weights, weight_dtype, dp),
        kv_bytes_per_token=sc.kv.pool_bytes_per_token(model, kv_dtype, tp))
    cost, cost_source = cost_model_from_config(
        dict(sc.cost), model, hw, tp, weight_dtype, kv_dtype,
        **cost_args(preset, model, hw, tp, kv_dtype), attention_dp=dp,
        expert_parallel=sc.hardware.expert_parallel)
    spec = sc.speculative
    if spec.on:
        cost, draft = draft_cost(cost, model, hw, tp, weight_dtype, kv_dtype, spec.draft,
                                 spec.draft_layers, sc.base_dir)
        cost_source = f"{cost_source}; speculative k={spec.num_tokens}, draft {draft}"
    policy = sc.policy.policy
    assert policy is not None  # PolicySection builds it
    policy = rank_limits(policy, dp)
    if overlaps(policy, spec.on):  # as the replica decides it
        cost, cost_source = _overlapped(cost, cost_source)
    _check_static_fills(policy, sc.workload, sc.cluster.replicas)
    return Deployment(
        model=model, hardware=hw, tp=tp, weight_dtype=weight_dtype, kv_dtype=kv_dtype,
        policy_name=sc.policy.name, policy=policy, cost=cost, cost_source=cost_source,
        kv_blocks=kv_blocks, block_size=sc.kv.block_size,
        replicas=sc.cluster.replicas, router=sc.cluster.router, workload=sc.workload,
        slo=sc.slo, seed=sc.seed, horizon_s=sc.run.horizon_s,
        fast_forward=sc.run.fast_forward, request_s=request_delay_s(cost),
        check_invariants=sc.run.check_invariants,
        stack=sc.stack.describe(),
        step_log=sc.run.step_log,
        prefix_caching=_prefix_caching(sc.kv.prefix_caching, policy, sc.cluster.router),
        speculative=spec.acceptance_model(sc.seed) if spec.on else None,
        admission=sc.admission, autoscale=sc.autoscale,
        disaggregated=build_disagg(sc, policy, cost, preset)
        if sc.disaggregated.enabled else None,
        attention_dp=dp,
        window_blocks=(sc.kv.without_held_windows() if sc.disaggregated.enabled  # as its
                       else sc.kv).window_blocks(model, kv_dtype),  # pools (disagg_build)
    )


def _overlapped(cost: CostModel, source: str) -> tuple[CostModel, str]:
    """``cost`` and its source under an overlap scheduler, which forms the next step while
    the GPU runs this one: the per-row host work runs beside the step
    (simulator/costs/host.py)."""
    beside = overlapped(cost)
    if beside is cost:
        return cost, source
    return beside, (f"{source}; the overlap scheduler forms each step while the GPU runs "
                    f"the last, so the per-row host work (seq_s) runs beside the step")


# the policy limits an attention data-parallel rank applies to its own requests
RANK_LIMITS = ("max_num_seqs", "max_num_batched_tokens", "max_batch_size", "batch_size")


def rank_limits(policy: Policy, dp: int) -> Policy:
    """``policy`` for a replica of ``dp`` attention data-parallel ranks: each rank admits
    its own requests under the scenario's limits (TensorRT-LLM's max_batch_size and
    max_num_tokens are per rank under attention DP), so the group, run as one engine,
    gets ``dp`` times each; a request, which runs on one rank, keeps a rank's token budget
    (``request_budget``: without chunked prefill a longer prompt is refused). ``policy``
    itself at dp 1."""
    if dp == 1:
        return policy
    scaled = {k: dp * getattr(policy, k) for k in RANK_LIMITS if hasattr(policy, k)}
    if isinstance(policy, ContinuousPolicy):  # one request runs on one rank: its budget
        scaled["request_budget"] = policy.request_budget or policy.max_num_batched_tokens
    return replace(policy, **scaled)  # type: ignore[type-var]  # every policy is a dataclass


def _attention_dp(sc: Scenario, model: ModelSpec, hw: HardwareSpec) -> int:
    """``[hardware] attention_dp``, checked against the model and GPU (roofline.py); the
    disaggregated pools and speculative decoding keep one rank."""
    dp = sc.hardware.attention_dp
    try:
        check_attention_dp(dp, model, sc.hardware.tp, hw)
    except ConfigError as e:
        raise ConfigError(f"hardware.{e}") from None
    if dp > 1 and (sc.disaggregated.enabled or sc.speculative.on):
        raise ConfigError(f"hardware.attention_dp = {dp}: not with [disaggregated] or "
                          "[speculative] (their pools and drafts are priced per TP group)")
    return dp


def _prefix_caching(on: bool, policy: Policy, router: str) -> bool:
    """``[kv] prefix_caching``, refused for the padded policies (static, dynamic), whose
    rows always prefill their whole padded prompt; the prefix_affinity router needs it."""
    if router == "prefix_affinity" and not on:
        raise ConfigError("cluster.router = 'prefix_affinity' routes by the replicas' prefix "
                          "caches: set kv.prefix_caching = true")
    if on and not hasattr(policy, "chunked_prefill"):
        raise ConfigError(f"kv.prefix_caching = true: only for the continuous and chunked "
                          f"policies; {type(policy).__name__} pads every prompt in full")
    return on


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
