"""The :class:`ModelSpec` dataclass: a decoder-only transformer's shapes and derived sizes.

A spec holds only what the cost model and the KV cache need: layer, head and MLP sizes,
vocabulary, context limit, the mixture-of-experts routing and, for models whose layers
alternate full and sliding-window attention (gpt-oss), the window; for MoE models that mix
dense and expert layers or add shared experts (Llama 4, DeepSeek-V3), how many of each; for
multi-head latent attention (DeepSeek), the latent's widths. Parameter counts are derived
from the shapes (Llama family: GQA attention without biases, SwiGLU MLP, RMSNorm), so they
are checked against the published totals in tests/test_specs.py and
tests/test_catalogue_peers.py. The catalogue lives in simulator/specs/models.py.
"""

from __future__ import annotations

from dataclasses import dataclass, fields

from simulator.errors import ConfigError
from simulator.specs.dtypes import kv_dtype_bytes, weight_dtype_bytes

# Quantised checkpoints keep the embedding and lm_head in 16 bits (see weight_bytes)
EMBEDDING_BYTES = 2.0


_FLAGS = ("tie_embeddings", "parallel_block", "experts_only_quantised", "attention_sinks")
# counts that may be 0: the window, then the MoE layer mix and latent attention's widths
# (checked by _check_layers)
_COUNTS = ("sliding_layers", "sliding_window", "dense_layers", "dense_intermediate_size",
           "shared_experts", "kv_lora_rank", "q_lora_rank", "rope_head_dim")


