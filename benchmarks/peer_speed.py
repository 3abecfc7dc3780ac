"""Simulator speed on the peer simulator's own workload (Vidur's standard one), and its answers.

The workload is ``../shared/peers/vidur_workload.py``'s (imported from there; the peer's
README describes it): per request an exponential gap at 3 req/s, a prompt of
``randint(128, 2048)`` tokens and an output of ``randint(32, 512)``, from
``random.Random(42)``. The deployment is the peer's: CodeLlama-34B fp16 on 2x A100-80GB
(TP 2), vLLM-v0-style continuous batching (at most 128 running requests, a prefill
budget of 4,096 tokens counted padded, prefill-only or decode-only steps), 16-token blocks,
27,904 KV blocks, recompute preemption of the newest request.

For each size (``--sizes``, default 1k, 10k, 50k) it replays the table as a trace through
``simulator.cluster.simulate`` and prints simulated requests per CPU-second
(``time.process_time`` around ``simulate`` only, median of ``--repeats``), steps per
request, the ratio to the peer's ~870 req/CPU-s, and the P50/P90/P99 table beside the
peer's (``../shared/peers/README.md``). Usage::

    python benchmarks/peer_speed.py [--sizes 1000,10000,50000] [--repeats 3]
                                    [--no-fast-forward] [--peer-dir ../shared/peers]
"""

from __future__ import annotations

import argparse
import importlib.util
import statistics
import sys
import time
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import pandas as pd

from simulator.accel import active as accel_active
from simulator.cluster import SimResult, simulate
from simulator.deployment import Deployment, resolve
from simulator.metrics import request_metrics, summarize

PEER_REQ_PER_CPU_S = 870.0  # the peer's event loop on this workload (its README, ~856-886)

DEPLOYMENT: dict[str, Any] = {
    "model": {"name": "codellama-34b", "weight_dtype": "fp16"},
    "hardware": {"gpu": "a100-80gb", "tp": 2},
    "kv": {"block_size": 16, "num_blocks": 27904},
    "policy": {"name": "continuous", "max_num_seqs": 128, "max_num_batched_tokens": 4096,
               "chunked_prefill": False, "padded_prefill": True, "preemption": "newest"},
}

# The peer's predictions (its README): N -> metric -> (P50, P90, P99); throughput in req/s.
PEER_TABLE: dict[int, dict[str, tuple[float, ...]]] = {
    1000: {"queue_s": (0.075, 0.985, 2.04), "ttft_s": (0.376, 1.35, 2.35),
           "tpot_ms": (104, 143, 194), "e2e_s": (29.2, 52.2, 65.2), "throughput": (2.80,)},
    10000: {"queue_s": (0.097, 1.46, 5.49), "ttft_s": (0.404, 1.73, 5.74),
            "tpot_ms": (114, 146, 191), "e2e_s": (30.8, 55.5, 69.3), "throughput": (2.97,)},
    50000: {"queue_s": (0.095, 1.21, 5.23), "ttft_s": (0.404, 1.54, 5.48),
            "tpot_ms": (116, 146, 189), "e2e_s": (31.3, 55.8, 69.4), "throughput": (2.99,)},
}


def load_peer_workload(peer_dir: Path) -> ModuleType | None:
    """The peer's workload writer as a module, or None when the file is absent."""
    path = peer_dir / "vidur_workload.py"
    if not path.is_file():
        return None
    spec = importlib.util.spec_from_file_location("vidur_workload", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def peer_table(workload: ModuleType, n: int) -> pd.DataFrame:
    """The peer's ``n``-request workload as a request table (contract 1); row i is id i."""
    rows = workload.generate(n, 3.0, 42, 128, 2048, 32, 512)
    arrival, prompt, output = (np.array(c) for c in zip(*rows, strict=True))
    return pd.DataFrame({"request_id": np.arange(n, dtype=np.int64),
                         "arrival_s": arrival.astype(np.float64),
                         "prompt_tokens": prompt.astype(np.int64),
                         "output_tokens": output.astype(np.int64)})


def timed_runs(table: pd.DataFrame, dep: Deployment, repeats: int, fast_forward: bool
               ) -> tuple[list[float], SimResult]:
    """CPU seconds of ``repeats`` simulations of ``table`` (``simulate`` only), the last result."""
    cpu_s = []
    for _ in range(repeats):
        t0 = time.process_time()
        res = simulate(table, dep.cluster(), fast_forward=fast_forward)
        cpu_s.append(time.process_time() - t0)
    return cpu_s, res


def ours(res: SimResult) -> dict[str, tuple[float, ...]]:
    """Our P50/P90/P99 in the peer's units, from the run's records."""
    per = request_metrics(res.requests[res.requests["status"] == "finished"])
    summary = summarize(res.requests, res.steps)

    def pct(col: str, scale: float) -> tuple[float, ...]:
        return tuple(float(np.percentile(per[col].to_numpy(), q)) * scale for q in (50, 90, 99))

    return {"queue_s": pct("queue_ms", 1e-3), "ttft_s": pct("ttft_ms", 1e-3),
            "tpot_ms": pct("tpot_ms", 1.0), "e2e_s": pct("e2el_ms", 1e-3),
            "throughput": (summary["request_throughput"],)}


def print_table(n: int, mine: dict[str, tuple[float, ...]]) -> None:
    """Our percentiles beside the peer's, one line per metric."""
    peer = PEER_TABLE.get(n)
    print(f"  {'metric':<12} {'servesim P50 / P90 / P99':<28} peer")
    for metric, values in mine.items():
        theirs = " / ".join(f"{v:.3g}" for v in peer[metric]) if peer else "-"
        print(f"  {metric:<12} {' / '.join(f'{v:.3g}' for v in values):<28} {theirs}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="1000,10000,50000", help="request counts, comma-separated")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--no-fast-forward", action="store_true")
    ap.add_argument("--peer-dir", type=Path,
                    default=Path(__file__).resolve().parents[2] / "shared" / "peers")
    args = ap.parse_args()
    workload = load_peer_workload(args.peer_dir)
    if workload is None:
        print(f"skipped: {args.peer_dir / 'vidur_workload.py'} is absent (the peer's workload)")
        return
    dep = resolve(DEPLOYMENT)
    with open("/proc/loadavg") as f:
        load = f.read().split()[:3]
    print(f"peer workload on {dep.model.name} {dep.weight_dtype} {dep.hardware.name} tp{dep.tp}, "
          f"{dep.kv_blocks} KV blocks, fast_forward={not args.no_fast_forward}, "
          f"load {' '.join(load)}, {'compiled' if accel_active() else 'Python'} core")
    for n in (int(s) for s in args.sizes.split(",")):
        table = peer_table(workload, n)
        cpu_s, res = timed_runs(table, dep, args.repeats, not args.no_fast_forward)
        rate = n / statistics.median(cpu_s)
        print(f"{n:,} requests: {rate:,.0f} req/CPU-s (median of {args.repeats}: "
              f"{', '.join(f'{c:.3f}' for c in cpu_s)} CPU s), "
              f"{len(res.steps) / n:.2f} steps/request, "
              f"{res.num_events / n:.2f} events/request, "
              f"{rate / PEER_REQ_PER_CPU_S:.1f}x the peer (~{PEER_REQ_PER_CPU_S:.0f})")
        print_table(n, ours(res))
        sys.stdout.flush()


if __name__ == "__main__":
    main()
