"""Fit how far apart the first round of NIM 1.0's closed loops reaches the engine, on the
course's A100 rows.

perf_analyzer starts its C clients at once, and with fixed lengths the groups the first round
forms at the engine keep for the whole run: sent together, a round is one prefill step
forever and every TTFT is the whole round's prefill (the lockstep replay reads the H100
rows' 200-token prompts at 25-150 clients 20-260% slow). In the course's export at five
clients the first round, sent within 0.11 ms, reached the engine in two steps, and every
later round in one (benchmarks/nim_dli_check.py part 1): the first requests, each on a new
connection, are taken one after another. How far apart is not measured anywhere read here.
This replays the A100 rows (the fit set; benchmarks/published_cases_nim_dli.toml) with
client k's first request at k x s (``client_start = "ramp"``, ``client_ramp_s = C x s``;
s = 0: all at once) for each candidate s, scored by perf_analyzer's windows as published.py
scores them, and picks the s with the most mean-TTFT and mean-TPOT errors within 15%
(nim_dli_budget_fit.choose; ties: the smaller median |TTFT error|). With ``--held-out`` it
prints the H100 rows at each candidate too: they are not used in the choice.

    python benchmarks/nim_dli_ramp_fit.py               # the fit set only (~3 min)
    python benchmarks/nim_dli_ramp_fit.py --held-out    # and the H100 rows (~8 min)
"""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run as a script from anywhere

from benchmarks.nim_dli_budget_fit import fit_main  # noqa: E402
from benchmarks.published import run_case  # noqa: E402
from benchmarks.published_cases import Case, burst_rate_accepted  # noqa: E402

CANDIDATES_MS = (0.0, 0.5, 1.0, 1.25, 1.5, 1.75, 2.0)  # s, ms a client


def spread(case: Case, per_client_s: float) -> Case:
    """``case`` with client k's first request at k x ``per_client_s`` (0: all at once)."""
    wl = {k: v for k, v in case.workload.items() if k != "client_ramp_s"}
    if per_client_s <= 0:
        return dataclasses.replace(case, workload={**wl, "client_start": "together"})
    ramp = int(wl["concurrency"]) * per_client_s
    return dataclasses.replace(case, workload={**wl, "client_start": "ramp",
                                               "client_ramp_s": ramp})


def run(cases: list[Case], per_client_s: float) -> list[dict]:
    """The rows of ``cases`` replayed with their first round ``per_client_s`` apart."""
    rate, _ = burst_rate_accepted()
    return [run_case(spread(c, per_client_s), max_prompts=1000, burst_rate=rate)
            for c in cases]


def main(argv: list[str] | None = None) -> int:
    return fit_main(argv, __doc__, CANDIDATES_MS, lambda cases, ms: run(cases, ms * 1e-3),
                    lambda ms: f"{ms:g} ms")


if __name__ == "__main__":
    raise SystemExit(main())
