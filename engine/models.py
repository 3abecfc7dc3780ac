"""Build a transformers causal LM with random weights from a ModelSpec or a config.json.

Timing does not depend on weight values, so the profiler runs on randomly initialised
models (seeded with ``torch.manual_seed``) and needs no download. Only the architectures
below are built, always from transformers' own classes: never remote code.

The shape table is the simulator's model catalogue (``simulator.specs.models.MODELS``,
gpt-fast's ``transformer_configs`` in spirit); a spec maps to a transformers config with
:func:`hf_config_dict`, the inverse of ``model_from_hf_config``. The catalogue includes
``smollm2-135m``, the model engine/pretrained.py loads with trained weights: built here it
has SmolLM2's shapes and random weights (what ``servesim run --backend engine`` and
``servesim calibrate --here`` time), so its steps cost what the trained model's cost.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from transformers import AutoConfig, AutoModelForCausalLM, PreTrainedModel

from simulator.errors import ConfigError
from simulator.specs.models import ModelSpec, get_model, model_from_hf_config

# transformers model_type -> what we accept (each is Llama-shaped: RMSNorm, RoPE, SwiGLU).
MODEL_TYPES = ("llama", "mistral", "qwen2", "mixtral")
TORCH_DTYPES: Mapping[str, torch.dtype] = {
    "fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16,
}


@dataclass(slots=True)
class EngineModel:
    """A built model and what it was built from."""

    model: PreTrainedModel  # eval mode, on ``device``, in ``dtype``
    spec: ModelSpec  # shapes (parameter counts, KV bytes) for the simulator side
    dtype: str  # "fp32" | "bf16" | "fp16"
    device: torch.device  # where the weights live

    @property
    def vocab_size(self) -> int:
        """Rows of the embedding: token ids are drawn below this."""
        return self.spec.vocab_size

    def num_parameters(self) -> int:
        """Parameters actually allocated (tied embeddings counted once)."""
        return sum(p.numel() for p in self.model.parameters())


def hf_config_dict(spec: ModelSpec) -> dict[str, Any]:
    """A transformers config dict (Llama, or Mixtral for mixture of experts) for ``spec``.

    The spec has no bias terms, so a Qwen2 catalogue entry is built Llama-shaped (Qwen2's
    q/k/v biases are ~0.1M parameters of 7B).
    """
    if spec.dense_layers or spec.shared_experts or spec.kv_lora_rank:
        raise ConfigError(f"model {spec.name}: the engine builds Llama and Mixtral "
                          f"shapes only; a mix of dense and MoE layers, shared experts or "
                          f"latent attention (dense_layers={spec.dense_layers}, "
                          f"shared_experts={spec.shared_experts}, "
                          f"kv_lora_rank={spec.kv_lora_rank}) has no such config")
    cfg: dict[str, Any] = {
        "model_type": "mixtral" if spec.num_experts > 1 else "llama",
        "num_hidden_layers": spec.num_layers,
        "hidden_size": spec.hidden_size,
        "num_attention_heads": spec.num_heads,
        "num_key_value_heads": spec.num_kv_heads,
        "head_dim": spec.head_dim,
        "intermediate_size": spec.intermediate_size,
        "vocab_size": spec.vocab_size,
        "max_position_embeddings": spec.max_context_tokens,
        "tie_word_embeddings": spec.tie_embeddings,
        "_name_or_path": spec.name,
    }
    if spec.num_experts > 1:
        cfg["num_local_experts"] = spec.num_experts
        cfg["num_experts_per_tok"] = spec.experts_per_token
    return cfg


def _config_from_dict(cfg: Mapping[str, Any], source: str) -> Any:
    """A transformers config object from a config.json dict, for an accepted model_type."""
    data = dict(cfg)
    model_type = data.pop("model_type", "llama")
    if model_type not in MODEL_TYPES:
        raise ConfigError(f"{source}: model_type={model_type!r} is not supported; "
                          f"known: {', '.join(MODEL_TYPES)}")
    for key in ("architectures", "auto_map", "torch_dtype", "dtype", "transformers_version"):
        data.pop(key, None)  # auto_map would point at remote code; dtype is ours to choose
    return AutoConfig.for_model(model_type, **data)


def resolve_spec(source: str | Path | Mapping[str, Any]) -> tuple[ModelSpec, dict[str, Any]]:
    """(spec, transformers config dict) for a catalogue name, config.json path or dict."""
    if isinstance(source, Mapping):
        return model_from_hf_config(source), dict(source)
    path = Path(source).expanduser()
    if path.exists():
        cfg_path = path / "config.json" if path.is_dir() else path
        return model_from_hf_config(cfg_path), json.loads(cfg_path.read_text())
    spec = get_model(str(source))  # raises ConfigError naming the known models
    return spec, hf_config_dict(spec)


def build_model(
    source: str | Path | Mapping[str, Any] | ModelSpec,
    *,
    dtype: str = "fp32",
    device: str | torch.device = "cpu",
    seed: int = 0,
) -> EngineModel:
    """Build a model with random weights: eval mode, SDPA attention, on ``device``.

    ``source`` is a :class:`ModelSpec`, a catalogue name (``"tiny"``), a config.json path
    (or a directory holding one) or a parsed config.json dict.
    """
    if dtype not in TORCH_DTYPES:
        raise ConfigError(f"dtype={dtype!r} must be one of {', '.join(TORCH_DTYPES)}")
    if isinstance(source, ModelSpec):
        spec, cfg_dict = source, hf_config_dict(source)
    else:
        spec, cfg_dict = resolve_spec(source)
    config = _config_from_dict(cfg_dict, spec.name)
    device = torch.device(device)
    torch.manual_seed(seed)
    with device:  # allocate the weights where they will run
        model = AutoModelForCausalLM.from_config(config, attn_implementation="sdpa")
    model = model.to(dtype=TORCH_DTYPES[dtype]).eval()
    return EngineModel(model=model, spec=spec, dtype=dtype, device=device)
