"""Profiles for mixed weight/KV dtypes composed from AIConfigurator's tables.

    python -m calibrate.aic_dtype_pairs [--check] [--data DIR] [--out DIR]

vLLM's FP8 default (``--quantization fp8`` without ``--kv-cache-dtype fp8``) runs fp8
weights with a bf16 KV cache: the linear layers are fp8 GEMMs, attention runs in bf16 over
a bf16 cache. calibrate/aiconfigurator.py composes uniform dtypes only (fp8 means fp8
weights, fp8 KV cache and fp8 context attention). This module composes the pair the same
way, from the same trtllm tables, with the ops' dtypes taken apart:

    qkv, proj, gate+up, down GEMMs   fp8 rows of gemm_perf            (as the fp8 profile)
    logits GEMM                      bf16                             (as every profile)
    context attention                bf16 FMHA, bf16 KV cache rows    (as the bf16 profile)
    generation attention             bf16 KV cache rows               (as the bf16 profile)
    norms, activation, all-reduce    unchanged (bf16 activations in every profile)

and the KV cache's memory (which prompts and batches fit) counts 2 bytes per element.
Written as ``<gpu>__<model>__fp8-kvbf16__tp<n>.json`` (simulator/specs/dtypes.py
``dtype_label``), the file an empty ``[cost]`` section finds for weight_dtype = "fp8",
kv_dtype = "bf16" (simulator/costs/lookup.py). Deployments: llama-3.1-8b tp1 and
llama-3.1-70b at every tp whose fp8 weights fit, on h100-sxm and h200 (A100 has no FP8).

``--backend vllm`` (or ``sglang``) composes the same pairs from that engine's tables into
``simulator/profiles/stacks/<backend>/``, where a ``[stack]`` scenario finds them first:
vLLM's FP8 checkpoints run this pair by default, so without them a vLLM FP8 deployment was
priced by TensorRT-LLM's kernels.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from calibrate.aic_backends import ENGINE_NAMES, profiles_dir, systems
from calibrate.aic_tables import BACKEND, SystemTables
from calibrate.aiconfigurator import (
    AIC_VERSION,
    FIT_FRACTION,
    FORM,
    Composer,
    _close,
    _weights_fit,
    _without_date,
    cli_parser,
    cli_root,
    provenance,
    sweep,
)
from calibrate.fit import FitReport, fit_profile
from simulator.costs.profile import (
    CostProfile,
    load_profile,
    profile_file_name,
    save_profile,
)
from simulator.profile_table import ProfileTable, validate_metadata, validate_profile_table
from simulator.specs.dtypes import dtype_label
from simulator.specs.hardware import HARDWARE
from simulator.specs.models import MODELS

# (weight dtype, KV dtype) -> table dtypes (GEMM, context attention, KV cache), GEMM bytes
PAIRS: dict[tuple[str, str], tuple[str, str, str, float]] = {
    ("fp8", "bf16"): ("fp8", "bfloat16", "bfloat16", 1.0),
}
PAIR_GPUS = ("h100-sxm", "h200")


@dataclass
class PairComposer(Composer):
    """A :class:`Composer` whose KV cache (and attention) dtype differs from the weights'."""

    kv_dtype: str = "bf16"

    def quant(self) -> tuple[str, str, str, float]:
        return PAIRS[(self.dtype, self.kv_dtype)]

    def kv_fits(self, tokens: int) -> bool:
        hw = HARDWARE[self.hardware_name]
        need = (self.model.weight_bytes(self.dtype)
                + tokens * self.model.kv_bytes_per_token(self.kv_dtype)) / self.tp
        return need <= FIT_FRACTION * hw.memory_bytes


def deployments() -> Iterator[tuple[str, str, str, str, int]]:
    """(hardware, model, weight dtype, KV dtype, tp) of every pair profile."""
    for hw in PAIR_GPUS:
        for weight_dtype, kv_dtype in PAIRS:
            yield hw, "llama-3.1-8b", weight_dtype, kv_dtype, 1
            for tp in (1, 2, 4, 8):
                if _weights_fit(MODELS["llama-3.1-70b"], hw, weight_dtype, tp):
                    yield hw, "llama-3.1-70b", weight_dtype, kv_dtype, tp


