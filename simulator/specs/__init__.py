"""Model and hardware specs: the shapes and datasheet figures the cost models price."""

from simulator.specs.dtypes import (
    KV_DTYPE_BYTES,
    WEIGHT_DTYPE_BYTES,
    kv_dtype_bytes,
    weight_dtype_bytes,
)
from simulator.specs.hardware import ALIASES, HARDWARE, HardwareSpec, get_hardware
from simulator.specs.models import (
    MODEL_ALIASES,
    MODELS,
    ModelSpec,
    catalogue_name,
    get_model,
    model_from_hf_config,
)

__all__ = [
    "ALIASES",
    "HARDWARE",
    "KV_DTYPE_BYTES",
    "MODELS",
    "MODEL_ALIASES",
    "WEIGHT_DTYPE_BYTES",
    "HardwareSpec",
    "ModelSpec",
    "catalogue_name",
    "get_hardware",
    "get_model",
    "kv_dtype_bytes",
    "model_from_hf_config",
    "weight_dtype_bytes",
]
