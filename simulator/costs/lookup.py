"""Which shipped cost profile an empty ``[cost]`` section uses for a deployment.

Search order, first hit wins (each step a file ``<gpu>__<model>__<dtypes>__tp<n>.json``,
``<dtypes>`` as :func:`simulator.specs.dtypes.dtype_label` names them: ``fp8`` for fp8
weights with an fp8 KV cache, ``fp8-kvbf16`` for fp8 weights with a bf16 one):

1. on a CPU, the profile measured on this machine (``servesim calibrate --here``);
2. when a serving stack is named, a measured profile from that stack's own kernel tables
   (:func:`tables_of`): the model's own, else a stand-in's (a catalogue model with the
   same layer shapes, simulator/costs/shape_equivalent.py). A stack's kernels beat
   another source's measurement of the model itself: Llama-2-70B FP16 under ``trtllm``
   is priced by Llama-3.1-70B's TensorRT-LLM-composed table (same blocks; the 32k vs
   128k vocabulary is corrected in the logits GEMM; neither the context limit, 4k vs
   128k, nor the RoPE base changes a kernel's work), not by the Splitwise authors' table;
3. the model's own measured profile: ``simulator/profiles/stacks/<stack>/`` when a
   serving stack is named, then ``simulator/profiles/``;
4. a measured stand-in profile, in the same two folders;
5. the model's roofline-prior file (stack folder, then the generic one).

A profile counts only if its KV dtype costs what the deployment's does (fp16 = bf16).
"""

from __future__ import annotations

from pathlib import Path

from simulator.costs.machine import here
from simulator.costs.profile import PROFILES_DIR, CostProfile, load_profile, profile_file_name
from simulator.costs.shape_equivalent import shape_equivalents
from simulator.profile_cache import find_cached_profile
from simulator.specs.dtypes import dtype_label, same_cost_dtype
from simulator.specs.hardware import HardwareSpec
from simulator.specs.models import ModelSpec

STACKS_DIR = Path(__file__).resolve().parent.parent / "profiles" / "stacks"


def tables_of(path: Path, profile: CostProfile) -> str | None:
    """The serving stack whose kernel tables measured ``profile``: its folder's name under
    ``profiles/stacks/``, else the AIConfigurator backend it was composed from (the
    generic folder's compositions are TensorRT-LLM's, ``trtllm``), else None (a prior, or
    a measurement that names no stack, such as the Splitwise tables)."""
    if path.parent.parent == STACKS_DIR:
        return path.parent.name
    backend = profile.provenance.get("aiconfigurator", {})
    return backend.get("backend") if isinstance(backend, dict) else None


def _labels(weight_dtype: str, kv_dtype: str) -> list[str]:
    """File-name dtype labels to try: the pair's own, then with fp16 and bf16 swapped."""
    swap = {"fp16": "bf16", "bf16": "fp16"}
    w, kv = weight_dtype.lower(), kv_dtype.lower()
    pairs = [(w, kv), (w, swap.get(kv, kv)), (swap.get(w, w), kv),
             (swap.get(w, w), swap.get(kv, kv))]
    return list(dict.fromkeys(dtype_label(a, b) for a, b in pairs))


def _candidates(folder: Path, hw: str, model: str, weight_dtype: str, kv_dtype: str,
                tp: int) -> list[tuple[Path, CostProfile]]:
    """Profiles in ``folder`` for this deployment whose KV dtype matches, measured first."""
    found = []
    for label in _labels(weight_dtype, kv_dtype):
        path = folder / profile_file_name(hw, model, label, tp)
        if path.is_file():
            profile = load_profile(path)
            if same_cost_dtype(profile.kv_dtype, kv_dtype) and profile.model == model:
                found.append((path, profile))
    return sorted(found, key=lambda pair: pair[1].form == "roofline")  # stable: measured first


def find_default_profile(model: ModelSpec, hw: HardwareSpec, tp: int, weight_dtype: str,
                         kv_dtype: str, threads: int = 1, stack: str | None = None
                         ) -> tuple[Path, CostProfile, ModelSpec | None] | None:
    """(file, profile, stand-in model or None) by the module docstring's order, else None."""
    if hw.name == "cpu":
        cached = find_cached_profile(here("cpu", threads), hw.name, model.name, weight_dtype, tp)
        if cached is not None:
            return cached, load_profile(cached), None
    folders = ([STACKS_DIR / stack] if stack else []) + [PROFILES_DIR]
    for candidate in [model, *shape_equivalents(model)] if stack else []:
        for folder in folders:
            for path, profile in _candidates(folder, hw.name, candidate.name, weight_dtype,
                                             kv_dtype, tp):
                if profile.form != "roofline" and tables_of(path, profile) == stack:
                    return path, profile, None if candidate is model else candidate
    priors: list[tuple[Path, CostProfile]] = []
    for candidate in [model, *shape_equivalents(model)]:
        for folder in folders:
            for path, profile in _candidates(folder, hw.name, candidate.name, weight_dtype,
                                             kv_dtype, tp):
                if profile.form != "roofline":
                    return path, profile, None if candidate is model else candidate
                if candidate is model:
                    priors.append((path, profile))
    return (*priors[0], None) if priors else None
