"""How the gpt-oss replays read, by stack release, GPU and load.

    python benchmarks/published.py --cases-file benchmarks/published_cases_gpt_oss.toml \\
        --cases-file benchmarks/published_cases_trtllm_overview.toml --json run.json
    python benchmarks/gpt_oss_check.py run.json

For every gpt-oss case of the run (model ``gpt-oss-*``), the median signed error of output
throughput, median TPOT and mean TTFT, per (stack release, GPU, load): "light" when at most
four requests are in flight (a ``max_concurrency`` of 1 to 4), else "heavy" (bursts of 100
to 3,000 requests). Then, for each burst of fixed-length prompts sent all at once, the
mean TTFT the replay misses per prompt token: a burst's mean TTFT is about half the time
to prefill all of it, so 2 x (published - simulated) / (prompts x prompt tokens) is what
each prompt token costs beyond the replay's prefill. With ``--kernels`` (needs the
``aiconfigurator`` extra), last, one MXFP4 expert layer of each gpt-oss model by the vLLM
release AIConfigurator timed it in on the H200 (0.19.0 and 0.24.0), at 1, 64, 1,024 and
8,192 tokens, power-law routing; and on the H100 the TFLOP/s of Marlin's MXFP4 expert layer
(at the one shape AIConfigurator timed it) against the triton kernel's at gpt-oss's shapes,
then the shipped ``vllm-marlin`` curves against the ``vllm`` ones (calibrate/moe_marlin.py:
vLLM before 0.12 ran Marlin). docs/gpu-profiles.md ("gpt-oss", stop 58) reads the
tables.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run as a script from anywhere

from benchmarks.published_cases import Case, load_cases  # noqa: E402

FIGURES = ("output_throughput", "median_tpot_ms", "mean_ttft_ms")
LIGHT = 4  # requests in flight at most for a "light" case


def load(case: Case) -> str:
    """``light`` for a client that keeps at most LIGHT requests in flight, else ``heavy``."""
    wl = case.workload
    bound = wl.get("max_concurrency") or wl.get("concurrency")
    return "light" if bound is not None and int(bound) <= LIGHT else "heavy"


def table(rows: list[dict[str, Any]], cases: dict[str, Case]) -> list[str]:
    """One line per (release, GPU, load): cases and each figure's median signed error."""
    errors: dict[tuple[str, str, str], dict[str, list[float]]] = defaultdict(
        lambda: defaultdict(list))
    for r in rows:
        case = cases.get(r["id"])
        if case is None or not case.model.startswith("gpt-oss") or not r.get("metrics"):
            continue
        key = (f"{case.stack} {case.stack_version}", case.gpu, load(case))
        for figure in FIGURES:
            m = r["metrics"].get(figure)
            if m and m.get("error") is not None:
                errors[key][figure].append(m["error"])
    lines = [f"{'release':16s} {'gpu':9s} {'load':5s} {'n':>3s} "
             + " ".join(f"{f:>18s}" for f in FIGURES)]
    for key in sorted(errors):
        by = errors[key]
        n = max(len(v) for v in by.values())
        cells = [f"{statistics.median(by[f]):+18.0%}" if by.get(f) else f"{'':>18s}"
                 for f in FIGURES]
        lines.append(f"{key[0]:16s} {key[1]:9s} {key[2]:5s} {n:3d} " + " ".join(cells))
    return lines


def missing_per_token(rows: list[dict[str, Any]], cases: dict[str, Case]) -> list[str]:
    """Microseconds of mean TTFT missed per prompt token, one line per fixed-length burst."""
    lines = [f"{'case':78s} {'prompt':>6s} {'us/token':>8s}"]
    for r in rows:
        case = cases.get(r["id"])
        wl = case.workload if case is not None else {}
        ttft = (r.get("metrics") or {}).get("mean_ttft_ms")
        if (case is None or not case.model.startswith("gpt-oss") or ttft is None
                or ttft.get("simulated") is None or wl.get("arrival") != "burst"
                or wl.get("max_concurrency") or "prompt_tokens" not in wl):
            continue
        tokens = int(wl["prompt_tokens"]) * int(wl["num_prompts"])
        us = 2e3 * (ttft["published"] - ttft["simulated"]) / tokens
        lines.append(f"{case.id:78s} {int(wl['prompt_tokens']):6d} {us:8.1f}")
    return lines


KERNEL_TOKENS = (1, 64, 1024, 8192)


