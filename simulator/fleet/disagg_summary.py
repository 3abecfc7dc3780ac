"""Disaggregated serving's figures in the summary (contract 5) and its text-report lines.

Keys, present only when ``[disaggregated]`` is on (docs/fleet.md):

- ``kv_transfers``: KV transfers started (one per request with more than one output
  token, once prefilled; one still on the link at the horizon counts);
  ``kv_bytes_moved``: their bytes (``kv_bytes_per_token x prompt`` each);
- ``kv_transfer_ms_mean`` / ``_p99``: from the end of a request's prefill to the end of
  its transfer (the link wait included): what the transfer adds to TTFT;
  ``kv_link_wait_ms_mean`` / ``_p99``: the wait for the link alone;
  ``kv_reserve_wait_ms_mean`` / ``_p99``: the wait for the decode replica's blocks
  (``decode_reserve``: after the prefill with "before_transfer", and then part of TTFT
  beside the transfer; before it with "before_prefill"; 0 with "on_arrival");
- ``link_utilisation``: time links carried a transfer / (links x the run's window);
- ``prefill_utilisation``, ``decode_utilisation``: each pool's busy time / (its replicas x
  the window), as ``utilisation`` is for the whole fleet (NaN without a full step log);
- ``prefill_replicas``, ``decode_replicas``, ``prefill_gpus``, ``decode_gpus`` (GPU counts),
  ``prefill_gpu_type``, ``decode_gpu_type`` (catalogue names), ``link``.

The window is the summary's (first arrival to last finish: metrics_resources.run_window).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd

from simulator.fleet.disagg import Transfers
from simulator.fleet.disagg_spec import DisaggSpec
from simulator.metrics_resources import busy_fraction, run_window

NAN = math.nan


def disagg_summary(transfers: Transfers, spec: DisaggSpec, requests: pd.DataFrame,
                   steps: pd.DataFrame) -> dict[str, Any]:
    """The summary keys of a disaggregated run (see the module docstring)."""
    wait = np.asarray(transfers.wait_s, dtype=float)
    reserve = np.asarray(transfers.reserve_wait_s, dtype=float)
    total = wait + np.asarray(transfers.transfer_s, dtype=float)
    start_s, window_s = run_window(requests, None)
    ok = math.isfinite(window_s) and window_s > 0
    p = spec.prefill.replicas
    pools = {}
    for name, lo, n in (("prefill", 0, p), ("decode", p, spec.decode.replicas)):
        rows = steps[(steps["replica"] >= lo) & (steps["replica"] < lo + n)] if len(
            steps) else steps
        pools[name] = busy_fraction(rows, start_s, window_s, n) if ok and len(steps) else NAN
    busy = math.fsum(transfers.link_busy_s)
    return {
        "prefill_replicas": p, "decode_replicas": spec.decode.replicas,
        "prefill_gpus": spec.prefill.num_gpus, "decode_gpus": spec.decode.num_gpus,
        "prefill_gpu_type": spec.prefill.gpu, "decode_gpu_type": spec.decode.gpu,
        "link": spec.link.name,
        "kv_transfers": len(total),
        "kv_bytes_moved": int(sum(transfers.num_bytes)),
        "kv_transfer_ms_mean": _ms(total, None), "kv_transfer_ms_p99": _ms(total, 99),
        "kv_link_wait_ms_mean": _ms(wait, None), "kv_link_wait_ms_p99": _ms(wait, 99),
        "kv_reserve_wait_ms_mean": _ms(reserve, None),
        "kv_reserve_wait_ms_p99": _ms(reserve, 99),
        "link_utilisation": busy / (spec.num_links * window_s) if ok else NAN,
        "prefill_utilisation": pools["prefill"], "decode_utilisation": pools["decode"],
    }


def _ms(values: np.ndarray, q: float | None) -> float:
    if values.size == 0:
        return NAN
    return 1000.0 * float(np.mean(values) if q is None else np.percentile(values, q))


def disagg_lines(summary: dict[str, Any], where: str) -> list[str]:
    """Text lines for one point: the pools, the link and the transfers. A figure the run
    could not give (NaN, or None once the summary is JSON-safe: the pools' busy shares
    without a full step log, the transfer times with no transfer) reads "n/a"."""
    if "kv_transfers" not in summary:
        return []
    s = summary
    gb = s["kv_bytes_moved"] / 1e9
    return [
        f"disagg: {where}: prefill {s['prefill_replicas']} replica(s) ({s['prefill_gpus']} "
        f"GPUs) busy {_pct(s['prefill_utilisation'])}, decode {s['decode_replicas']} "
        f"replica(s) ({s['decode_gpus']} GPUs) busy {_pct(s['decode_utilisation'])}",
        f"disagg: {where}: {s['kv_transfers']:,} KV transfers over {s['link']}, "
        f"{gb:,.2f} GB; transfer (wait included) mean {_ms_text(s['kv_transfer_ms_mean'])}, "
        f"p99 {_ms_text(s['kv_transfer_ms_p99'])}; link wait p99 "
        f"{_ms_text(s['kv_link_wait_ms_p99'])}; link busy {_pct(s['link_utilisation'])}; "
        f"wait for decode KV mean {_ms_text(s['kv_reserve_wait_ms_mean'])}, p99 "
        f"{_ms_text(s['kv_reserve_wait_ms_p99'])}",
    ]


def _pct(value: float | None) -> str:
    if value is None or not math.isfinite(value):
        return "n/a"
    return f"{100.0 * value:.1f}%"


def _ms_text(value: float | None) -> str:
    if value is None or not math.isfinite(value):
        return "n/a"
    return f"{value:.3g} ms"


def pools_line(model: str, weight_dtype: str, kv_dtype: str, spec: DisaggSpec) -> str:
    """The text report's deployment line for disaggregated pools."""
    p, d, link = spec.prefill, spec.decode, spec.link
    where = "per prefill replica" if spec.link_scope == "replica" else "shared by the pool"
    bw = "no cost" if math.isinf(link.bandwidth_gbps) else (
        f"{link.bandwidth_gbps:g} GB/s x {spec.lanes} lane(s), {link.latency_s * 1e6:g} us")
    own = "; ".join(f"{name} pool's step costs: {pool.cost_source}"
                    for name, pool in (("prefill", p), ("decode", d)) if pool.cost_source)
    return (f"model {model} ({weight_dtype} weights, {kv_dtype} KV): prefill {p.replicas} x "
            f"{p.tp} {p.gpu} ({p.kv_blocks} KV blocks each), decode {d.replicas} x {d.tp} "
            f"{d.gpu} ({d.kv_blocks} each); KV over {link.name} {where} ({bw})"
            + (f"\n{own}" if own else ""))
