"""Profiles for the other dense catalogue models, composed from AIConfigurator's tables.

    python -m calibrate.aic_models [--backend trtllm|vllm|sglang] [--check] [--data DIR]
                                   [--out DIR]

calibrate/aiconfigurator.py composes Llama-3.1-8B and -70B. Its composition reads nothing
Llama-3.1-specific: a step is the sum of GEMMs at the model's own (m, n, k), context and
generation attention at its own heads, KV heads and head width, norms, activation and TP
all-reduce (AIConfigurator's LLAMAModel op list, which its Qwen and InternLM models share
for dense layers). So the same tables price the dense models peer simulators ship, whose
shapes the tables cover: a GEMM shape not collected is read from the utilisation of the
nearest collected ones (as AIConfigurator's resolver does), an attention shape needs its
KV-head count collected at that head width.

    model           layers  hidden  heads/kv  MLP     vocab    deployments (weights fit)
    llama-2-7b      32      4096    32/32     11008   32000    tp 1, 2
    codellama-34b   48      8192    64/8      22016   32000    tp 1, 2, 4
    qwen2.5-7b      28      3584    28/4      18944   152064   tp 1, 2
    qwen-72b        80      8192    64/64     24576   152064   tp 2, 4, 8
    internlm2-20b   48      6144    48/8      16384   92544    tp 1, 2
    llama-3.1-405b  126     16384   128/8     53248   128256   tp 4, 8
    gpt-j-6b        28      4096    16/16     10923*  50400    tp 1, 2
    falcon-180b     80      14848   232/8     39595*  65024    tp 4, 8

(* a SwiGLU of 2/3 the width of their two-matrix GELU MLP: the same weights and FLOPs;
their parallel attention + MLP block takes one all-reduce a layer, ModelSpec.parallel_block)

in bf16 on A100-80GB, H100 SXM and H200, and in fp8 (weights and KV) on the last two.
Phi-2 (head width 80: no table holds it) keeps its prior; GPT-J (256) and Falcon-180B (64)
have no A100 attention rows (width 128 only) and keep the prior there; Mixtral (MoE) is
composed by calibrate/aic_moe.py. Deployments whose shapes a backend's tables lack are
skipped and listed (vLLM's generation-attention tables hold 1-8 KV heads only, so its MHA
deployments at low tp are skipped).

The files are the ones an empty ``[cost]`` section finds for the model (they replace the
roofline priors of the same name, which calibrate/roofline_profiles.py then leaves alone,
as it does every measured profile); ``--backend vllm``/``sglang`` write into
``simulator/profiles/stacks/<backend>/`` for the stack presets.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator, Sequence
from functools import partial
from pathlib import Path
from typing import Any

from calibrate.aic_backends import EXTRA_VERSIONS, profiles_dir, systems
from calibrate.aic_tables import BACKEND, SystemTables
from calibrate.aiconfigurator import (
    FIT_HEADER,
    FORM,
    MODEL_IDS,
    Composer,
    _close,
    _weights_fit,
    _without_date,
    cli_parser,
    cli_root,
    fit_line,
    profile_table,
    provenance,
)
from calibrate.fit import FitReport, fit_profile
from simulator.costs.profile import CostProfile, load_profile, profile_file_name, save_profile
from simulator.errors import ConfigError
from simulator.specs.hardware import HARDWARE
from simulator.specs.models import MODELS

# catalogue name -> (Hugging Face id, tensor-parallel degrees composed)
MODELS_COMPOSED: dict[str, tuple[str, tuple[int, ...]]] = {
    "llama-2-7b": ("meta-llama/Llama-2-7b-hf", (1, 2)),
    "codellama-34b": ("codellama/CodeLlama-34b-hf", (1, 2, 4)),
    "qwen2.5-7b": ("Qwen/Qwen2.5-7B", (1, 2)),
    "qwen-72b": ("Qwen/Qwen-72B", (2, 4, 8)),
    "internlm2-20b": ("internlm/internlm2-20b", (1, 2)),
    "llama-3.1-405b": ("meta-llama/Meta-Llama-3.1-405B", (4, 8)),
    "gpt-j-6b": ("EleutherAI/gpt-j-6b", (1, 2)),
    "falcon-180b": ("tiiuae/falcon-180B", (4, 8)),
}

MODELS_TPS = {model: tps for model, (_, tps) in MODELS_COMPOSED.items()}
# On the extra GPUs, the Llama-3.1 pair calibrate/aiconfigurator.py composes elsewhere too
ALL_MODELS = {"llama-3.1-8b": (1, 2), "llama-3.1-70b": (1, 2, 4, 8), **MODELS_TPS}
# L40S at tp 1 only: AIConfigurator's L40S all-reduce tables (custom and NCCL) take 20 ms
# for 8M elements over 8 GPUs (0.8 GB/s), which prices Llama-3.1-70B tp 8 ~10x slower per
# step than the roofline prior, while TensorRT-LLM's own L40S max-throughput rows sit within
# 1.7x of the prior: the two L40S machines' PCIe topologies evidently differ, and neither
# source states its own.
MAX_TP = {"l40s": 1}
HF_IDS = {**{m: hf for m, (hf, _) in MODELS_COMPOSED.items()}, **MODEL_IDS}


def deployments(backend: str = BACKEND) -> Iterator[tuple[str, str, str, int]]:
    """(hardware, model, dtype, tp): bf16 on every GPU with tables, fp8 where it has FP8
    math, at each tp whose weights fit: ``MODELS_COMPOSED`` on the GPUs
    calibrate/aiconfigurator.py composes, and every model of ``ALL_MODELS`` on the extra
    GPUs whose tables only this module reads (``EXTRA_VERSIONS``: L40S, B200)."""
    for hw in gpus(backend):
        extra = hw in EXTRA_VERSIONS.get(backend, {})
        dtypes = ("bf16", "fp8") if HARDWARE[hw].fp8_tflops is not None else ("bf16",)
        for dtype in dtypes:
            for model, tps in (ALL_MODELS if extra else MODELS_TPS).items():
                for tp in tps:
                    if tp <= MAX_TP.get(hw, 8) and _weights_fit(MODELS[model], hw, dtype, tp):
                        yield hw, model, dtype, tp


def gpus(backend: str) -> dict[str, tuple[str, str]]:
    """GPU -> (AIConfigurator system, table version): the shipped set plus the extra."""
    return {**systems(backend), **EXTRA_VERSIONS.get(backend, {})}


def model_provenance(tables: SystemTables, date: str, model: str) -> dict[str, Any]:
    """calibrate/aiconfigurator.py's provenance, naming this module and the model."""
    out = provenance(tables, date)
    out["notes"] = ("python -m calibrate.aic_models: " + model + " composed with "
                    "calibrate/aiconfigurator.py's op list at its own shapes; "
                    + out["notes"].split("; ", 1)[1])
    out["aiconfigurator"]["model"] = {model: HF_IDS[model]}
    return out