def vllm_kernels() -> list[str]:
    """One MXFP4 expert layer's latency (us) by vLLM release on the H200, per gpt-oss model."""
    from calibrate.aic_moe import routing_curve, shape_rows
    from calibrate.aiconfigurator import find_data_root
    from calibrate.moe_curves import ROUTING

    root = find_data_root()
    if root is None:
        return ["no AIConfigurator 0.12.0 tables: install the aiconfigurator extra"]
    lines = [f"{'model':13s} {'vllm':7s} {'kernel':58s} "
             + " ".join(f"{t:>7d}" for t in KERNEL_TOKENS)]
    for model in ("gpt-oss-20b", "gpt-oss-120b"):
        for release in ("0.19.0", "0.24.0"):
            table = shape_rows(root, "h200_sxm", release, "vllm", "mxfp4", model)
            curve = None if table is None else routing_curve(
                table[1][table[1].moe_tp_size == 1], ROUTING)
            if curve is None:
                continue
            latency, kernel = curve
            cells = " ".join(f"{latency.get(t, float('nan')) * 1e3:7.0f}"
                             for t in KERNEL_TOKENS)
            lines.append(f"{model:13s} {release:7s} {kernel[:58]:58s} {cells}")
    return lines


RATE_TOKENS = (1024, 8192, 16384)


def marlin_kernels() -> list[str]:
    """On the H100 (vLLM 0.24.0's table, tp 1): TFLOP/s of Marlin's MXFP4 expert layer at
    its one shape and of the triton kernel at gpt-oss's, then one layer of the shipped
    ``vllm-marlin`` curve against the ``vllm`` one, us (calibrate/moe_marlin.py)."""
    from calibrate.aic_moe import moe_table, routing_curve
    from calibrate.aiconfigurator import find_data_root
    from calibrate.moe_curves import ROUTING
    from calibrate.moe_marlin import marlin_rows
    from simulator.costs.moe_tables import MARLIN_KIND, moe_layer_curve
    from simulator.specs import get_model

    lines = []
    root = find_data_root()
    if root is not None:
        table = pd.read_parquet(moe_table(root, "h100_sxm", "0.24.0", "vllm"))
        mx = table[(table.moe_dtype == "w4a16_mxfp4") & (table.moe_ep_size == 1)
                   & (table.moe_tp_size == 1)]
        parts = [marlin_rows(mx), mx[mx.kernel_source.str.contains("oaitriton")]]
        lines.append(f"{'kernel':58s} {'h':>5s} {'i':>5s} {'E':>4s} {'k':>3s} "
                     + " ".join(f"{t:>7d}" for t in RATE_TOKENS) + "  TFLOP/s")
        for part in parts:
            for (h, i, e, k), rows in part.groupby(["hidden_size", "inter_size",
                                                   "num_experts", "topk"]):
                curve = routing_curve(rows, ROUTING)
                if curve is None:
                    continue
                ms, kernel = curve
                rate = [t * k * 3 * h * i * 2 / (ms.get(t, float("nan")) * 1e-3) / 1e12
                        for t in RATE_TOKENS]
                lines.append(f"{kernel[:58]:58s} {h:5d} {i:5d} {e:4d} {k:3d} "
                             + " ".join(f"{r:7.0f}" for r in rate))
        lines.append("")
    lines.append(f"{'model':13s} {'shipped curve, H100 tp 1':26s} "
                 + " ".join(f"{t:>7d}" for t in KERNEL_TOKENS))
    for model in ("gpt-oss-20b", "gpt-oss-120b"):
        for kind in ("vllm", MARLIN_KIND):
            curve = moe_layer_curve(get_model(model), "h100-sxm", "mxfp4", 1, kind)
            if curve is not None:
                cells = " ".join(f"{curve.time_s(float(t)) * 1e6:7.0f}" for t in KERNEL_TOKENS)
                lines.append(f"{model:13s} {kind:26s} {cells}")
    return lines


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("run", type=Path, help="a published.py --json file")
    ap.add_argument("--kernels", action="store_true",
                    help="also print vLLM's MXFP4 expert layers by release (H200) and "
                    "Marlin's against the triton kernel's (H100)")
    args = ap.parse_args(argv)
    rows = json.loads(args.run.read_text())["rows"]
    cases = {c.id: c for c in load_cases(None)}
    print("\n".join(table(rows, cases)))
    print()
    print("\n".join(missing_per_token(rows, cases)))
    if args.kernels:
        print()
        print("\n".join(vllm_kernels()))
        print()
        print("\n".join(marlin_kernels()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
