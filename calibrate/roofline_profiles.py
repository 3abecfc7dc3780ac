"""Regenerate the shipped roofline-prior cost profiles in ``simulator/profiles``.

    python -m calibrate.roofline_profiles            # write (unchanged files keep their date)
    python -m calibrate.roofline_profiles --check    # exit 1 if the shipped set is stale

Which deployments get a prior (kept to tens of files):

- the 7-8B dense models, bf16, tp 1, on every catalogue GPU;
- the 70B models and Mixtral, bf16, tp 1 where the weights fit one GPU, and tp 2/4/8 on
  NVLink GPUs where they fit;
- llama-3.1-8b and -70b in fp8 (weights and KV cache) on GPUs with FP8 math, at the
  smallest tp that fits;
- the toy models (tiny, small) on the CPU host in bf16 and fp32.

Where the roofline prior prices all-reduces with a curve fitted to measured NCCL tables
(simulator/costs/collectives.py: a100-80gb, h100-sxm, h200 at tp 2/4/8), the provenance's
``allreduce`` names it; elsewhere the 10 us + link formula applies, as before. Where it
prices a MoE model's experts by a measured layer (simulator/costs/moe_tables.py, the
TensorRT-LLM tables), ``experts`` names it.

"Fits" means weights per GPU <= 90% of its memory, leaving room for KV cache. Profiles
that were measured (provenance source is not the roofline prior) are never touched.
"""

from __future__ import annotations

import argparse
import datetime as dt
import sys
from collections.abc import Iterator
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

from simulator.costs.prior_efficiency import fitted_prior, prior_note
from simulator.costs.profile import (
    PROFILES_DIR,
    CostProfile,
    load_profile,
    profile_file_name,
    save_profile,
)
from simulator.costs.roofline import KNOBS, STACK_KNOBS
from simulator.specs.hardware import HARDWARE, HardwareSpec
from simulator.specs.models import MODELS, ModelSpec

PRIOR_SOURCE = "roofline prior, not measured"
FIT_FRACTION = 0.9  # weights may use this share of device memory
DENSE_7B = ("llama-2-7b", "llama-3.1-8b", "mistral-7b", "qwen2.5-7b")
LARGE = ("llama-2-70b", "llama-3.1-70b", "mixtral-8x7b")
FP8_MODELS = ("llama-3.1-8b", "llama-3.1-70b")
TOYS = ("tiny", "small")
GPUS = tuple(name for name in HARDWARE if name != "cpu")


def fits(model: ModelSpec, hw: HardwareSpec, weight_dtype: str, tp: int) -> bool:
    """Whether ``tp`` GPUs hold the weights with room left for the KV cache."""
    return model.weight_bytes(weight_dtype) / tp <= FIT_FRACTION * hw.memory_bytes


def deployments() -> Iterator[tuple[str, str, str, int]]:
    """(hardware, model, weight_dtype, tp) for every shipped prior."""
    for hw_name in GPUS:
        hw = HARDWARE[hw_name]
        for name in DENSE_7B:
            if fits(MODELS[name], hw, "bf16", 1):
                yield hw_name, name, "bf16", 1
        for name in LARGE:
            tps = (1, 2, 4, 8) if hw.link_kind == "nvlink" else (1,)
            yield from (
                (hw_name, name, "bf16", tp) for tp in tps if fits(MODELS[name], hw, "bf16", tp)
            )
        if hw.fp8_tflops is not None:
            for name in FP8_MODELS:
                tp = next((t for t in (1, 2, 4, 8) if fits(MODELS[name], hw, "fp8", t)), None)
                if tp is not None:
                    yield hw_name, name, "fp8", tp
    for name in TOYS:
        yield from (("cpu", name, dtype, 1) for dtype in ("bf16", "fp32"))


def prior(hw_name: str, model_name: str, weight_dtype: str, tp: int, date: str) -> CostProfile:
    """The roofline prior for one deployment: RooflineCost's default knobs, the
    efficiencies fitted to the GPU's measured tables in that dtype where they exist
    (simulator/costs/prior_efficiency.py)."""
    # Building the model validates tp against the heads and the link before shipping it.
    kv_dtype = "fp8" if weight_dtype == "fp8" else "bf16"  # FP8 deployments quantise KV too
    cost = fitted_prior(MODELS[model_name], HARDWARE[hw_name], tp, weight_dtype, kv_dtype)
    # a stack's knobs (its attention kernel) are the stack preset's, not the file's
    defaults: dict[str, float] = {knob: getattr(cost, knob) for knob in KNOBS
                                  if knob not in STACK_KNOBS}
    try:
        software = f"servesim {version('servesim')}"
    except PackageNotFoundError:
        software = "servesim (not installed)"
    # tp > 1 where a measured all-reduce curve exists: which one (elsewhere the formula)
    allreduce = cost.allreduce_source() if cost.measured_allreduce else None
    experts = cost.moe_source() if cost.measured_moe else None
    return CostProfile(
        hardware=hw_name,
        model=model_name,
        weight_dtype=weight_dtype,
        kv_dtype=kv_dtype,
        tp=tp,
        form="roofline",
        coefficients=defaults,
        fit={},
        provenance={
            "source": PRIOR_SOURCE,
            "measured_by": "nobody: python -m calibrate.roofline_profiles",
            "date": date,
            "software": software,
            "notes": "datasheet peaks (simulator/specs/hardware.py); formula and sources "
            "of each constant in simulator/costs/roofline.py; "
            + prior_note(hw_name, weight_dtype),
            **({"allreduce": allreduce} if allreduce else {}),
            **({"experts": experts} if experts else {}),
        },
    )


def _without_date(profile: CostProfile) -> dict[str, object]:
    return {**profile.to_dict(), "provenance": {**profile.provenance, "date": None}}


def sync(out_dir: Path, check: bool, date: str) -> list[str]:
    """Write (or with ``check`` only compare) the priors; return what changed."""
    changes: list[str] = []
    wanted = {profile_file_name(*d): prior(*d, date) for d in deployments()}
    for name, profile in wanted.items():
        path = out_dir / name
        if path.is_file():
            existing = load_profile(path)
            if (existing.provenance.get("source") != PRIOR_SOURCE  # measured: never touched
                    or _without_date(existing) == _without_date(profile)):
                continue
        changes.append(f"write {name}")
        if not check:
            save_profile(profile, path)
    for path in sorted(out_dir.glob("*.json")):
        stale = path.name not in wanted
        if stale and load_profile(path).provenance.get("source") == PRIOR_SOURCE:
            changes.append(f"remove {path.name}")
            if not check:
                path.unlink()
    return changes


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=PROFILES_DIR, help="profiles folder")
    parser.add_argument("--check", action="store_true", help="only report; exit 1 if stale")
    parser.add_argument("--date", default=dt.date.today().isoformat(), help="provenance date")
    args = parser.parse_args(argv)
    changes = sync(args.out, args.check, args.date)
    for line in changes:
        print(line)
    total = len(list(deployments()))
    print(f"{len(changes)} change(s); {total} roofline priors in {args.out}")
    return 1 if args.check and changes else 0


if __name__ == "__main__":
    sys.exit(main())
