"""The roofline prior: a step's time from FLOPs, bytes and datasheet peaks.

Used where no measured profile exists. Per step and per GPU (design.md, "Cost models";
the roofline method as in LLM-Viewer / Yuan et al. 2024, "LLM Inference Unveiled:
Survey and Roofline Model Insights", arXiv:2402.16363)::

    symbols from the config
      L layers, H hidden, n_h / n_kv query / KV heads, d_h head dim, E experts, k per token
      N_sh   weights every step streams: all but the routed experts' MLPs and, when
             untied, the input embedding (only T of its rows are gathered); a dense
             layer's MLP and a shared expert (Llama 4, DeepSeek) are shared weights
      N_e    one routed expert's MLP over the L_moe layers that have experts (L_moe = L
             but in a model mixing dense and MoE layers);  N_act = N_sh + k N_e
      b_w    bytes per weight;  kv = 2 L n_kv d_h b_kv bytes of KV per token
    per step, with T = P + D + S tokens (S, W: a speculative step's drafts verified and
    their query-key pairs; their rows' cache is read once, in C: docs/speculative.md)
      F_mm   = 2 N_act T                            matmul FLOPs
      F_attn = 4 L n_h d_h (A + C + W)              QK^T and PV, 2 FLOPs per MAC each
      E_T    = E (1 - (1 - k/E)^T)                  distinct experts hit (uniform routing)
      R      = max(0, A/P - P/2)                    cached context the prefill reads
      B_w    = b_w (N_sh + E_T N_e) / tp
      B_kv   = kv (g C + R + P + D) / min(tp, n_kv) KV heads replicate past n_kv; g: the
             decode kernel's reads of each KV head's cache a step (1; G for a masked-MHA
             kernel, ``[cost] decode_kv_reads``: simulator/costs/kv_reads.py)
      t_mm   = hyp(F_mm / (peak(w) tp eff_c), B_w / (bw eff_m))       the matmuls; for a
               MoE model whose expert layer NVIDIA measured on this GPU, dtype and tp
               (simulator/costs/moe_tables.py, the stack's kernels where timed):
               hyp(2 N_sh T / (peak(w) tp eff_c), b_w N_sh / tp / (bw eff_m))
               + L_moe MoE(T);
               hyp(c, m) = sqrt(c^2 + m^2), a smooth maximum (below)
      t_attn = max(F_attn / (peak(act) tp eff_c eff_a), B_kv / (bw eff_kv)) attention
               (eff_a: the attention kernel's compute efficiency as a share of the
               matmuls', 1 unless a stack runs a slower kernel: stack_presets.py)
      t_ar   = 2 L AR(T H b_act)                    when tp > 1, where AR is
               the all-reduce curve fitted to measured tables for this GPU and tp
               (simulator/costs/collectives.py: NCCL by default; a100-80gb, h100-sxm,
               h200 at tp 2/4/8), else lat + 2 (tp-1)/tp  T H b_act / (link/2 eff_l)
      t      = t_step + L t_layer + t_req (admitted + finished) + t_mm + t_attn + t_ar

    latent attention (DeepSeek's MLA: a latent of kv_lora plus a rotary key of r cached a
    token and layer, one for every head, so n_kv = 1 and each tensor-parallel GPU holds the
    whole cache): kv = L (kv_lora + r) b_kv, and a decode row's pairs run in the latent
    space (the key and value up-projections absorbed into the query and the output):
      F_attn = 2 L n_h (2 d_h + r) (A + C + W) + 2 L n_h (2 kv_lora - 2 d_h) (C + W)
    i.e. 2 L n_h (2 d_h + r) a prefill pair and 2 L n_h (2 kv_lora + r) a decode pair.

    sliding-window layers (gpt-oss: L_win of the L layers see the last W tokens only):
    F_attn and B_kv above count the other L - L_win layers; the window layers add
      4 L_win n_h d_h (min(A, P W) + min(C, D W) + W_s)        FLOPs
      kv_win (g min(C, D W) + min(R, W) + P + D)              bytes
    (min(C, D W): every row's context read up to W tokens, exact when all rows hold W
    tokens or more, an overcount when some hold fewer; min(A, P W) likewise)

    attention data parallel (``attention_dp`` = dp > 1, tp 1; TensorRT-LLM's DEP, SGLang's
    and vLLM's DP attention with expert parallelism): dp ranks, one GPU each, every rank
    holding all the shared weights and its own requests' KV cache, the experts split E / dp
    a GPU. P, A, D, C, S, W and the requests above are the whole group's, and the ranks are
    taken as balanced, so one rank's step is the group's with
      F_mm, F_attn, B_kv, t_req (admitted + finished)   over dp (its share of the tokens)
      B_w    = b_w (N_sh + E_T N_e / dp)                 every shared weight, E / dp experts
      MoE(T) = the measured layer at moe_tp 1, ep dp (``expert_parallel = False``: moe_tp
               dp, ep 1, every expert split over the ranks), queried at the group's T tokens
               (as AIConfigurator prices TensorRT-LLM's attention DP: x = x * attention_dp)
      t_ar   = L_moe (AG(T H b_act) + RS(T H b_act))     each MoE layer all-gathers the
               group's tokens to the experts and reduce-scatters them back (AIConfigurator's
               MoEDispatch below SM100 with attention DP: NCCL all_gather before and
               reduce_scatter after, each of the volume x dp), AG and RS NCCL's curves over
               dp GPUs (collectives.py), else lat + (dp-1)/dp T H b_act / (link/2 eff_l) each
    Not modelled: ranks out of balance (the step waits for its slowest rank; a lone
    request's prefill runs on one rank, not spread over dp), attention TP inside a rank.

Each operator class has its own roofline, and the step is their sum: the matmuls and the
attention run one after the other, so a step whose matmuls are compute-bound (a large
decode batch) still pays its attention's KV reads at memory speed (LLM-Viewer prices each
operator so). One max over the whole step's FLOPs and bytes instead let the two overlap:
against AIConfigurator's measured operator tables at a decode of 512 rows x 2,500 tokens,
Llama-3.1-70B bf16 at TP 8 read 71.6 ms on A100 against 96.3 measured, 101.6 per operator
(``python benchmarks/prior_check.py``; docs/gpu-profiles.md, "The prior per operator").

The matmuls' compute and weight reads meet in a smooth maximum, sqrt(c^2 + m^2), not the
larger of the two: near the ridge, where they are equal, measured kernels pay part of
both (1.41x the larger there, and within 1% of it once one is 7x the other). With the
larger alone the fitted prior read a 128-192-token prefill 15-25% fast against the
composed profiles and a 2,048-4,096-token one 6-19% slow on every GPU; with the smooth
maximum, refitted, the held-out share of shapes within 15% rose on eight of the nine GPU
and dtype fits (``python benchmarks/prior_check.py --prefill N``; docs/gpu-profiles.md,
"The smooth maximum"). Weight-only repricing keeps the hard maximum
(:meth:`RooflineCost.matmul_max_s`, simulator/costs/weight_only.py). sqrt is correctly
rounded in Python and numpy alike, so the scalar and array paths stay equal bit for bit.

R is exact when a step has one prefill chunk (ctx + n/2 = A/P) and when every chunk
starts from an empty cache (R = 0); with several chunks over cached context it reads low.
Ignored: activation traffic, lm_head computed only for sampled positions, kernel launch
gaps beyond t_step, quantisation scales. Constants, each a start value that calibration
replaces:

- eff_m = 0.8: "about 0.8 of peak bandwidth achievable" (design.md); decode GEMV kernels
  in vLLM/TensorRT-LLM reach 70-85% of HBM peak.
- eff_kv = 0.8, as eff_m until fitted: the KV cache's reads by the attention kernel.
- eff_a = 1: attention computes at the matmuls' eff_c, as FlashAttention-class kernels
  do; a stack whose kernel for the model is slower sets its own (stack_presets.py).
- Per GPU and weight dtype, where measured operator tables exist, eff_c, eff_m, eff_kv
  and t_layer are fitted to them (``python -m calibrate.prior_efficiency``;
  simulator/costs/prior_efficiency.py), and every prior the simulator builds there starts
  from the fitted values.
- eff_c = 0.6: large bf16 GEMMs reach roughly 60-75% of dense tensor peak in cuBLAS;
  whole prefills (norms, rotary, attention) less. An assumption, not a measurement.
- eff_l = 0.8 of the per-direction line rate: NCCL reaches ~370 GB/s bus bandwidth on
  H100 NVLink whose line rate is 450 GB/s each way (NVIDIA/nccl-tests#212).
- lat = 10 us per all-reduce: small-message NCCL all-reduce inside one node is of order
  10 us (NVIDIA/nccl-tests#68); two per layer is why TP decode pays per layer. Used with
  eff_l only where no measured curve exists, or when a scenario sets either knob
  (``allreduce_kind = ""``). The measured NCCL curves start at 6-22 us (A100 tp2: 10.4 us,
  tp8: 21.6 us) and reach their bandwidth only past a few MiB.
- t_step = 300 us: "a per-step CPU overhead of hundreds of microseconds" (design.md).
- t_layer = 0 until fitted: a fixed time per layer per step, the floor of its dozen
  kernels (launch and latency) that no roofline term has; fitted per GPU and dtype with
  the efficiencies where that predicts held-out tables better (prior_efficiency.py).
- t_req = 100 us per request admitted or finished: tokenise, detokenise, respond; vLLM
  found API server and scheduling CPU time first-order for Llama-3-8B on H100 (design.md).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np

from simulator.costs.base import DecodePricer, Num, check_number
from simulator.costs.collectives import DEFAULT_KIND, AllReduceCurve, allreduce_kinds
from simulator.costs.moe_tables import DEFAULT_MOE_KIND, MoeLayerCurve, moe_kinds
from simulator.costs.roofline_constants import RooflineConstants, roofline_constants
from simulator.costs.roofline_scalar import ScalarRoofline
from simulator.errors import ConfigError
from simulator.shapes import StepShape, StepShapes
from simulator.specs.hardware import HardwareSpec
from simulator.specs.models import ModelSpec

EFFICIENCY_KNOBS = ("compute_efficiency", "memory_efficiency", "kv_memory_efficiency",
                    "link_efficiency", "attention_efficiency")
DECODE_KV_READS_LOW, DECODE_KV_READS_HIGH = 1.0, 64.0  # the counts decode_kv_reads accepts
TIME_KNOBS = ("step_overhead_s", "layer_overhead_s", "per_request_s", "allreduce_latency_s")
KNOBS = EFFICIENCY_KNOBS + TIME_KNOBS  # fields a cost profile or a scenario may override
# knobs a serving stack sets (its kernels), not a deployment's GPU and model: the shipped
# prior files leave them out (calibrate/roofline_profiles.py)
STACK_KNOBS = ("attention_efficiency",)


def check_knob(name: str, value: object, where: str = "") -> float:
    """Validate one roofline knob: efficiencies in (0, 1], times >= 0 seconds."""
    if name in EFFICIENCY_KNOBS:
        return check_number(where + name, value, low=0.0, high=1.0, low_open=True)
    if name in TIME_KNOBS:
        return check_number(where + name, value)
    raise ConfigError(f"{where}{name} is not a roofline knob; known: {', '.join(KNOBS)}")


class RooflineTerms(NamedTuple):
    """Per-GPU pieces of a step's time; floats for one step, arrays for many."""

    flops: Num  # FLOPs per GPU
    bytes: Num  # HBM bytes read and written per GPU
    compute_s: Num  # the step's FLOPs at (tp eff_c) x peak: F_mm and F_attn's shares
    memory_s: Num  # the step's bytes at eff_m x bandwidth: B_w and B_kv's
    allreduce_s: Num  # t_ar: the all-reduces, or attention DP's all-gathers and reduce-scatters
    overhead_s: Num  # t_step + L t_layer + t_req (admitted + finished)
    matmul_s: Num  # t_mm: the smooth maximum of the matmuls' compute and weight reads
    attention_s: Num  # t_attn: the larger of attention's compute and KV reads

    @property
    def total_s(self) -> Num:
        return self.overhead_s + self.matmul_s + self.attention_s + self.allreduce_s