@dataclass(frozen=True, slots=True)
class ModelSpec:
    """Shape of a decoder-only transformer (Llama family, dense or mixture of experts)."""

    name: str  # catalogue key or a label for a custom config
    num_layers: int  # L: transformer blocks
    hidden_size: int  # H: residual stream width
    num_heads: int  # query heads per layer
    num_kv_heads: int  # key/value heads per layer (GQA; = num_heads for MHA)
    head_dim: int  # width of one attention head
    intermediate_size: int  # I: SwiGLU hidden width of one expert
    vocab_size: int  # V: embedding and lm_head rows
    max_context_tokens: int  # longest sequence (prompt + output) the model accepts
    num_experts: int = 1  # E: experts per MoE layer (1 = dense)
    experts_per_token: int = 1  # k: experts each token is routed to (1 = dense)
    tie_embeddings: bool = False  # lm_head shares the embedding matrix
    # attention and MLP read the same normed input and their outputs are summed (GPT-J,
    # Falcon, Phi-2): under tensor parallelism one all-reduce a layer, not two
    parallel_block: bool = False
    # Layers whose attention sees only the last ``sliding_window`` tokens (gpt-oss: every
    # other layer, 128 tokens); 0 and 0 for full attention everywhere. Their KV cache is
    # bounded by the window, so :meth:`kv_bytes_per_token` counts the other layers only.
    sliding_layers: int = 0
    sliding_window: int = 0
    # A quantised checkpoint that quantises the experts only (gpt-oss's MXFP4: attention,
    # router, embedding and lm_head stay 16-bit); False: every linear layer but the
    # embedding and lm_head is quantised (ModelOpt FP8, AWQ, GPTQ)
    experts_only_quantised: bool = False
    # Every attention head adds a learned sink logit to its softmax (gpt-oss): attention
    # kernels without sink support cannot run it, so a stack may pick a slower one (vLLM
    # below SM90: its Triton attention; simulator/stack_presets.py)
    attention_sinks: bool = False
    # A MoE model whose MLP is not the experts' in every layer: ``dense_layers`` of its
    # layers run one dense SwiGLU of ``dense_intermediate_size`` instead (0: the experts'
    # width; Llama 4 Maverick: every other layer, 16,384; DeepSeek-V3: its first 3), and
    # each MoE layer adds ``shared_experts`` always-on experts of ``intermediate_size``
    # (Llama 4, DeepSeek: 1) beside the routed ones. Both count as shared weights: every
    # token passes through them.
    dense_layers: int = 0
    dense_intermediate_size: int = 0
    shared_experts: int = 0
    # Multi-head latent attention (DeepSeek-V2/V3): the cache holds one latent of
    # ``kv_lora_rank`` plus a rotary key of ``rope_head_dim`` a token and layer, shared by
    # every head (so ``num_kv_heads`` is 1); queries pass through a ``q_lora_rank``
    # bottleneck (0: a full projection). ``head_dim`` is each head's non-rotary query/key
    # width and its value width. kv_lora_rank 0: ordinary (grouped-query) attention.
    kv_lora_rank: int = 0
    q_lora_rank: int = 0
    rope_head_dim: int = 0

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise ConfigError(f"model.name={self.name!r} must be a non-empty string")
        for f in fields(self):
            value = getattr(self, f.name)
            if f.name in _COUNTS:
                continue
            if f.name not in ("name",) + _FLAGS and (
                isinstance(value, bool) or not isinstance(value, int) or value < 1
            ):
                raise ConfigError(f"model {self.name}: {f.name}={value!r} must be an int >= 1")
        if self.num_heads % self.num_kv_heads:
            raise ConfigError(
                f"model {self.name}: num_heads={self.num_heads} must be a multiple of "
                f"num_kv_heads={self.num_kv_heads}"
            )
        if self.experts_per_token > self.num_experts:
            raise ConfigError(
                f"model {self.name}: experts_per_token={self.experts_per_token} must be "
                f"<= num_experts={self.num_experts}"
            )
        for flag in _FLAGS:
            if not isinstance(getattr(self, flag), bool):
                raise ConfigError(f"model {self.name}: {flag}={getattr(self, flag)!r} not bool")
        self._check_window()
        self._check_layers()

    def _check_layers(self) -> None:
        for name in _COUNTS[2:]:
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ConfigError(f"model {self.name}: {name}={value!r} must be an int >= 0")
        if self.num_experts <= 1 and (self.dense_layers or self.shared_experts
                                      or self.dense_intermediate_size):
            raise ConfigError(f"model {self.name}: dense_layers, dense_intermediate_size and "
                              f"shared_experts describe a mixture of experts; "
                              f"num_experts={self.num_experts}")
        if not self.kv_lora_rank and (self.q_lora_rank or self.rope_head_dim):
            raise ConfigError(f"model {self.name}: q_lora_rank and rope_head_dim describe "
                              f"latent attention; kv_lora_rank=0")
        if self.kv_lora_rank and (self.num_kv_heads != 1 or self.sliding_layers):
            raise ConfigError(f"model {self.name}: latent attention caches one latent a "
                              f"token for every head: num_kv_heads must be 1 (is "
                              f"{self.num_kv_heads}) and no layer sliding")
        if self.dense_layers >= self.num_layers:
            raise ConfigError(f"model {self.name}: dense_layers={self.dense_layers} must be "
                              f"below num_layers={self.num_layers} (a MoE model has experts "
                              f"in some layer)")

    def _check_window(self) -> None:
        for name in ("sliding_layers", "sliding_window"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ConfigError(f"model {self.name}: {name}={value!r} must be an int >= 0")
        if self.sliding_layers >= self.num_layers:
            raise ConfigError(f"model {self.name}: sliding_layers={self.sliding_layers} must "
                              f"be below num_layers={self.num_layers} (some layers keep "
                              f"every token)")
        if (self.sliding_layers > 0) != (self.sliding_window > 0):
            raise ConfigError(f"model {self.name}: sliding_layers={self.sliding_layers} and "
                              f"sliding_window={self.sliding_window} must be both 0 or both "
                              f">= 1")

    @property
    def full_layers(self) -> int:
        """Layers whose attention sees every earlier token (all of them without a window)."""
        return self.num_layers - self.sliding_layers

    @property
    def layer_allreduces(self) -> int:
        """Tensor-parallel all-reduces a step's layers take: two a layer (after attention
        and after the MLP), one in a parallel block."""
        return (1 if self.parallel_block else 2) * self.num_layers

    @property
    def params_attention_per_layer(self) -> int:
        """q and o (H x heads*head_dim) plus k and v (H x kv_heads*head_dim); under latent
        attention its down and up projections (:meth:`_latent_attention_params`)."""
        if self.kv_lora_rank:
            return self._latent_attention_params()
        q_width, kv_width = self.num_heads * self.head_dim, self.num_kv_heads * self.head_dim
        return 2 * self.hidden_size * q_width + 2 * self.hidden_size * kv_width

    def _latent_attention_params(self) -> int:
        """DeepSeek's MLA: q down (H x q_lora) and up (q_lora x heads*(d + r)), or one H x
        heads*(d + r) without the bottleneck; kv down (H x (kv_lora + r)) and up (kv_lora x
        heads*2d: each head's key and value); o (heads*d x H); the two latents' norms."""
        h, n, d, r = self.hidden_size, self.num_heads, self.head_dim, self.rope_head_dim
        q_lora, kv_lora = self.q_lora_rank, self.kv_lora_rank
        q = h * q_lora + q_lora * n * (d + r) + q_lora if q_lora else h * n * (d + r)
        kv = h * (kv_lora + r) + kv_lora + kv_lora * n * 2 * d
        return q + kv + n * d * h

    @property
    def moe_layers(self) -> int:
        """Layers whose MLP is the routed experts (every layer of a dense model's "one
        expert")."""
        return self.num_layers - self.dense_layers

    @property
    def params_per_expert(self) -> int:
        """One routed expert's SwiGLU MLP (gate, up, down: 3 H x I matrices) across the
        layers that have experts."""
        return self.moe_layers * 3 * self.hidden_size * self.intermediate_size

    @property
    def params_dense_mlp(self) -> int:
        """The dense layers' MLPs and the MoE layers' shared experts: MLP weights every
        token passes through beside its routed experts (0 in a plain MoE or dense model)."""
        width = self.dense_intermediate_size or self.intermediate_size
        dense = self.dense_layers * 3 * self.hidden_size * width
        return dense + self.shared_experts * self.params_per_expert

    @property
    def params_embedding(self) -> int:
        """Input embedding plus lm_head (one matrix when tied)."""
        return self.vocab_size * self.hidden_size * (1 if self.tie_embeddings else 2)

    @property
    def params_shared(self) -> int:
        """Weights every token uses: everything except the routed experts' MLPs."""
        router = self.hidden_size * self.num_experts if self.num_experts > 1 else 0
        norms = 2 * self.hidden_size  # RMSNorm before attention and before the MLP
        layers = self.num_layers * (self.params_attention_per_layer + norms)
        return (layers + self.moe_layers * router + self.params_dense_mlp
                + self.params_embedding + self.hidden_size)

    @property
    def params_experts(self) -> int:
        """Every expert's MLP weights, all layers (the MLP's for a dense model)."""
        return self.num_experts * self.params_per_expert

    @property
    def params_total(self) -> int:
        """All weights (what must fit in memory)."""
        return self.params_shared + self.params_experts

    @property
    def params_active(self) -> int:
        """Weights one token passes through (shared plus its k experts)."""
        return self.params_shared + self.experts_per_token * self.params_per_expert

    def weight_bytes(self, weight_dtype: str) -> int:
        """Bytes of the whole model's weights stored in ``weight_dtype``: a quantised
        checkpoint (fewer than 2 bytes a weight) keeps its embedding and lm_head in 16 bits,
        and everything but the experts when it quantises the experts only."""
        b = weight_dtype_bytes(weight_dtype)
        if b >= EMBEDDING_BYTES:
            return round(self.params_total * b)
        kept = self.params_embedding
        if self.experts_only_quantised:
            kept = self.params_shared
        return round((self.params_total - kept) * b + kept * EMBEDDING_BYTES)

    def expert_weight_bytes(self, weight_dtype: str) -> int:
        """Bytes of every expert's MLP in ``weight_dtype`` (a quantised checkpoint quantises
        its experts): the part of :meth:`weight_bytes` attention data parallelism spreads
        over its ranks instead of copying to each. 0 for a dense model."""
        if self.num_experts <= 1:
            return 0
        return round(self.params_experts * weight_dtype_bytes(weight_dtype))

    def group_weight_bytes(self, weight_bytes: int, weight_dtype: str, ranks: int) -> int:
        """The weights ``ranks`` attention data-parallel GPUs hold together: each rank a
        copy of everything but the experts (``weight_bytes``, the checkpoint's on one GPU,
        less :meth:`expert_weight_bytes`), the experts once between them; ``weight_bytes``
        itself at one rank. A stack's padding of the experts (vLLM's Marlin MXFP4) stays in
        the part each rank copies."""
        experts = self.expert_weight_bytes(weight_dtype)
        return ranks * (weight_bytes - experts) + experts

    def expert_pad_bytes(self, weight_dtype: str, tp: int, hidden_align: int,
                         inter_align: int) -> int:
        """Bytes an expert kernel adds to the experts by padding each GPU's expert matrices:
        the hidden size to a multiple of ``hidden_align``, each GPU's share of the expert
        inter (``intermediate_size / tp``) to a multiple of ``inter_align`` (vLLM's Marlin
        MXFP4 MoE: 256 and 128; docs/gpu-profiles.md, "gpt-oss"). 0 for a dense model."""
        if self.num_experts <= 1:
            return 0
        h, i = self.hidden_size, self.intermediate_size
        share = -(-i // tp)
        padded = -(-h // hidden_align) * hidden_align * -(-share // inter_align) * inter_align
        scale = padded * tp / (h * i) - 1.0
        return round(self.params_experts * scale * weight_dtype_bytes(weight_dtype))

    @property
    def attention_flops_per_pair(self) -> int:
        """FLOPs of one query-key pair in every full layer, as a prefill computes it: QK^T
        over the key width and PV over the value width, 2 FLOPs a multiply-add, each head
        (4 L n_h d_h; latent attention's keys are d_h + r wide)."""
        return 2 * self.full_layers * self.num_heads * (2 * self.head_dim + self.rope_head_dim)

    @property
    def decode_attention_flops_per_pair(self) -> int:
        """The same for a decode row's pair: latent attention then runs in the latent space
        (the up projections absorbed into the query and output), so QK^T is kv_lora + r wide
        and PV kv_lora wide (DeepSeek-V2, section 2.1.2); ordinary attention as a prefill."""
        if not self.kv_lora_rank:
            return self.attention_flops_per_pair
        return 2 * self.num_layers * self.num_heads * (2 * self.kv_lora_rank
                                                       + self.rope_head_dim)

    def kv_bytes_per_token(self, kv_dtype: str) -> int:
        """KV-cache bytes per token of the layers that keep every token: K and V
        (2 * L_full * kv_heads * head_dim * b); under latent attention the latent and the
        rotary key (L * (kv_lora + r) * b), one for all heads. A sliding-window layer holds
        at most ``sliding_window`` tokens of a request (:meth:`window_kv_bytes_per_token`),
        so the cache's capacity in tokens is set by the full layers (docs/gpu-profiles.md,
        "gpt-oss")."""
        elements = 2 * self.full_layers * self.num_kv_heads * self.head_dim
        if self.kv_lora_rank:  # latent attention: the latent and the rotary key
            elements = self.num_layers * (self.kv_lora_rank + self.rope_head_dim)
        return round(elements * kv_dtype_bytes(kv_dtype))

    def window_kv_bytes_per_token(self, kv_dtype: str) -> int:
        """KV bytes per token of the sliding-window layers (0 without them): written for
        every token, read for the last ``sliding_window`` of each request only."""
        elements = 2 * self.sliding_layers * self.num_kv_heads * self.head_dim
        return round(elements * kv_dtype_bytes(kv_dtype))
