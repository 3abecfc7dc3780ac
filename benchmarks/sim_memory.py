"""Peak memory and time of big simulated points, each case in its own process.

    .venv/bin/python benchmarks/sim_memory.py [--case chat1m fleet mg1] [--step-log MODE]
                                              [--scale 0.1] [--trace]

Cases (scenarios/chat.toml's traffic on Llama-3.1-8B, one H100 SXM per replica):

- ``chat1m``: 1,000,000 chat requests on one replica, continuous batching, 15 req/s
  (near saturation).
- ``fleet``: a 16-replica cluster (router ``least_outstanding``), 1,000,000 requests
  over a simulated hour (277.8 req/s, 17.4 per replica: a little over what one replica
  serves, ~15), continuous batching.
- ``mg1``: the M/G/1 check: 200,000 requests, static batching of size 1 (each request
  alone: an M/G/1 queue), outputs lognormal with mean 67 tokens (about 68 steps per
  request, 13.6M step rows), 1.1 req/s (server busy about 60% of the time).

Each case runs in a fresh subprocess (so peaks do not mix) and prints the requests and the
step-log rows kept (``steps_run``: the steps simulated), wall and CPU seconds of the run
(``time.process_time``), the RSS before the run and the peak RSS (``ru_maxrss``).
``--step-log`` sets ``run.step_log`` (left out: the scenario's default, so the script
also measures code from before the field existed). ``--scale`` multiplies the request
counts (rates stay). With ``--trace`` the case runs under ``tracemalloc`` and prints the
lines holding the most memory at the end of the run and the traced peak (slow: use a
small ``--scale``).
Not a test: the figures depend on the machine, its load and the Python build.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

CASES: dict[str, list[str]] = {
    "chat1m": ["workload.num_requests={n}", "workload.rate=15.0", "policy.name='continuous'"],
    "fleet": ["workload.num_requests={n}", "workload.rate={rate}", "policy.name='continuous'",
              "cluster.replicas=16", "cluster.router='least_outstanding'"],
    "mg1": ["workload.num_requests={n}", "workload.rate=1.1", "policy.name='static'",
            "policy.batch_size=1", "workload.output={{dist='lognormal', mean=67, sigma=0.9}}"],
}
REQUESTS = {"chat1m": 1_000_000, "fleet": 1_000_000, "mg1": 200_000}
FLEET_SPAN_S = 3600.0  # the fleet's requests arrive over a simulated hour


def _overrides(case: str, scale: float, step_log: str | None) -> list[str]:
    n = max(1, round(REQUESTS[case] * scale))
    rate = REQUESTS["fleet"] / FLEET_SPAN_S
    out = [o.format(n=n, rate=rate) for o in CASES[case]]
    return out + ([f"run.step_log='{step_log}'"] if step_log else [])


def run_one(case: str, scale: float, step_log: str | None, trace: bool) -> dict[str, Any]:
    """Run one case in this process and return its figures."""
    from simulator.runner import run_point
    from simulator.scenario import apply_overrides, expand_sweep, load_scenario

    root = Path(__file__).resolve().parent.parent
    raw = apply_overrides(load_scenario(root / "scenarios" / "chat.toml"),
                          _overrides(case, scale, step_log))
    (labels, point), = expand_sweep(raw)
    if trace:
        import tracemalloc

        tracemalloc.start(1)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    t0, c0 = time.perf_counter(), time.process_time()
    pr = run_point(labels, point)
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    res = pr.result
    out: dict[str, Any] = {
        "case": case, "step_log": step_log or "default", "requests": len(res.requests),
        "step_rows": len(res.steps), "steps_run": len(res.steps) if getattr(
            res, "step_stats", None) is None else res.step_stats.num_steps,
        "wall_s": round(wall, 2), "cpu_s": round(cpu, 2),
        "rss_before_mb": round(before / 1024), "peak_rss_mb": round(
            resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024),
        "utilisation": pr.summary.get("utilisation"),
        "p99_itl_ms": pr.summary.get("p99_itl_ms"),
    }
    if trace:
        out |= _trace_report()
    return out


def _trace_report() -> dict[str, Any]:
    import tracemalloc

    current, peak = tracemalloc.get_traced_memory()
    top = tracemalloc.take_snapshot().statistics("lineno")[:12]
    return {"traced_now_mb": round(current / 2**20, 1), "traced_peak_mb": round(peak / 2**20, 1),
            "top_lines": [f"{s.size / 2**20:8.1f} MB {s.count:>9} blocks  {s.traceback[0]}"
                          for s in top]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--case", nargs="+", choices=sorted(CASES), default=list(CASES))
    ap.add_argument("--step-log", choices=("full", "summary", "none"), default=None)
    ap.add_argument("--scale", type=float, default=1.0)
    ap.add_argument("--trace", action="store_true")
    ap.add_argument("--one", action="store_true", help=argparse.SUPPRESS)  # the child
    args = ap.parse_args()
    if args.one:
        print(json.dumps(run_one(args.case[0], args.scale, args.step_log, args.trace)))
        return
    print(f"load {Path('/proc/loadavg').read_text().split()[:3]}, python {sys.version.split()[0]}")
    for case in args.case:
        cmd = [sys.executable, __file__, "--one", "--case", case, "--scale", str(args.scale)]
        cmd += (["--step-log", args.step_log] if args.step_log else [])
        cmd += (["--trace"] if args.trace else [])
        done = subprocess.run(cmd, capture_output=True, text=True, env=os.environ)
        if done.returncode != 0:
            print(f"{case}: failed\n{done.stderr[-2000:]}")
            continue
        fig = json.loads(done.stdout.strip().splitlines()[-1])
        lines = fig.pop("top_lines", [])
        print(" ".join(f"{k}={v}" for k, v in fig.items()), flush=True)
        for line in lines:
            print("   ", line)


if __name__ == "__main__":
    main()
