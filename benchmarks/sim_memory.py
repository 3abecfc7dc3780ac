"""Peak memory of one simulated point: run it and print the process's peak RSS.

    .venv/bin/python benchmarks/sim_memory.py [NUM_REQUESTS] [RATE] [POLICY]

Runs scenarios/chat.toml's point (default: 200,000 requests at 15 req/s, continuous)
in this process and prints the peak resident set size (``ru_maxrss``) with the step-log
rows and request records it produced, so bytes per row can be read off two runs of
different sizes. Not a test: the figure depends on the machine and the Python build.
"""

from __future__ import annotations

import resource
import sys
import time

from simulator.runner import run_point
from simulator.scenario import apply_overrides, expand_sweep, load_scenario


def main() -> None:
    """Run the point given on the command line and print its peak RSS."""
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 200_000
    rate = sys.argv[2] if len(sys.argv) > 2 else "15.0"
    policy = sys.argv[3] if len(sys.argv) > 3 else "continuous"
    raw = apply_overrides(load_scenario("scenarios/chat.toml"), [
        f"workload.num_requests={n}", f"workload.rate={rate}", f"policy.name='{policy}'"])
    (labels, point), = expand_sweep(raw)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    t0 = time.perf_counter()
    res = run_point(labels, point).result
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(f"requests={len(res.requests)} step_rows={len(res.steps)} "
          f"wall_s={time.perf_counter() - t0:.1f} rss_before_mb={before / 1024:.0f} "
          f"peak_rss_mb={peak / 1024:.0f}")


if __name__ == "__main__":
    main()
