"""The per-deployment numbers the roofline formula needs, computed once per cost model.

:class:`~simulator.costs.roofline.RooflineCost` (symbols and formula in its module
docstring) and :class:`~simulator.costs.roofline_scalar.ScalarRoofline` both price a step
from these; nothing here depends on the step.

A quantised checkpoint (fewer than 2 bytes a weight) keeps its lm_head in 16 bits, as
:meth:`~simulator.specs.model_spec.ModelSpec.weight_bytes` counts it (ModelOpt disables
the lm_head's quantizers; vLLM quantises its linear layers only): the prior reads that
matrix at 2 bytes a weight and runs its GEMM at the 16-bit peak (its FLOPs enter the
weights' peak scaled by peak(w) / peak(act)), as the composed tables price the logits GEMM.
A checkpoint that quantises the experts only (gpt-oss's MXFP4) keeps every shared weight
in 16 bits.

A model with sliding-window layers (gpt-oss) splits the attention constants: the full
layers' FLOPs per query-key pair and KV bytes per token, and the window layers' with the
window ``W`` (roofline.py prices their reads at most ``W`` tokens a request).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, NamedTuple

from simulator.costs.collectives import AllReduceCurve, allreduce_curve, collective_curve
from simulator.costs.moe_tables import MoeLayerCurve, moe_layer_curve
from simulator.specs.dtypes import kv_dtype_bytes, weight_dtype_bytes
from simulator.specs.model_spec import EMBEDDING_BYTES

if TYPE_CHECKING:
    from simulator.costs.roofline import RooflineCost


class RooflineConstants(NamedTuple):
    """Per-deployment numbers the formula needs, computed once at construction."""

    flops_per_token: float  # 2 N_act
    attn_flops_per_pair: float  # 4 L n_h d_h (latent attention: 2 L n_h (2 d_h + r))
    # a decode pair's FLOPs past a prefill pair's: latent attention's absorbed form, 2 L n_h
    # (2 kv_lora + r) in all; 0.0 for every other model
    decode_attn_extra_flops: float
    inv_peak_mm: float  # 1 / peak(w), s per FLOP
    inv_peak_attn: float  # 1 / (peak(act) eff_a)
    shared_bytes: float  # b_w N_sh / tp (the lm_head at 2 bytes under quantised weights)
    expert_bytes: float  # b_w N_e / tp
    num_experts: int  # E
    miss_prob: float  # 1 - k/E: chance one token skips a given expert
    kv_bytes_per_token: float  # kv / min(tp, n_kv)
    decode_kv_reads: float  # g: reads of each KV head's cache a decode step
    mem_bw: float  # bw eff_m, bytes/s
    kv_mem_bw: float  # bw eff_kv, bytes/s
    compute_scale: float  # 1 / (tp eff_c)
    step_s: float  # t_step + L t_layer: what every step costs whatever its shape
    ar_bytes_per_token: float  # 2 (tp-1)/tp H b_act, bytes each GPU sends per all-reduce
    ar_link_bw: float  # link/2 eff_l, bytes/s
    num_allreduces: int  # 2 L (L in a parallel attention + MLP block) when tp > 1, else 0
    ar_message_bytes_per_token: float  # H b_act: bytes of one token's all-reduced vector
    ar_curve: AllReduceCurve | None  # measured curve (collectives.py), else the formula
    # A MoE model's measured expert layer (moe_tables.py), which then prices the experts
    # in place of their roofline: t_mm = max(shared compute, shared reads) + L_moe x it
    moe_curve: MoeLayerCurve | None
    moe_layers: float  # L_moe: the layers with routed experts (ModelSpec.moe_layers)
    shared_flops_per_token: float  # 2 N_sh: the matmul FLOPs outside the experts (a
    # 16-bit lm_head's at the weights' peak: scaled by peak(w) / peak(act))
    window: float  # W: the sliding-window layers' window in tokens (0: none)
    win_attn_flops_per_pair: float  # 4 L_win n_h d_h (attn_flops_per_pair: the full layers')
    win_kv_bytes_per_token: float  # the window layers' KV bytes a token / min(tp, n_kv)
    # attention data parallelism over dp ranks (roofline.py, "attention data parallel"):
    request_share: float  # 1 / dp: the requests admitted or finished one rank handles
    num_dispatches: float  # L_moe when dp > 1 (an all-gather and a reduce-scatter each), else 0
    dispatch_curves: tuple[AllReduceCurve, ...]  # NCCL's all-gather and reduce-scatter
    # over dp GPUs where measured (collectives.py), else () and the formula:
    dispatch_bytes_per_token: float  # (dp-1)/dp H b_act, bytes each GPU receives a token


def roofline_constants(cost: RooflineCost) -> RooflineConstants:
    """The constants of ``cost``'s model, GPU, tp, attention data parallelism, dtypes and
    efficiencies. Under ``dp`` attention ranks the step is the whole group's: a rank's
    FLOPs, KV reads and requests are the group's over dp (balanced ranks), its experts
    E / dp, its shared weights all of them (module roofline.py)."""
    m, hw, tp, dp = cost.model, cost.hardware, cost.tp, cost.attention_dp
    moe_tp, moe_ep = _moe_split(cost)
    moe_layers = float(m.moe_layers)  # the layers with routed experts
    b_w = weight_dtype_bytes(cost.weight_dtype, "weight_dtype")
    kv_dtype_bytes(cost.kv_dtype, "kv_dtype")  # validates the name before use
    gathered = 0 if m.tie_embeddings else m.vocab_size * m.hidden_size
    n_sh = m.params_shared - gathered
    act_dtype = "fp32" if cost.weight_dtype.lower() == "fp32" else "bf16"
    b_act = weight_dtype_bytes(act_dtype)
    # the shared weights' bytes: all in 16 bits when only the experts are quantised
    b_sh = EMBEDDING_BYTES if m.experts_only_quantised and b_w < EMBEDDING_BYTES else b_w
    # the lm_head (vocab x hidden, tied or not) in 16 bits under quantised weights
    head = m.vocab_size * m.hidden_size if b_sh < EMBEDDING_BYTES else 0
    shared_bytes = (b_sh * (n_sh - head) + EMBEDDING_BYTES * head) / tp
    head_flops = 2.0 * head * hw.peak_flops(cost.weight_dtype) / hw.peak_flops(act_dtype)
    shared_flops = 2.0 * (n_sh - head) + head_flops
    return RooflineConstants(
        flops_per_token=shared_flops + 2.0 * m.experts_per_token * m.params_per_expert,
        attn_flops_per_pair=float(m.attention_flops_per_pair),
        decode_attn_extra_flops=float(m.decode_attention_flops_per_pair
                                      - m.attention_flops_per_pair),
        inv_peak_mm=1.0 / hw.peak_flops(cost.weight_dtype),
        inv_peak_attn=1.0 / (hw.peak_flops(act_dtype) * cost.attention_efficiency),
        shared_bytes=shared_bytes,
        expert_bytes=b_w * m.params_per_expert / tp / dp,
        num_experts=m.num_experts,
        miss_prob=1.0 - m.experts_per_token / m.num_experts,
        kv_bytes_per_token=m.kv_bytes_per_token(cost.kv_dtype) / min(tp, m.num_kv_heads) / dp,
        decode_kv_reads=cost.decode_kv_reads,
        mem_bw=hw.bandwidth_gbps * 1e9 * cost.memory_efficiency,
        kv_mem_bw=hw.bandwidth_gbps * 1e9 * cost.kv_memory_efficiency,
        compute_scale=1.0 / (tp * dp * cost.compute_efficiency),
        step_s=cost.step_overhead_s + m.num_layers * cost.layer_overhead_s,
        ar_bytes_per_token=2.0 * (tp - 1) / tp * m.hidden_size * b_act,
        ar_link_bw=hw.link_bandwidth_gbps * 1e9 / 2 * cost.link_efficiency,
        num_allreduces=m.layer_allreduces if tp > 1 else 0,
        ar_message_bytes_per_token=m.hidden_size * b_act,
        ar_curve=(allreduce_curve(hw.name, tp, cost.allreduce_kind)
                  if tp > 1 and cost.allreduce_kind else None),
        moe_curve=(moe_layer_curve(m, hw.name, cost.weight_dtype, moe_tp, cost.moe_kind,
                                   ep=moe_ep) if cost.moe_kind else None),
        moe_layers=moe_layers,
        shared_flops_per_token=shared_flops,
        window=float(m.sliding_window),
        win_attn_flops_per_pair=4.0 * m.sliding_layers * m.num_heads * m.head_dim,
        win_kv_bytes_per_token=(m.window_kv_bytes_per_token(cost.kv_dtype)
                                / min(tp, m.num_kv_heads) / dp),
        request_share=1.0 / dp,
        num_dispatches=moe_layers if dp > 1 else 0.0,
        dispatch_curves=_dispatch_curves(hw.name, dp, cost.allreduce_kind),
        dispatch_bytes_per_token=(dp - 1) / dp * m.hidden_size * b_act,
    )


def _moe_split(cost: RooflineCost) -> tuple[int, int]:
    """(moe_tp, ep) of the measured MoE layer ``cost`` reads: (tp, 1); under attention data
    parallelism (1, dp) with expert parallelism, else (dp, 1)."""
    dp = cost.attention_dp
    if dp == 1 or not cost.expert_parallel:
        return cost.tp * dp, 1
    return cost.tp, dp


def _dispatch_curves(hardware: str, dp: int, kind: str) -> tuple[AllReduceCurve, ...]:
    """NCCL's measured all-gather and reduce-scatter over ``dp`` GPUs, both or neither
    (none at dp 1, or with ``allreduce_kind = ""``: the formula)."""
    if dp == 1 or not kind:
        return ()
    curves = tuple(collective_curve(hardware, dp, op) for op in ("all_gather", "reduce_scatter"))
    return () if None in curves else tuple(c for c in curves if c is not None)
