"""Published runs with an async-scheduling twin: what vLLM's ``--async-scheduling`` bought
each, published and replayed.

    python benchmarks/published.py --json F
    python benchmarks/async_twins.py F [G ...]

For every case whose id has a ``-async`` twin (GPUStack's pairs: the same server, the same
prompts, one flag apart), prints the published and replayed median TPOT and output
throughput of both runs and the twin's gain (async over sync) in each; with more runs of
published.py (before and after a change) one replayed column per run. The published gain
is the engine-core host time async scheduling takes off the step's critical path; a replay
that prices host work the same either way reads no gain (docs/stacks.md, "vLLM V1's engine
core, a cost per running request").
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

METRICS = (("median_tpot_ms", "median TPOT", -1.0), ("output_throughput", "output tok/s", 1.0))


def twins(rows: list[dict[str, Any]]) -> list[tuple[str, str]]:
    """(sync id, async id) for each case whose ``<id>-async`` is also in ``rows``."""
    ids = {r["id"] for r in rows if r.get("status") == "ok"}
    return sorted((i, f"{i}-async") for i in ids if f"{i}-async" in ids)


def gain(sync: float, fast: float, sign: float) -> float:
    """The async run's gain over the sync one, as a share (a lower TPOT is a gain)."""
    return sign * (fast - sync) / sync + 0.0  # + 0.0: no "-0.0%" for no gain


def report(runs: list[list[dict[str, Any]]], names: list[str]) -> str:
    """One block per twin: published and each run's replayed figures, and the gains."""
    by_id = [{r["id"]: r for r in rows} for rows in runs]
    lines = []
    for sync_id, async_id in twins(runs[0]):
        lines.append(sync_id)
        for key, label, sign in METRICS:
            first = by_id[0][sync_id]["metrics"].get(key)
            other = by_id[0][async_id]["metrics"].get(key)
            if first is None or other is None:
                continue
            pub = gain(first["published"], other["published"], sign)
            cells = [f"published {first['published']:9.1f} -> {other['published']:9.1f} "
                     f"({pub:+.1%})"]
            for name, rows in zip(names, by_id, strict=True):
                s = rows[sync_id]["metrics"][key]["simulated"]
                a = rows[async_id]["metrics"][key]["simulated"]
                cells.append(f"{name} {s:9.1f} -> {a:9.1f} ({gain(s, a, sign):+.1%})")
            lines.append(f"  {label:13s} " + "  |  ".join(cells))
    return "\n".join(lines) if lines else "no case has an -async twin in this run"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("runs", nargs="+", type=Path, help="benchmarks/published.py --json files")
    args = ap.parse_args(argv)
    runs = [json.loads(p.read_text())["rows"] for p in args.runs]
    print(report(runs, [p.stem for p in args.runs]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