def pair_table(composer: PairComposer) -> ProfileTable:
    """The composed steps as a validated profile table (contract 2)."""
    t, label = composer.tables, dtype_label(composer.dtype, composer.kv_dtype)
    steps = validate_profile_table(sweep(composer), f"composed {t.system} {label}")
    meta = validate_metadata({
        "device": composer.hardware_name, "model": composer.model.name,
        "dtype": composer.dtype, "kv_dtype": composer.kv_dtype, "tp": composer.tp,
        "engine_version": f"{ENGINE_NAMES[t.backend]} {t.data_version} (per-op tables)",
        "source": f"composed from AIConfigurator {AIC_VERSION} {t.system} {t.backend} "
                  f"{t.data_version}, {composer.dtype} GEMMs with {composer.kv_dtype} attention",
        "notes": "GPU kernel time only; see calibrate/aic_dtype_pairs.py",
    }, "composed table")
    return ProfileTable(steps=steps, metadata=meta)


def pair_provenance(tables: SystemTables, date: str, weight_dtype: str,
                    kv_dtype: str) -> dict[str, Any]:
    out = provenance(tables, date)
    out["notes"] = (f"python -m calibrate.aic_dtype_pairs: {weight_dtype} weights with a "
                    f"{kv_dtype} KV cache: {weight_dtype} GEMM rows, {kv_dtype} context and "
                    "generation attention rows (otherwise as calibrate/aiconfigurator.py). "
                    + out["notes"].split("; ", 1)[1])
    if "fmha" in out["aiconfigurator"]:  # a stack's tables: say what this pair reads
        out["aiconfigurator"]["fmha"] = (f"context attention in {kv_dtype} over the "
                                         f"{kv_dtype} KV cache")
    return out


def compose_and_fit(root: Path, date: str, backend: str = BACKEND
                    ) -> list[tuple[CostProfile, FitReport]]:
    """Compose and fit every pair deployment from ``backend``'s tables under ``root``."""
    out = []
    loaded: dict[str, SystemTables] = {}
    for hw, model, weight_dtype, kv_dtype, tp in deployments():
        system, data_version = systems(backend)[hw]
        if hw not in loaded:
            loaded[hw] = SystemTables(root, system, data_version, backend)
        composer = PairComposer(loaded[hw], MODELS[model], weight_dtype, tp, kv_dtype)
        table = pair_table(composer)
        out.append(fit_profile(
            table.steps, hardware=hw, model=model, weight_dtype=weight_dtype,
            kv_dtype=kv_dtype, tp=tp,
            provenance=pair_provenance(loaded[hw], date, weight_dtype, kv_dtype),
            source=f"composed {hw} {model} {weight_dtype}/{kv_dtype} tp{tp}", form=FORM))
    return out


def sync(root: Path, out_dir: Path, check: bool, date: str, backend: str = BACKEND
         ) -> tuple[list[str], list[tuple[CostProfile, FitReport]]]:
    """Write (or with ``check`` only compare) the pair profiles; return what changed."""
    changes = []
    fitted = compose_and_fit(root, date, backend)
    for profile, _ in fitted:
        label = dtype_label(profile.weight_dtype, profile.kv_dtype)
        path = out_dir / profile_file_name(profile.hardware, profile.model, label, profile.tp)
        if path.is_file() and _close(_without_date(load_profile(path)), _without_date(profile)):
            continue
        changes.append(f"write {path.name}")
        if not check:
            save_profile(profile, path)
    return changes, fitted


def main(argv: list[str] | None = None) -> int:
    args = cli_parser(__doc__).parse_args(argv)
    root = cli_root(args, "calibrate.aic_dtype_pairs")
    if root is None:
        return 2
    out = args.out or profiles_dir(args.backend)
    changes, fitted = sync(root, out, args.check, args.date, args.backend)
    for profile, report in fitted:
        label = dtype_label(profile.weight_dtype, profile.kv_dtype)
        name = profile_file_name(profile.hardware, profile.model, label, profile.tp)
        print(f"{name:46s} {report.n_points:4d} points  held-out MAPE {report.mape:6.2%}  "
              f"max {report.max_ape:6.2%}")
    for line in changes:
        print(line)
    print(f"{len(changes)} change(s); {len(fitted)} dtype-pair profiles in {out}")
    return 1 if args.check and changes else 0


if __name__ == "__main__":
    sys.exit(main())
