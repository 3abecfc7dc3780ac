"""Hardware comparison: the same workload on each GPU where the model fits, and its cost.

Cost per million tokens = price per GPU-hour x GPUs / 3600 / tokens per second x 1e6.
The default prices are illustrative on-demand cloud list prices (USD per GPU-hour,
late 2024 to 2025 ranges); the page lets the user edit them.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

import pandas as pd

from dashboard.logic.scenario_form import Knobs, apply_knobs
from simulator.deployment import resolve
from simulator.specs import HARDWARE

DEFAULT_PRICES_USD_PER_HOUR: dict[str, float] = {
    "a100-80gb": 1.80, "a100-40gb": 1.30, "h100-sxm": 2.70, "h100-pcie": 2.30,
    "h200": 3.50, "l40s": 1.00, "rtx4090": 0.45, "b200": 5.50,
}
CATALOGUE_GPUS = tuple(g for g in HARDWARE if g != "cpu")
DEFAULT_GPUS = ("a100-80gb", "h100-sxm", "h200")
DEFAULT_REQUESTS = 400


def hardware_points(base: dict[str, Any], knobs: Knobs, gpus: Sequence[str]
                    ) -> tuple[list[tuple[dict[str, Any], dict[str, Any]]], dict[str, str]]:
    """Points for the GPUs where the deployment resolves, and why each other GPU was skipped."""
    points, skipped = [], {}
    for gpu in gpus:
        point = apply_knobs(copy.deepcopy(base), replace(knobs, gpu=gpu))
        try:
            resolve(point)
        except ValueError as e:  # CapacityError (weights do not fit), ConfigError
            skipped[gpu] = str(e)
            continue
        points.append(({"gpu": gpu}, point))
    return points, skipped


def cost_per_million(price_per_hour: float, num_gpus: int, tokens_per_s: float) -> float:
    """USD per million tokens at ``tokens_per_s`` on ``num_gpus`` GPUs (NaN at zero tokens)."""
    if tokens_per_s <= 0:
        return math.nan
    return price_per_hour * num_gpus / 3600.0 / tokens_per_s * 1e6


def hardware_table(summaries: Sequence[dict[str, Any]],
                   prices: Mapping[str, float]) -> pd.DataFrame:
    """One row per GPU: latency (ms), throughput per GPU (tok/s) and cost per M tokens (USD)."""
    rows = []
    for s in summaries:
        gpus = int(s["num_gpus"])
        price = float(prices.get(s["gpu"], math.nan))
        out_tps = float(s.get("output_throughput") or 0.0)
        all_tps = float(s.get("total_token_throughput") or 0.0)
        rows.append({
            "gpu": s["gpu"], "num_gpus": gpus,
            "p50_ttft_ms": s.get("median_ttft_ms"), "p99_ttft_ms": s.get("p99_ttft_ms"),
            "p50_tpot_ms": s.get("median_tpot_ms"), "p99_tpot_ms": s.get("p99_tpot_ms"),
            "output_tok_s_per_gpu": out_tps / gpus,
            "total_tok_s_per_gpu": all_tps / gpus,
            "usd_per_gpu_hour": price,
            "usd_per_m_output_tokens": cost_per_million(price, gpus, out_tps),
            "usd_per_m_total_tokens": cost_per_million(price, gpus, all_tps),
            "slo_met": bool(s.get("slo_met")),
        })
    return pd.DataFrame(rows)


def cheapest_meeting_slo(table: pd.DataFrame) -> str:
    """A sentence naming the cheapest GPU (per M output tokens) that meets the SLO."""
    ok = table[table["slo_met"]].dropna(subset=["usd_per_m_output_tokens"])
    if ok.empty:
        return "No GPU tried meets the SLO at this load."
    row = ok.sort_values("usd_per_m_output_tokens").iloc[0]
    return (f"Cheapest that meets the SLO: **{row['gpu']}** at "
            f"${row['usd_per_m_output_tokens']:.2f} per million output tokens "
            f"({row['output_tok_s_per_gpu']:.0f} output tok/s per GPU).")
