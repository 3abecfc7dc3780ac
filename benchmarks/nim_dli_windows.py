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
give scored the fewest windows its count can (``scored_windows`` in
benchmarks/nim_dli_cases.py, whose cases replay that many). Many of the runs at 100-250
clients went on to 4-10 windows, where perf_analyzer's stop rule, applied to the replay,
stops at three.

    python benchmarks/nim_dli_windows.py
"""

from __future__ import annotations

import sys
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run as a script from anywhere

from benchmarks.nim_dli_cases import (  # noqa: E402
    TABLE,
    least_count,
    longest_scored_s,
    scored_windows,
    table_rows,
)
from simulator.measured.perf_analyzer import SLEEP_FACTOR, STABILITY_WINDOW  # noqa: E402

INTERVALS_S = (5.0, 10.0, 20.0, 30.0, 40.0, 60.0, 80.0, 120.0)  # candidate intervals


def one_client_rows(table: Path = TABLE) -> list[tuple[float, int]]:
    """(mean request latency in s, least scored count) of every one-client row."""
    return [(float(r["request_latency-avg"]) / 1e9, least_count(float(r["num_input_token-avg"])))
            for r in table_rows(table) if r["input_config-concurrency"] == "1"]


def fits(rows: list[tuple[float, int]], scored_s: float) -> int:
    """How many ``rows`` allow the count that ``scored_s`` of one client's requests gives."""
    return sum(1 for latency, least in rows
               if (n := int(scored_s // latency)) > 0 and n % least == 0)


def table_windows(table: Path = TABLE) -> list[int | None]:
    """:func:`scored_windows` of every row of ``table``, in its order."""
    return [scored_windows(row) for row in table_rows(table)]


def p95_outlasts(row: dict[str, str], windows: int | None) -> bool:
    """Whether ``row``'s 95th-percentile request latency is longer than the windows its
    count gives (None: three) can hold: at least one scored request in twenty took that
    long, and each was sent after the load started and ended by the last window's end.
    Printed, not applied (docs/gpu-profiles.md, stop 70)."""
    return float(row["request_latency-p95"]) / 1e9 > longest_scored_s(
        windows or STABILITY_WINDOW)


def main() -> int:
    rows = one_client_rows()
    print(f"{len(rows)} one-client rows; scored time = {STABILITY_WINDOW} windows of "
          f"{SLEEP_FACTOR} x the interval")
    print(f"{'interval s':>10} {'scored s':>9} {'rows that fit':>14}")
    for interval in INTERVALS_S:
        scored = STABILITY_WINDOW * SLEEP_FACTOR * interval
        print(f"{interval:10g} {scored:9g} {fits(rows, scored):>8} of {len(rows)}")
    table = table_rows()
    scored = [scored_windows(row) for row in table]
    found = Counter(scored)
    print(f"windows scored by the table's {len(table)} rows, from their counts "
          f"(None: three windows can give the count, or the mean fixes none):")
    for windows, rows_n in sorted(found.items(), key=lambda kv: (kv[0] is None, kv[0] or 0)):
        print(f"{windows!s:>10} {rows_n:>5} rows")
    clients = [int(r["input_config-concurrency"]) for r in table]
    more = Counter(c for c, w in zip(clients, scored, strict=True) if w is not None)
    every = Counter(clients)
    print("rows that scored more than three windows, by clients: "
          + ", ".join(f"{c}: {more[c]} of {every[c]}" for c in sorted(every)))
    longer = [c for c, row, w in zip(clients, table, scored, strict=True)
              if p95_outlasts(row, w)]
    print(f"rows whose p95 request latency outlasts those windows: {len(longer)} (clients "
          + ", ".join(f"{c}: {n}" for c, n in sorted(Counter(longer).items())) + ")")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
