"""Hot-path pieces timed against what they replaced (issue 13), on this machine.

    python benchmarks/hot_path_parts.py [--repeats 7]

- ``index_same`` (simulator/policies/identity.py) against ``list.index`` on a list of 120
  requests, the one sought at place 60 (a busy replica's ``running`` list);
- the summary step log's waiting steps, 8,192 of them, turned into four arrays from
  4-tuples unzipped (as it was), from four lists by ``np.array``, by ``np.fromiter`` with a
  count, and by ``struct`` (simulator/number_lists.py: simulator/steplog_summary.py now);
- ``blocks_used_after_steps`` (simulator/kvcache.py) for a run of 264 steps, and the
  cycle summed one step at a time as it was before.

Each figure is the median over ``--repeats`` rounds of the per-call time, with the core
that ran (compiled or Python: ``python -m simulator.build_accel --status``), the CPU and
the load beside it: a wall-clock figure of one machine, not a target.
"""

from __future__ import annotations

import argparse
import platform
import statistics
import sys
import time
from collections.abc import Callable
from itertools import accumulate, cycle, islice
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from simulator.accel import active  # noqa: E402
from simulator.kvcache import blocks_used_after_steps  # noqa: E402
from simulator.number_lists import floats, ints  # noqa: E402
from simulator.policies import Sequence  # noqa: E402
from simulator.policies.identity import index_same  # noqa: E402


def per_call_s(fn: Callable[[], object], calls: int, repeats: int) -> float:
    """Median over ``repeats`` rounds of the time one call of ``fn`` takes."""
    rounds = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        for _ in range(calls):
            fn()
        rounds.append((time.perf_counter() - t0) / calls)
    return statistics.median(rounds)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repeats", type=int, default=7)
    args = ap.parse_args()
    r = args.repeats
    seqs = [Sequence(i, 0.0, prompt_tokens=4, output_tokens=2) for i in range(120)]
    wanted = seqs[60]
    rows = [(0.5 * i, 0.5 * i + 0.01, 1, 5) for i in range(8192)]
    cols = [list(c) for c in zip(*rows, strict=True)]
    counts = [1, 0, 0, 2, 0, 0, 0, 1, 0, 0, 0, 0, 1, 0, 0, 0]

    def unzip_tuples() -> object:
        s, e, t, k = zip(*rows, strict=True)
        return np.array(s), np.array(e), np.array(t, np.int64), np.array(k, np.int64)

    def four_lists() -> object:
        return (np.array(cols[0]), np.array(cols[1]), np.array(cols[2], np.int64),
                np.array(cols[3], np.int64))

    def four_lists_fromiter() -> object:
        n = len(cols[0])
        return (np.fromiter(cols[0], np.float64, n), np.fromiter(cols[1], np.float64, n),
                np.fromiter(cols[2], np.int64, n), np.fromiter(cols[3], np.int64, n))

    def four_lists_struct() -> object:
        return (floats(cols[0]), floats(cols[1]), ints(cols[2]), ints(cols[3]))

    def cycle_summed() -> object:
        return np.fromiter(accumulate(islice(cycle(counts), 264), initial=1000), np.int64, 265)

    figures = [
        ("index of place 60 in 120 requests: list.index", per_call_s(
            lambda: seqs.index(wanted), 20_000, r), 1e9, "ns"),
        ("  index_same", per_call_s(lambda: index_same(seqs, wanted), 20_000, r), 1e9, "ns"),
        ("8,192 waiting steps to arrays: 4-tuples unzipped", per_call_s(
            unzip_tuples, 50, r), 1e3, "ms"),
        ("  four lists, np.array", per_call_s(four_lists, 50, r), 1e3, "ms"),
        ("  four lists, np.fromiter", per_call_s(four_lists_fromiter, 50, r), 1e3, "ms"),
        ("  four lists, struct", per_call_s(four_lists_struct, 50, r), 1e3, "ms"),
        ("KV blocks after each of 264 steps: the cycle summed step by step", per_call_s(
            cycle_summed, 5_000, r), 1e6, "us"),
        ("  blocks_used_after_steps", per_call_s(
            lambda: blocks_used_after_steps(counts, 264, 1000), 5_000, r), 1e6, "us"),
    ]
    load = "/".join(Path("/proc/loadavg").read_text().split()[:3]) if Path(
        "/proc/loadavg").exists() else "n/a"
    cpu = platform.processor() or platform.machine()
    print(f"{'compiled' if active() else 'Python'} core, {cpu}, load {load}, medians of {r}")
    for label, seconds, scale, unit in figures:
        print(f"{label:<68} {seconds * scale:8.2f} {unit}")


if __name__ == "__main__":
    main()
