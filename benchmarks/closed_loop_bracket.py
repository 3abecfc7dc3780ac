"""Where a closed loop's published TTFT sits between the two client-phase replays.

A closed loop of C clients with equal lengths replays two ways (simulator/workload/
clients.py): ``client_start = "together"``, every client in one lockstep round forever, and
``"random"``, the clients at independent phases of one cycle. The first makes each prompt
wait for the round's C - 1 others; the second lets prompts meet only by chance. Measured
runs sit between (docs/metrics.md, "Closed-loop clients"). For every published closed-loop
case with a mean (else median) TTFT this replays both and prints, per group and
concurrency band: the cases, the share whose published TTFT lies inside the two replays
(widened by 15% either side), and the median position of the published value between them
(0: the lockstep replay's TTFT, 1: the random-phase replay's; outside [0, 1] past either).
``--by-prompt`` splits each group by the case's fixed prompt length too (the course's
short prompts fall out of lockstep where its long ones do not); ``--in-sample`` prints the
fitted cases' table as well.

    python benchmarks/closed_loop_bracket.py [--case PREFIX] [--cases-file F] [--by-prompt]
        [--in-sample] [--json F]
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.nim_dli_groups import band  # noqa: E402
from benchmarks.published import WITHIN, run_case, select  # noqa: E402
from benchmarks.published_cases import Case, burst_rate_accepted, load_cases  # noqa: E402

STARTS = ("together", "random")
TTFT_KEYS = ("mean_ttft_ms", "median_ttft_ms")  # the first a case has is compared


def ttft_key(case: Case) -> str | None:
    """The TTFT metric a closed-loop case is compared on (None: not closed, or no TTFT)."""
    if case.workload.get("arrival") != "closed":
        return None
    return next((k for k in TTFT_KEYS if k in case.metrics), None)


def position(published: float, lockstep: float, random: float) -> float:
    """Where ``published`` sits from the lockstep replay's TTFT (0) to the random-phase
    replay's (1); NaN when the two replays agree (no bracket to place it in)."""
    if math.isclose(lockstep, random, rel_tol=1e-9):
        return math.nan
    return (published - lockstep) / (random - lockstep)


def inside(published: float, lockstep: float, random: float, widen: float = WITHIN) -> bool:
    """Whether ``published`` lies within the two replays, each end widened by ``widen``."""
    lo, hi = min(lockstep, random), max(lockstep, random)
    return lo * (1 - widen) <= published <= hi * (1 + widen)


def bracket_row(case: Case, rate: float) -> dict[str, Any] | None:
    """``case`` replayed with each client start: its published TTFT, both replays', and
    its position between them (None: not a closed loop with a TTFT, or a replay failed)."""
    key = ttft_key(case)
    if key is None:
        return None
    sims = {}
    for start in STARTS:
        # a case's own ramp (the course's spread first round) goes with its own start
        row = run_case(case, max_prompts=1000, burst_rate=rate,
                       overrides=[f"workload.client_start='{start}'", "workload.client_ramp_s=0"])
        sim = row.get("metrics", {}).get(key, {}).get("simulated")
        if row["status"] != "ok" or sim is None:
            return None
        sims[start] = float(sim)
    published = float(case.metrics[key])
    return {"id": case.id, "group": case.group, "fitted": case.fitted, "metric": key,
            "clients": int(case.workload.get("concurrency", 0)),
            "prompt": int(case.workload.get("prompt_tokens", 0)), "published": published,
            **sims, "position": position(published, sims["together"], sims["random"]),
            "inside": inside(published, sims["together"], sims["random"])}


def table(rows: list[dict[str, Any]], by_prompt: bool = False) -> list[dict[str, Any]]:
    """Per (group, concurrency band), then all: cases, share inside, median position;
    ``by_prompt``: the group names its fixed prompt length too (``/200``; ``/-`` for a
    case whose prompts vary)."""
    groups: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
    for r in rows:
        group = f"{r['group']}/{r.get('prompt') or '-'}" if by_prompt else r["group"]
        groups[(group, band(r["clients"]))].append(r)
        groups[("all", "")].append(r)
    out = []
    for (group, clients), rs in sorted(groups.items(), key=lambda kv: (kv[0][0] == "all",
                                                                       kv[0])):
        placed = [r["position"] for r in rs if not math.isnan(r["position"])]
        out.append({"group": group, "clients": clients, "n": len(rs),
                    "inside": sum(r["inside"] for r in rs) / len(rs),
                    "position": statistics.median(placed) if placed else math.nan})
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--case", action="append", default=[], help="case id or id prefix")
    ap.add_argument("--cases-file", action="append", default=None, help="a case file")
    ap.add_argument("--by-prompt", action="store_true",
                    help="split each group by its cases' fixed prompt length")
    ap.add_argument("--in-sample", action="store_true",
                    help="print the fitted cases' table too")
    ap.add_argument("--json", help="write the rows here")
    args = ap.parse_args(argv)
    cases = [c for c in select(load_cases(args.cases_file), args.case, None)
             if ttft_key(c) is not None]
    rate, _ = burst_rate_accepted()
    rows = [r for r in (bracket_row(c, rate) for c in cases) if r is not None]
    held_out = [r for r in rows if not r["fitted"]]
    print(f"{len(rows)} closed-loop cases with a TTFT ({len(held_out)} held out, below); "
          "inside: the published TTFT within the lockstep and random-phase replays, 15% "
          "either side; position: 0 lockstep, 1 random phases")
    tables = [("held out", held_out)]
    if args.in_sample:
        tables.append(("in sample (fitted)", [r for r in rows if r["fitted"]]))
    for title, part in tables:
        if not part:
            continue
        print(f"{title}:")
        print(f"{'group':34s} {'clients':>8s} {'n':>4s} {'inside':>7s} {'position':>9s}")
        for t in table(part, args.by_prompt):
            print(f"{t['group']:34s} {t['clients']:>8s} {t['n']:4d} {t['inside']:7.0%} "
                  f"{t['position']:+9.2f}")
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
