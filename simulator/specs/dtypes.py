"""Bytes per element for weight and KV-cache data types.

Weights may be quantised (int4 packs two values in a byte, so 0.5); the KV cache is
stored in 16-bit or fp8. Quantisation scales and zero points are ignored: for group
size 128 they add well under 2% to the weight bytes. MXFP4 (the OCP microscaling format
gpt-oss ships its experts in) is counted with its scales: 32 four-bit values share one
8-bit exponent, 4.25 bits a weight. A quantised checkpoint's embedding
and lm_head stay 16-bit (``ModelSpec.weight_bytes``).
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

from simulator.errors import ConfigError

WEIGHT_DTYPE_BYTES: Mapping[str, float] = MappingProxyType(
    {"fp32": 4.0, "fp16": 2.0, "bf16": 2.0, "fp8": 1.0, "int8": 1.0, "int4": 0.5,
     "mxfp4": 4.25 / 8}
)
KV_DTYPE_BYTES: Mapping[str, float] = MappingProxyType({"fp16": 2.0, "bf16": 2.0, "fp8": 1.0})


def _lookup(table: Mapping[str, float], name: str, where: str) -> float:
    key = name.lower() if isinstance(name, str) else None  # a list or object: no dtype
    if key not in table:
        raise ConfigError(f"{where}={name!r} is not a known dtype; known: {', '.join(table)}")
    return table[key]


def weight_dtype_bytes(name: str, where: str = "weight_dtype") -> float:
    """Bytes per weight element for ``name``; ``where`` names the field in errors."""
    return _lookup(WEIGHT_DTYPE_BYTES, name, where)


def kv_dtype_bytes(name: str, where: str = "kv_dtype") -> float:
    """Bytes per KV-cache element for ``name``; ``where`` names the field in errors."""
    return _lookup(KV_DTYPE_BYTES, name, where)


def same_cost_dtype(a: str, b: str) -> bool:
    """Whether two dtypes cost the same to compute with: fp16 and bf16 are both 2 bytes and
    run at the same tensor-core rate, so a profile measured in one prices the other."""
    half = ("fp16", "bf16")
    a, b = a.lower(), b.lower()
    return a == b or (a in half and b in half)


def natural_kv_dtype(weight_dtype: str) -> str:
    """The KV dtype a deployment gets unless it says otherwise: bf16 for 16/32-bit weights,
    fp8 for quantised ones (the scenario's ``model.kv_dtype`` default); bf16 for MXFP4,
    whose checkpoints (gpt-oss) keep attention in bf16 and carry no KV scales, so vLLM's
    and SGLang's ``auto`` cache is bf16."""
    return "bf16" if weight_dtype.lower() in ("fp32", "fp16", "bf16", "mxfp4") else "fp8"


def dtype_label(weight_dtype: str, kv_dtype: str) -> str:
    """The dtype part of a profile file name: the weight dtype when the KV cache is in its
    natural dtype (``fp8``: fp8 weights and fp8 KV), else ``<weight>-kv<kv>`` (``fp8-kvbf16``:
    fp8 weights with a bf16 KV cache, vLLM's FP8 default)."""
    w, kv = weight_dtype.lower(), kv_dtype.lower()
    return w if same_cost_dtype(kv, natural_kv_dtype(w)) else f"{w}-kv{kv}"
