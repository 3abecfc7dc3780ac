"""How long perf_analyzer measured the NIM sweeps of NVIDIA's sizing course, from the table.

The table (benchmarks/published_runs/nim_dli/nim_sweeps.csv) gives no measurement interval,
but its mean input length (e.g. 199.6577142857143 tokens) is a sum of integers over the
requests scored, so the smallest count that makes it whole divides the true count. A run
with one client scores the requests that end inside its windows: about window time /
request latency of them. This prints, for candidate scored times, how many one-client rows
have a count that the table's mean allows. perf_analyzer's windows are 1.2 x
--measurement-interval (simulator/measured/perf_analyzer.py); with one client every window
scores a request and the first three are stable, so the scored time is three windows.

Then, for every row, the windows its count says it scored: the count is a multiple of the
least count, and the requests scored span from the first send (the first round, at the
start) to a response in the last window, so n / throughput lies within a window (or a
request latency, if shorter) of that window's end. A row whose count three windows cannot
give scored the fewest windows its count can (:func:`scored_windows`; the cases replay
that many: benchmarks/nim_dli_cases.py). Many of the runs at 100-250 clients went on to
4-10 windows, where perf_analyzer's stop rule, applied to the replay, stops at three.

    python benchmarks/nim_dli_windows.py
"""

from __future__ import annotations

import csv
import math
import sys
from collections import Counter
from fractions import Fraction
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run as a script from anywhere

from benchmarks.nim_dli_cases import INTERVAL_S, TABLE  # noqa: E402
from simulator.measured.perf_analyzer import (  # noqa: E402
    SLEEP_FACTOR,
    STABILITY_WINDOW,
    TimeWindows,
)

INTERVALS_S = (5.0, 10.0, 20.0, 30.0, 40.0, 60.0, 80.0, 120.0)  # candidate intervals
MAX_TRIALS = TimeWindows().max_trials  # perf_analyzer's default: the most windows a run has
SPAN_SLACK = 0.02  # a scored span may overrun its windows by this share (sleep and wake-up)


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


def scored_windows(row: dict[str, str], interval_s: float = INTERVAL_S) -> int | None:
    """The windows a table row's count says its run scored, when three cannot give it
    (None: three can, or the mean fixes no count). A count n = k x the least count spans
    n / throughput seconds, from the first round's send to a response inside the last
    window W: within W windows, and no earlier than W windows less one window or one
    request latency, whichever is shorter (less SPAN_SLACK)."""
    try:
        least = least_count(float(row["num_input_token-avg"]))
    except ValueError:
        return None
    per_request_s = least / float(row["request_throughput-avg"])
    latency_s = float(row["request_latency-avg"]) / 1e9
    width = SLEEP_FACTOR * interval_s

    def fits(windows: int) -> bool:
        end = windows * width
        low, high = end - min(latency_s, width) - SPAN_SLACK * end, end * (1 + SPAN_SLACK)
        k = max(1, math.ceil(low / per_request_s))
        return k * per_request_s <= high

    if fits(STABILITY_WINDOW):
        return None
    return next((w for w in range(STABILITY_WINDOW + 1, MAX_TRIALS + 1) if fits(w)), None)


def table_windows(table: Path = TABLE) -> list[int | None]:
    """:func:`scored_windows` of every row of ``table``, in its order."""
    with open(table, newline="") as f:
        return [scored_windows(row) for row in csv.DictReader(f)]


def main() -> int:
    rows = one_client_rows()
    print(f"{len(rows)} one-client rows; scored time = {STABILITY_WINDOW} windows of "
          f"{SLEEP_FACTOR} x the interval")
    print(f"{'interval s':>10} {'scored s':>9} {'rows that fit':>14}")
    for interval in INTERVALS_S:
        scored = STABILITY_WINDOW * SLEEP_FACTOR * interval
        print(f"{interval:10g} {scored:9g} {fits(rows, scored):>8} of {len(rows)}")
    found = Counter(table_windows())
    print(f"windows scored by the table's {sum(found.values())} rows, from their counts "
          f"(None: three windows can give the count, or the mean fixes none):")
    for windows, rows_n in sorted(found.items(), key=lambda kv: (kv[0] is None, kv[0] or 0)):
        print(f"{windows!s:>10} {rows_n:>5} rows")
    with open(TABLE, newline="") as f:
        clients = [int(r["input_config-concurrency"]) for r in csv.DictReader(f)]
    more = Counter(c for c, w in zip(clients, table_windows(), strict=True) if w is not None)
    every = Counter(clients)
    print("rows that scored more than three windows, by clients: "
          + ", ".join(f"{c}: {more[c]} of {every[c]}" for c in sorted(every)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
