"""How long perf_analyzer measured the NIM sweeps of NVIDIA's sizing course, from the table.

The table (benchmarks/published_runs/nim_dli/nim_sweeps.csv) gives no measurement interval,
but its mean input length (e.g. 199.6577142857143 tokens) is a sum of integers over the
requests scored, so the smallest count that makes it whole divides the true count. A run
with one client scores the requests that end inside its windows: about window time /
request latency of them. This prints, for candidate scored times, how many one-client rows
have a count that the table's mean allows. perf_analyzer's windows are 1.2 x
--measurement-interval (simulator/measured/perf_analyzer.py); with one client every window
scores a request and the first three are stable, so the scored time is three windows.

    python benchmarks/nim_dli_windows.py
"""

from __future__ import annotations

import csv
import sys
from fractions import Fraction
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run as a script from anywhere

from benchmarks.nim_dli_cases import TABLE  # noqa: E402
from simulator.measured.perf_analyzer import SLEEP_FACTOR, STABILITY_WINDOW  # noqa: E402

INTERVALS_S = (5.0, 10.0, 20.0, 30.0, 40.0, 60.0, 80.0, 120.0)  # candidate intervals


def least_count(mean: float, most: int = 10_000) -> int:
    """The smallest number of requests whose integer lengths average to ``mean``: the
    denominator of the closest fraction with one of at most ``most``."""
    ratio = Fraction(mean).limit_denominator(most)
    if abs(float(ratio) - mean) * ratio.denominator >= 1e-6:  # the float is exact to ~1e-9
        raise ValueError(f"no count up to {most} gives the mean {mean!r}")
    return ratio.denominator


def one_client_rows(table: Path = TABLE) -> list[tuple[float, int]]:
    """(mean request latency in s, least scored count) of every one-client row."""
    with open(table, newline="") as f:
        return [(float(r["request_latency-avg"]) / 1e9,
                 least_count(float(r["num_input_token-avg"])))
                for r in csv.DictReader(f) if r["input_config-concurrency"] == "1"]


def fits(rows: list[tuple[float, int]], scored_s: float) -> int:
    """How many ``rows`` allow the count that ``scored_s`` of one client's requests gives."""
    return sum(1 for latency, least in rows
               if (n := int(scored_s // latency)) > 0 and n % least == 0)


def main() -> int:
    rows = one_client_rows()
    print(f"{len(rows)} one-client rows; scored time = {STABILITY_WINDOW} windows of "
          f"{SLEEP_FACTOR} x the interval")
    print(f"{'interval s':>10} {'scored s':>9} {'rows that fit':>14}")
    for interval in INTERVALS_S:
        scored = STABILITY_WINDOW * SLEEP_FACTOR * interval
        print(f"{interval:10g} {scored:9g} {fits(rows, scored):>8} of {len(rows)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