def _maximum(a: Num, b: Num) -> Num:
    """Element-wise max; plain ``max`` for floats (numpy on scalars costs a microsecond)."""
    if isinstance(a, float) and isinstance(b, float):
        return a if a >= b else b
    return np.maximum(a, b)


def _minimum(a: Num, b: Num) -> Num:
    """Element-wise min; plain ``min`` for floats (as :func:`_maximum`)."""
    if isinstance(a, float) and isinstance(b, float):
        return a if a <= b else b
    return np.minimum(a, b)


MEMORY_EFFICIENCY = 0.8  # the prior's default share of peak HBM bandwidth achieved

@dataclass(frozen=True, slots=True)
class RooflineCost:
    """Roofline step time of ``model`` on ``tp`` x ``hardware`` (formula: module docstring)."""

    model: ModelSpec
    hardware: HardwareSpec
    tp: int = 1  # tensor-parallel degree: GPUs sharing every layer
    weight_dtype: str = "bf16"  # storage and (where supported) math dtype of the weights
    kv_dtype: str = "bf16"  # KV-cache storage dtype
    compute_efficiency: float = 0.6  # eff_c: fraction of dense peak FLOP/s achieved
    memory_efficiency: float = MEMORY_EFFICIENCY  # eff_m: fraction of peak HBM bandwidth
    # eff_kv: the same for attention's KV-cache reads (a decode-attention kernel streams
    # many short per-sequence pages, not one weight matrix)
    kv_memory_efficiency: float = MEMORY_EFFICIENCY
    link_efficiency: float = 0.8  # eff_l: fraction of per-direction link line rate
    # eff_a: the attention kernel's compute efficiency as a share of eff_c (1: as the
    # matmuls'; vLLM's Triton attention for sink models below SM90 is slower: the stack's)
    attention_efficiency: float = 1.0
    step_overhead_s: float = 300e-6  # t_step: CPU work per step
    # t_layer: fixed time per layer per step (its kernels' launch and latency floors);
    # 0 unless fitted to a GPU's measured tables (prior_efficiency.py)
    layer_overhead_s: float = 0.0
    per_request_s: float = 100e-6  # t_req: CPU work per request admitted or finished
    allreduce_latency_s: float = 10e-6  # lat: fixed cost of one all-reduce (formula only)
    # Which measured all-reduce curve prices t_ar (collectives.py); "" = the lat + link
    # formula. Falls back to the formula where the GPU/tp has no curve.
    allreduce_kind: str = DEFAULT_KIND
    # g: times a decode step reads each KV head's cache (1: one read per KV head, as
    # XQA / FlashDecoding do; G for the masked-MHA kernel: simulator/costs/kv_reads.py)
    decode_kv_reads: float = 1.0
    # Whose measured MoE kernels price a MoE model's experts (moe_tables.py: "trtllm",
    # "vllm", "sglang"; the default's where the kind has no curve); "" = their roofline.
    # No curve for the GPU, dtype, tp and shape: the roofline.
    moe_kind: str = DEFAULT_MOE_KIND
    # attention data-parallel ranks (module docstring, "attention data parallel"): 1, or
    # dp ranks of tp 1 whose experts are spread over the dp GPUs (expert parallel)
    attention_dp: int = 1
    # under attention_dp: the experts split whole over the ranks (expert parallel: TensorRT-
    # LLM's DEP, vLLM's --enable-expert-parallel), or each expert split over all of them
    # (tensor-parallel MoE: SGLang's DP attention without expert parallelism)
    expert_parallel: bool = True
    _k: RooflineConstants = field(init=False, repr=False, compare=False)  # roofline_constants.py
    _scalar: ScalarRoofline = field(init=False, repr=False, compare=False)  # one step, floats

    def __post_init__(self) -> None:
        for name in KNOBS:
            check_knob(name, getattr(self, name))
        check_number("decode_kv_reads", self.decode_kv_reads, low=DECODE_KV_READS_LOW,
                     high=DECODE_KV_READS_HIGH)
        self._check_tp()
        kinds = allreduce_kinds()
        if self.allreduce_kind != "" and self.allreduce_kind not in kinds:
            raise ConfigError(f"allreduce_kind={self.allreduce_kind!r} must be \"\" (the "
                              f"formula) or one of {', '.join(kinds)}")
        if self.moe_kind != "" and self.moe_kind not in moe_kinds():
            raise ConfigError(f"moe_kind={self.moe_kind!r} must be \"\" (the roofline) or "
                              f"one of {', '.join(moe_kinds())}")
        object.__setattr__(self, "_k", roofline_constants(self))
        object.__setattr__(self, "_scalar", ScalarRoofline(
            self._k, self.allreduce_latency_s, self.per_request_s * self._k.request_share))

    def _check_tp(self) -> None:
        tp, m, hw = self.tp, self.model, self.hardware
        if isinstance(tp, bool) or not isinstance(tp, int) or tp < 1:
            raise ConfigError(f"tp={tp!r} must be an int >= 1")
        if m.num_heads % tp:
            raise ConfigError(f"tp={tp} must divide {m.name}'s num_heads={m.num_heads}")
        if tp > 1 and hw.link_kind == "none":
            raise ConfigError(f"tp={tp} needs a GPU link, but {hw.name} has link_kind='none'")
        check_attention_dp(self.attention_dp, m, tp, hw)

    @property
    def measured_allreduce(self) -> AllReduceCurve | None:
        """The measured curve pricing the all-reduces (None: tp 1, or the formula)."""
        return self._k.ar_curve

    def moe_source(self) -> str | None:
        """What prices a MoE model's experts (None for a dense model)."""
        if self.model.num_experts <= 1:
            return None
        if self._k.moe_curve is not None:
            return self._k.moe_curve.describe()
        why = (f"no measured {self.moe_kind} MoE curve for {self.hardware.name} "
               f"{self.weight_dtype} tp{self.tp}" if self.moe_kind else 'moe_kind = ""')
        return f"roofline ({why})"

    def allreduce_source(self) -> str | None:
        """What prices the all-reduces (None at tp 1): a named measured curve or the formula;
        under attention data parallelism, the experts' all-gather and reduce-scatter."""
        if self.attention_dp > 1:
            curves = self._k.dispatch_curves
            how = ("; ".join(c.describe() for c in curves) if curves else
                   f"formula {self.allreduce_latency_s * 1e6:g} us + bytes / "
                   f"({self.link_efficiency:g} x link) (no measured NCCL all-gather and "
                   f"reduce-scatter for {self.hardware.name} x {self.attention_dp})")
            return (f"attention data parallel x {self.attention_dp}: each MoE layer's tokens "
                    f"all-gathered to the experts and reduce-scattered back, {how}")
        if self.tp == 1:
            return None
        if self._k.ar_curve is not None:
            return self._k.ar_curve.describe()
        why = (f"no measured {self.allreduce_kind} curve for {self.hardware.name} tp{self.tp}"
               if self.allreduce_kind else "allreduce_kind = \"\"")
        return (f"formula {self.allreduce_latency_s * 1e6:g} us + bytes / "
                f"({self.link_efficiency:g} x link) ({why})")

    @property
    def measured_moe(self) -> MoeLayerCurve | None:
        """The measured MoE layer pricing the experts (None: a dense model, the roofline)."""
        return self._k.moe_curve

    def _terms(self, p: Num, a: Num, d: Num, c: Num, n_req: Num, s: Num = 0.0,
               w: Num = 0.0) -> RooflineTerms:
        k = self._k
        t = p + d + s
        flops_mm, weights, mm_c, mm_m, matmul_s = self._matmuls(t)
        flops_attn = k.attn_flops_per_pair * (a + c + w)
        if k.decode_attn_extra_flops:  # latent attention: decode rows in the latent space
            flops_attn = flops_attn + k.decode_attn_extra_flops * (c + w)
        cache_read = _maximum(0.0, a / _maximum(p, 1.0) - p / 2)
        kv_bytes = k.kv_bytes_per_token * (c * k.decode_kv_reads + cache_read + t)
        if k.window:  # the window layers: at most W keys a query, W cached tokens a row
            c_win = _minimum(c, d * k.window)
            flops_attn = flops_attn + k.win_attn_flops_per_pair * (
                _minimum(a, p * k.window) + c_win + w)
            kv_bytes = kv_bytes + k.win_kv_bytes_per_token * (
                c_win * k.decode_kv_reads + _minimum(cache_read, k.window) + t)
        # in roofline_scalar.py's order, so one step's floats are the same
        attn_c = flops_attn * k.inv_peak_attn * k.compute_scale
        allreduce_s = 0.0 * t  # keeps the array shape when tp == 1
        if k.num_allreduces and k.ar_curve is not None:
            allreduce_s = k.num_allreduces * k.ar_curve.time_s(k.ar_message_bytes_per_token * t)
        elif k.num_allreduces:
            per_ar = self.allreduce_latency_s + k.ar_bytes_per_token * t / k.ar_link_bw
            allreduce_s = k.num_allreduces * per_ar
        if k.num_dispatches:
            allreduce_s = allreduce_s + k.num_dispatches * self._dispatch_s(t)
        attn_m = kv_bytes / k.kv_mem_bw
        return RooflineTerms(
            flops=(flops_mm + flops_attn) / self.tp,
            bytes=weights + kv_bytes,
            compute_s=mm_c + attn_c,
            memory_s=mm_m + attn_m,
            allreduce_s=allreduce_s,
            overhead_s=k.step_s + self.per_request_s * k.request_share * n_req,
            matmul_s=matmul_s,
            attention_s=_maximum(attn_c, attn_m),
        )

    def _dispatch_s(self, t: Num) -> Num:
        """One MoE layer's all-gather and reduce-scatter of a step of ``t`` tokens (the
        group's) under attention data parallelism, roofline_scalar.py's order."""
        k = self._k
        nbytes = k.ar_message_bytes_per_token * t
        if k.dispatch_curves:
            gather, scatter = k.dispatch_curves
            return gather.time_s(nbytes) + scatter.time_s(nbytes)
        one = self.allreduce_latency_s + k.dispatch_bytes_per_token * t / k.ar_link_bw
        return one + one

    def _matmuls(self, t: Num) -> tuple[Num, Num, Num, Num, Num]:
        """The matmuls of a step of ``t`` tokens: FLOPs, weight bytes read (the experts
        hit), their roofline compute and read times, and ``t_mm`` (roofline_scalar.py's
        order). With a measured MoE layer, the compute and read times are the shared
        weights' and ``t_mm`` adds the experts' measured time."""
        k = self._k
        flops_mm = k.flops_per_token * t
        experts_hit = k.num_experts * (1.0 - miss_power(k.miss_prob, t)) if k.num_experts \
            else 0.0 * t
        weights = k.shared_bytes + experts_hit * k.expert_bytes
        if k.moe_curve is None:
            mm_c = flops_mm * k.inv_peak_mm * k.compute_scale
            mm_m = weights / k.mem_bw
            return flops_mm, weights, mm_c, mm_m, np.sqrt(mm_c * mm_c + mm_m * mm_m)
        mm_c = k.shared_flops_per_token * t * k.inv_peak_mm * k.compute_scale
        mm_m = k.shared_bytes / k.mem_bw + 0.0 * t
        experts_s = k.moe_layers * k.moe_curve.time_s(t)
        return flops_mm, weights, mm_c, mm_m, np.sqrt(mm_c * mm_c + mm_m * mm_m) + experts_s

    def terms(self, shape: StepShape | StepShapes) -> RooflineTerms:
        """The formula's pieces for one step (floats) or many (arrays)."""
        if isinstance(shape, StepShape):
            return self._terms(
                float(shape.num_prefill_tokens),
                float(shape.prefill_attn_work),
                float(shape.num_decode_seqs),
                float(shape.decode_context_tokens),
                float(shape.num_admitted + shape.num_finished),
                float(shape.num_spec_tokens),
                float(shape.spec_attn_work),
            )
        f64 = np.float64
        return self._terms(
            shape.num_prefill_tokens.astype(f64),
            shape.prefill_attn_work.astype(f64),
            shape.num_decode_seqs.astype(f64),
            shape.decode_context_tokens.astype(f64),
            (shape.num_admitted + shape.num_finished).astype(f64),
        )

    def step_time(self, shape: StepShape) -> float:
        return self._scalar.time(
            float(shape.num_prefill_tokens),
            float(shape.prefill_attn_work),
            float(shape.num_decode_seqs),
            float(shape.decode_context_tokens),
            float(shape.num_admitted + shape.num_finished),
            float(shape.num_spec_tokens),
            float(shape.spec_attn_work),
        )

    def decode_pricer(self) -> DecodePricer:
        """Seconds of a pure-decode step from (rows, context tokens, finishing), exactly
        :meth:`step_time` of that shape, without building one."""
        return self._scalar.decode_time

    def step_times(self, shapes: StepShapes) -> np.ndarray:
        return np.asarray(self.terms(shapes).total_s, dtype=np.float64)

    def matmul_s(self, tokens: Num) -> Num:
        """``t_mm`` of a step of ``tokens`` tokens (T = P + D + S; a float or an array):
        the smooth maximum of the matmuls' compute and weight reads, as in :meth:`terms`
        (one float: the scalar pricer's, cached by T)."""
        if isinstance(tokens, float):
            return self._scalar.matmul_s(tokens)
        return self._matmuls(tokens)[4]

    def matmul_max_s(self, tokens: Num) -> Num:
        """The matmuls' time with the hard maximum of compute and weight reads (a measured
        MoE layer's experts added as in :meth:`matmul_s`): what a weight-only kernel saves
        is the reads a step waits on (simulator/costs/weight_only.py). One float or an
        array, through the same operations, so both give the same figure."""
        _, _, mm_c, mm_m, _ = self._matmuls(tokens)
        k = self._k
        experts_s = 0.0 if k.moe_curve is None else k.moe_layers * k.moe_curve.time_s(tokens)
        return _maximum(mm_c, mm_m) + experts_s


