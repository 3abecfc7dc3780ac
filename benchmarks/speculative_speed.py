"""Simulator speed with speculative decoding on and off (its steps bypass the fast paths).

Runs ``scenarios/chat.toml`` (chunked, 10 req/s, ``--requests`` requests) with
``[speculative] num_tokens`` 0 and ``--k`` (draft = the first 4 layers, alpha 0.7) and
prints CPU seconds (``time.process_time`` around ``run_point``, median of ``--repeats``),
requests per CPU-second and the mean TPOT. Usage::

    python benchmarks/speculative_speed.py [--requests 3000] [--k 4] [--repeats 3]
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

from simulator.runner import run_point
from simulator.scenario import apply_overrides, load_scenario


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--requests", type=int, default=3000)
    ap.add_argument("--k", type=int, default=4)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    print(f"load average before: {os.getloadavg()}")
    for k in (0, args.k):
        raw = apply_overrides(load_scenario("scenarios/chat.toml"), [
            "policy.name='chunked'", "workload.rate=10.0",
            f"workload.num_requests={args.requests}", f"speculative.num_tokens={k}",
            "speculative.acceptance=0.7", "speculative.draft_layers=4"])
        cpu = []
        for _ in range(args.repeats):
            t0 = time.process_time()
            summary = run_point({}, raw).summary
            cpu.append(time.process_time() - t0)
        med = statistics.median(cpu)
        print(f"k={k}: {med:.3f} s CPU (median of {[round(c, 3) for c in cpu]}), "
              f"{args.requests / med:,.0f} req/CPU-s, mean TPOT {summary['mean_tpot_ms']:.3f} ms")
    print(f"load average after: {os.getloadavg()}")


if __name__ == "__main__":
    main()
