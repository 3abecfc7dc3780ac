"""The Fleet page's disaggregated prefill/decode knobs and figures (docs/fleet.md,
``[disaggregated]``): pools and link read from a scenario point and written back, the
same GPUs run aggregated for comparison, and each request's TTFT split into its prefill
side and its KV transfer.

Writing follows dashboard/logic/fleet.py: a key the scenario had is written back, a new
key only when its value is not what runs without it; off keeps the section with
``enabled = false``. The per-pool GPU, tp, routers and policy tables are carried as the
scenario sets them (no widget).
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from simulator.scenario_types import field_rule

DISAGG_KEYS = ("prefill_replicas", "decode_replicas", "link", "link_scope", "decode_reserve")
COMPARE_COLUMNS = {  # comparison table column -> summary key
    "GPUs": "num_gpus", "TTFT p50 ms": "p50_ttft_ms", "TTFT p99 ms": "p99_ttft_ms",
    "TPOT p99 ms": "p99_tpot_ms", "ITL p99 ms": "p99_itl_ms", "E2E p99 ms": "p99_e2el_ms",
    "goodput req/s": "request_goodput", "SLO met": "slo_met",
}


@dataclass(frozen=True, slots=True)
class DisaggKnobs:
    """``[disaggregated]`` as the page shows it (values kept while it is off)."""

    on: bool
    prefill_replicas: int
    decode_replicas: int
    link: str  # a key of simulator/specs/links.py
    link_scope: str  # replica: a link per prefill replica; pool: one shared link
    decode_reserve: str = "before_transfer"  # when decode blocks are reserved


def disagg_from_point(point: dict[str, Any]) -> DisaggKnobs:
    """The ``[disaggregated]`` knobs ``point`` runs with (absent: the schema's defaults)."""
    given = point.get("disaggregated")
    table = given or {}
    return DisaggKnobs(
        on=given is not None and bool(table.get("enabled", True)),
        **{k: table.get(k, field_rule(f"disaggregated.{k}").default) for k in DISAGG_KEYS})


def write_disagg(point: dict[str, Any], k: DisaggKnobs) -> dict[str, Any]:
    """A copy of ``point`` with ``k`` as its ``[disaggregated]`` section."""
    out = copy.deepcopy(point)
    given = point.get("disaggregated")
    if not k.on:
        if given is not None:
            out["disaggregated"] = {**given, "enabled": False}
        return out
    table = dict(given or {})
    if "enabled" in table:
        table["enabled"] = True
    for key in DISAGG_KEYS:
        value = getattr(k, key)
        if key in table or value != field_rule(f"disaggregated.{key}").default:
            table[key] = value
    out["disaggregated"] = table
    return out


def aggregated(point: dict[str, Any]) -> dict[str, Any] | None:
    """``point`` run aggregated on the same GPUs: ``[disaggregated]`` off and prefill +
    decode replicas behind ``[cluster]``'s router (docs/fleet.md's comparison); None when
    the pools differ from ``[hardware]`` in GPU or tp (no aggregated fleet is the same)."""
    table = point.get("disaggregated") or {}
    hw = point.get("hardware", {})
    for pool in ("prefill", "decode"):
        if table.get(f"{pool}_gpu", hw.get("gpu")) != hw.get("gpu") or \
                table.get(f"{pool}_tp", hw.get("tp")) != hw.get("tp"):
            return None
    k = disagg_from_point(point)
    out = write_disagg(point, DisaggKnobs(False, *(getattr(k, f) for f in DISAGG_KEYS)))
    out["cluster"] = {**out.get("cluster", {}),
                      "replicas": k.prefill_replicas + k.decode_replicas}
    return out


def compare_table(split: dict[str, Any], together: dict[str, Any] | None) -> pd.DataFrame:
    """Disaggregated against aggregated, one row each (the second left out when None)."""
    rows = [("disaggregated", split)] + ([("aggregated", together)] if together else [])
    return pd.DataFrame([{"deployment": name, **{c: s.get(k) for c, k in COMPARE_COLUMNS.items()}}
                         for name, s in rows])


def ttft_parts(requests: pd.DataFrame) -> dict[str, np.ndarray]:
    """Finished requests' TTFT (ms) split into what adds up to the first token: to the end
    of the prefill (queue and prefill on the prefill pool; with ``decode_reserve =
    "before_prefill"`` the wait for decode KV is in it), the wait for decode KV after the
    prefill (``"before_transfer"``; only when some request waited) and the KV transfer
    (link wait included); requests that transferred nothing (one output token) are left
    out."""
    if "kv_transfer_s" not in requests:
        return {}
    rows = requests[(requests["status"] == "finished") & np.isfinite(requests["kv_transfer_s"])]
    prefill = (rows["prefill_done_s"] - rows["arrival_s"]).to_numpy(dtype=float) * 1000
    transfer = rows["kv_transfer_s"].to_numpy(dtype=float) * 1000
    ttft = rows["ttft_ms"].to_numpy(dtype=float)
    parts = {"to prefill done": prefill}
    held = ttft - prefill - transfer  # the KV held on the prefill side for decode blocks
    if len(held) and np.max(held) > 1e-6:
        parts["waiting for decode KV"] = np.maximum(held, 0.0)
    return {**parts, "KV transfer": transfer, "TTFT": ttft}


def transfer_tiles(summary: dict[str, Any]) -> list[tuple[str, str, str]]:
    """(label, value, help) tiles of the pools and the link from the summary."""
    if "kv_transfers" not in summary:
        return []
    return [
        ("Prefill pool busy", f"{summary['prefill_utilisation']:.0%}",
         f"{summary['prefill_replicas']} x {summary['prefill_gpu_type']} "
         f"({summary['prefill_gpus']} GPUs)"),
        ("Decode pool busy", f"{summary['decode_utilisation']:.0%}",
         f"{summary['decode_replicas']} x {summary['decode_gpu_type']} "
         f"({summary['decode_gpus']} GPUs)"),
        ("KV transfer mean / p99", f"{summary['kv_transfer_ms_mean']:.1f} / "
         f"{summary['kv_transfer_ms_p99']:.1f} ms",
         f"{summary['kv_transfers']:,} transfers, {summary['kv_bytes_moved'] / 1e9:.1f} GB; "
         f"link wait p99 {summary['kv_link_wait_ms_p99']:.1f} ms"),
        ("Link busy", f"{summary['link_utilisation']:.1%}", f"{summary['link']}"),
        ("Wait for decode KV mean / p99",
         f"{summary.get('kv_reserve_wait_ms_mean', 0.0):.1f} / "
         f"{summary.get('kv_reserve_wait_ms_p99', 0.0):.1f} ms",
         "until the decode replica has reserved the prompt's KV blocks "
         "(disaggregated.decode_reserve)"),
    ]
