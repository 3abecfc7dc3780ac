"""Fit the roofline prior's efficiencies per GPU to that GPU's measured operator tables.

    python -m calibrate.prior_efficiency            # write simulator/costs/prior_efficiency.json
    python -m calibrate.prior_efficiency --check    # exit 1 if the shipped file is stale

The prior (simulator/costs/roofline.py) prices a step from datasheet peaks and three
efficiencies: eff_c, the share of dense peak FLOP/s the matmuls and attention reach; eff_m,
the share of peak HBM bandwidth the weight reads reach; eff_kv, the same for attention's KV-
cache reads. Their defaults (0.6, 0.8, 0.8) are assumptions. Where servesim ships profiles
composed from measured per-operator tables for a GPU (AIConfigurator 0.12.0's TensorRT-LLM
tables: calibrate/aiconfigurator.py, aic_models.py, aic_moe.py), this fits them: for every
such profile on the GPU, the prior of the same deployment prices pure decodes of 1-512 rows
over 500-3,000 tokens of context each and prefills of 64-8,192 tokens, those inside the
steps the profile was fitted to (its fit's ``ranges``: a large model at low tp is composed
only up to the context its KV cache holds, and its piecewise form read past that is not a
measurement), and ``scipy.optimize.least_squares`` minimises the log of prior / measured
over all of them (every shape weighs the same; the step overhead, all-reduce and
per-request terms keep their defaults). Fitted per GPU and weight dtype (FP8 kernels reach
a different share of FP8 peak than bf16 ones of theirs); a deployment without composed
profiles on its GPU and dtype keeps the defaults, but for one thing: a GPU with a
published measurement of its bf16 matmul throughput (simulator/costs/matmul_published.json,
one script run on many cards) gets a bf16 eff_c transferred from the fitted GPUs measured
by the same script: the median over them of eff_c / (measured matmul / datasheet peak),
times its own share of peak (:func:`transferred`; eff_m, eff_kv and t_layer keep the
defaults, which nothing measured there moves). The result is data, with its provenance,
read by :func:`simulator.costs.prior_efficiency.prior_knobs` wherever the simulator builds a
prior.
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from scipy.optimize import least_squares

from calibrate.aiconfigurator import SOURCE_PREFIX
from calibrate.generated_file import write_or_check
from simulator.costs.prior_efficiency import EFFICIENCY_FILE, MATMUL_FILE, matmul_shares
from simulator.costs.profile import CostProfile, load_profile, shipped_profiles
from simulator.costs.roofline import RooflineCost
from simulator.shapes import StepShape
from simulator.specs.hardware import HARDWARE
from simulator.specs.models import get_model

DECODE_ROWS = (1, 4, 16, 64, 128, 256, 512)
DECODE_CONTEXT = (500, 1500, 3000)  # tokens of context per row
PREFILLS = (64, 128, 192, 256, 384, 1024, 2048, 4096, 8192)  # one prompt from an empty cache
START = (0.6, 0.8, 0.8, 0.0)  # RooflineCost's defaults: eff_c, eff_m, eff_kv, t_layer (us)
KNOB_NAMES = ("compute_efficiency", "memory_efficiency", "kv_memory_efficiency")


def shapes() -> list[StepShape]:
    """Every step priced: the pure decodes, then the prefills."""
    out = [StepShape(0, 0.0, d, d * c) for d in DECODE_ROWS for c in DECODE_CONTEXT]
    return out + [StepShape(p, p * p / 2.0, 0, 0) for p in PREFILLS]


def measured_by_gpu(exclude: Sequence[str] = ()) -> dict[str, dict[str, list[CostProfile]]]:
    """The shipped profiles composed from measured operator tables, by GPU and weight
    dtype, but ``exclude``'s models'."""
    found: dict[str, dict[str, list[CostProfile]]] = {}
    for path in shipped_profiles():
        profile = load_profile(path)
        if (profile.provenance.get("source", "").startswith(SOURCE_PREFIX)
                and profile.model not in exclude):
            by_dtype = found.setdefault(profile.hardware, {})
            by_dtype.setdefault(profile.weight_dtype, []).append(profile)
    return found


@dataclass(frozen=True)
class Measured:
    """One profile's measured step times at the shapes it was composed over, priced once:
    the least-squares fits price the prior thousands of times against the same values."""

    profile: CostProfile
    shapes: tuple[StepShape, ...]
    times_s: tuple[float, ...]


def measure(profile: CostProfile) -> Measured:
    """``profile``'s step times at each of :func:`shapes` inside its fit's ranges."""
    measured = profile.build(get_model(profile.model), HARDWARE[profile.hardware])
    kept = tuple(s for s in shapes() if composed_over(profile, s))
    return Measured(profile, kept, tuple(measured.step_time(s) for s in kept))


def log_ratios(measured: Sequence[Measured], eff_c: float, eff_m: float, eff_kv: float,
               layer_us: float = 0.0) -> np.ndarray:
    """log(prior / measured) of every shape of every profile, at these efficiencies and a
    per-layer floor of ``layer_us`` microseconds a step."""
    out = []
    for m in measured:
        profile = m.profile
        # the experts' roofline too (moe_kind ""): the efficiencies are the formula's, and
        # a MoE profile composed from the same MoE table the prior's measured curve reads
        # would be fitted to itself there
        prior = RooflineCost(get_model(profile.model), HARDWARE[profile.hardware], profile.tp,
                             profile.weight_dtype, profile.kv_dtype,
                             compute_efficiency=eff_c, memory_efficiency=eff_m,
                             kv_memory_efficiency=eff_kv, layer_overhead_s=layer_us * 1e-6,
                             moe_kind="")
        out += [math.log(prior.step_time(s) / t) for s, t in zip(m.shapes, m.times_s,
                                                                  strict=True)]
    return np.array(out)


def composed_over(profile: CostProfile, shape: StepShape) -> bool:
    """Whether ``shape`` lies inside the steps ``profile`` was fitted to (its fit's
    ``ranges``; a profile without them counts every shape)."""
    ranges = profile.fit.get("ranges") or {}
    return all(getattr(shape, key) <= ranges[key][1] for key in
               ("num_prefill_tokens", "num_decode_seqs", "decode_context_tokens")
               if key in ranges)


def fit_params(profiles: Sequence[Measured], floor: bool) -> tuple[float, ...]:
    """(eff_c, eff_m, eff_kv, t_layer in us) fitted to ``profiles``; t_layer 0 unless
    ``floor``."""
    n = 4 if floor else 3
    res = least_squares(lambda x: log_ratios(profiles, *x), START[:n],
                        bounds=([0.05] * 3 + [0.0] * (n - 3), [1.0] * 3 + [500.0] * (n - 3)))
    values = [round(float(v), 3) for v in res.x]
    return tuple(values + [0.0] * (4 - n))


def held_out(profiles: Sequence[Measured], floor: bool) -> float:
    """Share of shapes within 15% when each profile is priced by the parameters fitted to
    the others of its GPU and dtype (leave one profile out); nan with one profile."""
    if len(profiles) < 2:
        return math.nan
    hits = []
    for i, profile in enumerate(profiles):
        params = fit_params([p for j, p in enumerate(profiles) if j != i], floor)
        hits += list(np.abs(np.exp(log_ratios([profile], *params)) - 1) <= 0.15)
    return float(np.mean(hits))


def fit_gpu(profiles: Sequence[CostProfile]) -> dict[str, object]:
    """The fitted prior of one GPU and weight dtype, and how well it then matches. Two
    forms are fitted, the efficiencies alone and with a per-layer floor t_layer; the floor
    is kept when it predicts the held-out profiles at least as well (``held_out``)."""
    measured = [measure(p) for p in profiles]
    plain, floored = held_out(measured, False), held_out(measured, True)
    floor = not math.isnan(floored) and floored >= plain
    eff_c, eff_m, eff_kv, layer_us = fit_params(measured, floor)
    before = np.exp(log_ratios(measured, *START))
    after = np.exp(log_ratios(measured, eff_c, eff_m, eff_kv, layer_us))
    return {
        "compute_efficiency": eff_c,
        "memory_efficiency": eff_m,
        "kv_memory_efficiency": eff_kv,
        "layer_overhead_s": round(layer_us * 1e-6, 9),
        "profiles": sorted(f"{p.model} tp{p.tp} kv {p.kv_dtype}" for p in profiles),
        "shapes": int(after.size),
        "median_prior_over_measured": {"defaults": round(float(np.median(before)), 3),
                                       "fitted": round(float(np.median(after)), 3)},
        "within_15pct": {"defaults": round(float(np.mean(np.abs(before - 1) <= 0.15)), 3),
                         "fitted": round(float(np.mean(np.abs(after - 1) <= 0.15)), 3)},
        "within_15pct_held_out": {
            "efficiencies": None if math.isnan(plain) else round(plain, 3),
            "with_layer_floor": None if math.isnan(floored) else round(floored, 3)},
    }


def transferred(fitted_gpus: Mapping[str, Mapping[str, Mapping[str, object]]],
                shares: Mapping[str, float]) -> dict[str, dict[str, dict[str, object]]]:
    """bf16 rows for the GPUs in ``shares`` (GPU -> measured matmul / peak) that have no
    fitted bf16 row: eff_c = r x their share, r the median over the fitted GPUs in
    ``shares`` of eff_c / share; each row records r, the share, and how well the same rule
    predicts each fitted GPU from the others (``leave_one_out``). {} with no fitted GPU
    measured."""
    ratios = {gpu: float(rows["bf16"]["compute_efficiency"]) / shares[gpu]  # type: ignore[arg-type]
              for gpu, rows in sorted(fitted_gpus.items()) if "bf16" in rows and gpu in shares}
    if not ratios:
        return {}
    ratio = statistics.median(ratios.values())
    check = {}
    for gpu in ratios:
        others = statistics.median(v for g, v in ratios.items() if g != gpu) if len(
            ratios) > 1 else math.nan
        check[gpu] = {"predicted": round(others * shares[gpu], 3),
                      "fitted": fitted_gpus[gpu]["bf16"]["compute_efficiency"]}
    return {gpu: {"bf16": {
        "compute_efficiency": round(ratio * share, 3),
        "transferred": {"matmul_share_of_peak": round(share, 4), "ratio": round(ratio, 4),
                        "ratio_by_gpu": {g: round(v, 4) for g, v in ratios.items()},
                        "leave_one_out": check}}}
            for gpu, share in sorted(shares.items()) if "bf16" not in fitted_gpus.get(gpu, {})}


def fitted(exclude: Sequence[str] = (), matmul: Path = MATMUL_FILE) -> dict[str, object]:
    """The file's contents: each GPU and weight dtype with composed profiles (but
    ``exclude``'s models'), fitted; the bf16 eff_c transferred to the GPUs with only a
    matmul measurement (:func:`transferred`); and the provenance."""
    gpus: dict[str, dict[str, dict[str, object]]] = {
        gpu: {dtype: fit_gpu(profiles) for dtype, profiles in sorted(by_dtype.items())}
        for gpu, by_dtype in sorted(measured_by_gpu(exclude).items())}
    for gpu, rows in transferred(gpus, matmul_shares(matmul)).items():
        gpus[gpu] = {**gpus.get(gpu, {}), **rows}
    gpus = dict(sorted(gpus.items()))
    return {
        "version": 1,
        "provenance": (
            "python -m calibrate.prior_efficiency: eff_c, eff_m, eff_kv (the KV reads) and, "
            "where it predicts held-out profiles at least as well, a per-layer floor "
            "t_layer (layer_overhead_s) of the roofline prior, fitted per GPU and weight "
            "dtype (least squares on log "
            "prior/measured step time) to the shipped profiles composed from "
            "AIConfigurator 0.12.0's measured TensorRT-LLM operator tables on that GPU in "
            "that dtype; pure decodes of 1-512 rows x 500-3,000 tokens and prefills "
            "of 64-8,192 tokens, each profile's inside the steps it was fitted to; "
            "rows with 'transferred': a GPU without tables whose bf16 eff_c is the fitted "
            "GPUs' median eff_c / (measured matmul / peak) times its own share, from the "
            "published matmul runs in simulator/costs/matmul_published.json (its other "
            "knobs the defaults); other GPUs and dtypes keep the defaults"),
        "gpus": gpus,
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--check", action="store_true", help="compare only; 1 if stale")
    ap.add_argument("--out", type=Path, default=EFFICIENCY_FILE)
    ap.add_argument("--exclude", default="",
                    help="comma-separated models whose profiles the fit leaves out: a what-if "
                         "that prints the fit and writes nothing")
    args = ap.parse_args(argv)
    exclude = tuple(m for m in args.exclude.split(",") if m)
    data = fitted(exclude)
    rows = [(f"{gpu} {dtype}", row) for gpu, by_dtype in data["gpus"].items()  # type: ignore[attr-defined]
            for dtype, row in by_dtype.items()]
    for gpu, row in rows:
        if "transferred" in row:
            t = row["transferred"]
            print(f"{gpu}: eff_c {row['compute_efficiency']} transferred (matmul share of "
                  f"peak {t['matmul_share_of_peak']} x median ratio {t['ratio']} over "
                  f"{t['ratio_by_gpu']}; leave one out {t['leave_one_out']})")
            continue
        print(f"{gpu}: eff_c {row['compute_efficiency']}, eff_m {row['memory_efficiency']}, "
              f"eff_kv {row['kv_memory_efficiency']}, t_layer {row['layer_overhead_s']}; "
              f"held out {row['within_15pct_held_out']}; "
              f"median prior/measured {row['median_prior_over_measured']}, within 15% "
              f"{row['within_15pct']} over {row['shapes']} shapes")
    if exclude:
        return 0
    return write_or_check(args.out, data, args.check, "calibrate.prior_efficiency")


if __name__ == "__main__":
    sys.exit(main())