def check_attention_dp(dp: object, model: ModelSpec, tp: int, hw: HardwareSpec) -> None:
    """Validate an attention data-parallel degree for ``model`` on ``tp`` x ``hw``: 1, or
    ranks of tp 1 over which a MoE model's experts divide evenly, on GPUs with a link."""
    if isinstance(dp, bool) or not isinstance(dp, int) or dp < 1:
        raise ConfigError(f"attention_dp={dp!r} must be an int >= 1")
    if dp == 1:
        return
    if model.num_experts <= 1:
        raise ConfigError(f"attention_dp={dp}: attention data parallelism spreads a MoE "
                          f"model's experts over the ranks; {model.name} has none")
    if tp != 1:
        raise ConfigError(f"attention_dp={dp} with tp={tp}: each attention rank runs on one "
                          "GPU here (tp = 1; the GPUs are attention_dp)")
    if model.num_experts % dp:
        raise ConfigError(f"attention_dp={dp} must divide {model.name}'s "
                          f"{model.num_experts} experts")
    if hw.link_kind == "none":
        raise ConfigError(f"attention_dp={dp} needs a GPU link, but {hw.name} has "
                          "link_kind='none'")


def miss_power(q: float, t: Num) -> Num:
    """``q ** t`` computed as Python computes it for one float, also for an array of
    token counts: numpy's vectorised power differs from the C library's in the last bit on
    some CPUs (AVX-512), and the scalar pricer (roofline_scalar.py) must give the same
    step times bit for bit. Token counts repeat, so each distinct one is raised once."""
    if not isinstance(t, np.ndarray):
        return q ** float(t)
    values, where = np.unique(t, return_inverse=True)
    return np.array([q ** float(v) for v in values.tolist()])[where].reshape(t.shape)