def compose_and_fit(root: Path, date: str, backend: str = BACKEND
                    ) -> tuple[list[tuple[CostProfile, FitReport]], list[str]]:
    """Every deployment ``backend``'s tables can price, fitted; and the ones skipped, why."""
    out: list[tuple[CostProfile, FitReport]] = []
    skipped: list[str] = []
    loaded: dict[str, SystemTables] = {}
    for hw, model, dtype, tp in deployments(backend):
        system, data_version = gpus(backend)[hw]
        if hw not in loaded:
            loaded[hw] = SystemTables(root, system, data_version, backend)
        fitted = fit_composition(Composer(loaded[hw], MODELS[model], dtype, tp),
                                 model_provenance(loaded[hw], date, model), skipped)
        if fitted is not None:
            out.append(fitted)
    return out, skipped


def fit_composition(composer: Composer, provenance: dict[str, Any], skipped: list[str]
                    ) -> tuple[CostProfile, FitReport] | None:
    """``composer``'s steps fitted as a profile; None, with a line in ``skipped``, when the
    tables lack one of its shapes (a ConfigError from the composition)."""
    hw, model = composer.hardware_name, composer.model.name
    dtype, tp = composer.dtype, composer.tp
    try:
        table = profile_table(composer)
    except ConfigError as exc:  # a shape this backend's tables do not hold
        skipped.append(f"skip {profile_file_name(hw, model, dtype, tp)}: {exc}")
        return None
    return fit_profile(table.steps, hardware=hw, model=model, weight_dtype=dtype,
                       kv_dtype=dtype, tp=tp, provenance=provenance,
                       source=f"composed {hw} {model} {dtype} tp{tp}", form=FORM)


def sync(root: Path, out_dir: Path, check: bool, date: str, backend: str = BACKEND,
         compose: Callable[[Path, str, str], tuple[list[tuple[CostProfile, FitReport]],
                                                   list[str]]] = compose_and_fit,
         ) -> tuple[list[str], list[tuple[CostProfile, FitReport]], list[str]]:
    """Write (or with ``check`` only compare) the profiles ``compose`` fits (default this
    module's; calibrate/aic_moe.py passes its own); return the changes, the fits and the
    skipped deployments."""
    changes = []
    fitted, skipped = compose(root, date, backend)
    for profile, _ in fitted:
        path = out_dir / profile_file_name(profile.hardware, profile.model,
                                           profile.weight_dtype, profile.tp)
        if path.is_file() and _close(_without_date(load_profile(path)), _without_date(profile)):
            continue
        changes.append(f"write {path.name}")
        if not check:
            out_dir.mkdir(parents=True, exist_ok=True)
            save_profile(profile, path)
    return changes, fitted, skipped


def main(argv: list[str] | None = None) -> int:
    return run_cli(argv, __doc__ or "", "calibrate.aic_models")


def run_cli(argv: list[str] | None, doc: str, prog: str,
            compose: Callable[..., tuple[list[tuple[CostProfile, FitReport]],
                                         list[str]]] = compose_and_fit,
            models: Sequence[str] = ()) -> int:
    """A composing command (this module's, calibrate/aic_moe.py's): compose, fit, write or
    check, print each fit (held-out MAPE, worst point, MAPE by phase) and what was skipped
    or written. ``models``: the choices of a ``--model`` option that composes that one
    model only (``compose`` then takes ``models=``), composed by default or not."""
    parser = cli_parser(doc)
    if models:
        parser.add_argument("--model", choices=models, default=None,
                            help="compose this model only (with --check: write nothing)")
    args = parser.parse_args(argv)
    root = cli_root(args, prog)
    if root is None:
        return 2
    if getattr(args, "model", None):
        compose = partial(compose, models=(args.model,))
    out = args.out or profiles_dir(args.backend)
    changes, fitted, skipped = sync(root, out, args.check, args.date, args.backend, compose)
    print(FIT_HEADER)
    for profile, report in fitted:
        print(fit_line(profile_file_name(profile.hardware, profile.model, profile.weight_dtype,
                                         profile.tp), report))
    for line in (*skipped, *changes):
        print(line)
    print(f"{len(changes)} change(s); {len(fitted)} composed profiles in {out}, "
          f"{len(skipped)} skipped")
    return 1 if args.check and changes else 0


if __name__ == "__main__":
    sys.exit(main())
