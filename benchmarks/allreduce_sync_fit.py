"""Fit the 2024 TensorRT engines' all-reduce handshake (simulator/costs/allreduce_sync.py)
to NIM 1.0's one-client A100 rows, in multiples of the GPU's NCCL small-message latency.

At one client every decode step is one token per GPU, so a fixed cost per all-reduce shows
as a fixed gap per step. Per setting (GPU, model, precision, GPU count) the gap is the
median over its six lengths of measured minus simulated ITL, from a run without the term::

    python benchmarks/published.py --cases-file benchmarks/published_cases_nim_dli.toml \\
        --set cost.allreduce_sync_s=0 --set cost.decode_scale=1 --json F
    python benchmarks/allreduce_sync_fit.py F

(``cost.decode_scale=1``: the fit was made before the course's 16-bit cases carried their
decode factor, docs/stacks.md "NIM 1.0's 16-bit decode steps"; with the factor in place
this rule reads k = 1.70, and the presets keep 1.27.)

A one-GPU setting's gap per layer (the same GPU and precision, Llama-3-8B) is what the
kernels miss without any all-reduce; the rest of a multi-GPU setting's gap, over its 2L
all-reduces, is the handshake: ``y = (gap - L a) / 2L``, and ``k = y / t0`` with t0 the
NCCL curve's small-message latency (simulator/costs/collectives.json). The fit is the
median k of the three A100 multi-GPU settings; the six H100 ones are held out, as is
every multi-client row.
"""

from __future__ import annotations

import argparse
import statistics
from collections import defaultdict
from pathlib import Path

from nim_dli_cases import FIT_GPU, course_rows, fitted_k, parse_id, parse_setting, print_fit

from simulator.costs.collectives import allreduce_curve
from simulator.specs.models import get_model
from simulator.stack_presets import TRTLLM_ALLREDUCE_SYNC


def split(setting: str) -> tuple[str, str, str, int]:
    """``a100-80gb-llama-3-70b-bf16-tp8`` -> (GPU, model, precision class, TP); bf16 and
    fp16 cost the same."""
    gpu, model, precision, tp = parse_setting(setting)
    return gpu, model, "fp8" if precision == "fp8" else "fp16", tp


def one_client_gaps(rows: list[dict]) -> dict[str, float]:
    """Per setting: median over its lengths of measured minus simulated one-client ITL, s."""
    gaps: dict[str, list[float]] = defaultdict(list)
    for r in rows:
        setting, _, clients = parse_id(r["id"])
        tpot = r["metrics"].get("mean_tpot_ms") or {}
        if clients == 1 and tpot.get("simulated") is not None:
            gaps[setting].append((tpot["published"] - tpot["simulated"]) / 1e3)
    return {s: statistics.median(v) for s, v in gaps.items()}


def handshakes(gaps: dict[str, float]) -> list[tuple[str, float, float, float]]:
    """(setting, y in s, t0 in s, k) for every multi-GPU setting with a one-GPU sibling."""
    per_layer = {}
    for setting, gap in gaps.items():
        gpu, model, dtype, tp = split(setting)
        if tp == 1:
            per_layer[(gpu, dtype)] = gap / get_model(model).num_layers
    out = []
    for setting, gap in sorted(gaps.items()):
        gpu, model, dtype, tp = split(setting)
        curve = allreduce_curve(gpu, tp)
        if tp == 1 or (gpu, dtype) not in per_layer or curve is None:
            continue
        spec = get_model(model)
        y = (gap - spec.num_layers * per_layer[(gpu, dtype)]) / spec.layer_allreduces
        out.append((setting, y, curve.latency_s, y / curve.latency_s))
    return out


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("json", type=Path, help="published.py --json of the course cases, "
                    "run with --set cost.allreduce_sync_s=0")
    rows = course_rows(ap.parse_args(argv).json)
    found = handshakes(one_client_gaps(rows))
    fit = fitted_k(found)
    print(f"fit on {FIT_GPU}: k = {fit:.2f} x NCCL's small-message latency "
          f"(the trtllm 0.10/0.11 presets: {TRTLLM_ALLREDUCE_SYNC:g})")
    print_fit(found, fit, 1e6, "us", "handshake", "NCCL t0")


if __name__ == "__main__":
    main()
