"""A published case's simulated ITL with and without the gaps across prefill-only steps.

Replays one case of benchmarks/published.py (its stack, its scored requests and steps)
and prints its ITL three ways: each token charged its own step's duration (servesim
before stop 57), each token its gap since its request's previous token
(simulator/itl_gaps.py: what ``summarize`` reports now), and the pooled mean that the
request records give exactly (the scored requests' summed ``finish - first token`` over
their summed gaps), beside the published mean and median::

    python benchmarks/itl_gaps_check.py \\
        sglang0.5.6-cookbook-b200-qwen3-235b-a22b-tp8-random8000-1000-n320-mc64

Seeded replay: the figures do not depend on the machine.
"""

from __future__ import annotations

import argparse

import numpy as np
from published import replay_point
from published_cases import MEASURE_FROM, burst_rate_accepted, load_cases

from simulator.itl_gaps import itl_gaps
from simulator.metrics import weighted_percentile
from simulator.runner import run_point


def main(argv: list[str] | None = None) -> int:
    """Print the case's ITL figures (see the module doc)."""
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("case", help="a published case id (or its unique prefix)")
    args = ap.parse_args(argv)
    found = [c for c in load_cases() if c.id.startswith(args.case)]
    if len(found) != 1:
        ap.error(f"{args.case!r} matches {len(found)} cases; give one case's id")
    case = found[0]
    point, _ = replay_point(case, max_prompts=1000, burst_rate=burst_rate_accepted()[0])
    res = run_point({}, point)
    first, start = point.get(MEASURE_FROM) or (0, -np.inf)
    req = res.result.requests
    req = req[(req["request_id"] >= first) & (req["status"] == "finished")]
    steps = res.result.steps
    steps = steps[steps["start_s"] >= start]
    rows = []
    for _, one in steps.groupby("replica", sort=True):
        emit = one["num_decode_tokens"].to_numpy() > 0
        own = ((one["end_s"] - one["start_s"]).to_numpy()[emit] * 1000.0,
               one["num_decode_tokens"].to_numpy()[emit])
        gaps = itl_gaps(*(one[c].to_numpy() for c in ("start_s", "end_s",
                                                      "num_decode_tokens", "num_running")))
        rows.append((own, gaps[:2]))
    many = req[req["output_tokens"] > 1]
    pooled = 1000.0 * float((many["finish_s"] - many["first_token_s"]).sum()) / float(
        (many["output_tokens"] - 1).sum())
    print(f"{case.id}\n  published: mean ITL {case.metrics.get('mean_itl_ms', float('nan')):.2f}"
          f" ms, median {case.metrics.get('median_itl_ms', float('nan')):.2f} ms")
    for name, k in (("own step's duration (before)", 0), ("gap since previous token", 1)):
        values = np.concatenate([r[k][0] for r in rows])
        weights = np.concatenate([r[k][1] for r in rows])
        print(f"  {name:30s} mean {np.average(values, weights=weights):7.2f}  median "
              f"{weighted_percentile(values, weights, 50):7.2f}  p99 "
              f"{weighted_percentile(values, weights, 99):7.2f} ms")
    print(f"  {'pooled mean from the requests':30s} mean {pooled:7.2f} ms")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
