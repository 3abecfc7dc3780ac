"""How the gpt-oss replays read, by stack release, GPU and load.

    python benchmarks/published.py --cases-file benchmarks/published_cases_gpt_oss.toml \\
        --cases-file benchmarks/published_cases_trtllm_overview.toml --json run.json
    python benchmarks/gpt_oss_check.py run.json

For every gpt-oss case of the run (model ``gpt-oss-*``), the median signed error of output
throughput, median TPOT and mean TTFT, per (stack release, GPU, load): "light" when at most
four requests are in flight (a ``max_concurrency`` of 1 to 4), else "heavy" (bursts of 100
to 3,000 requests). docs/gpu-profiles.md ("gpt-oss", stop 58) reads the table.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run as a script from anywhere

from benchmarks.published_cases import Case, load_cases  # noqa: E402

FIGURES = ("output_throughput", "median_tpot_ms", "mean_ttft_ms")
LIGHT = 4  # requests in flight at most for a "light" case


def load(case: Case) -> str:
    """``light`` for a client that keeps at most LIGHT requests in flight, else ``heavy``."""
    wl = case.workload
    bound = wl.get("max_concurrency") or wl.get("concurrency")
    return "light" if bound is not None and int(bound) <= LIGHT else "heavy"


def table(rows: list[dict[str, Any]], cases: dict[str, Case]) -> list[str]:
    """One line per (release, GPU, load): cases and each figure's median signed error."""
    errors: dict[tuple[str, str, str], dict[str, list[float]]] = defaultdict(
        lambda: defaultdict(list))
    for r in rows:
        case = cases.get(r["id"])
        if case is None or not case.model.startswith("gpt-oss") or not r.get("metrics"):
            continue
        key = (f"{case.stack} {case.stack_version}", case.gpu, load(case))
        for figure in FIGURES:
            m = r["metrics"].get(figure)
            if m and m.get("error") is not None:
                errors[key][figure].append(m["error"])
    lines = [f"{'release':16s} {'gpu':9s} {'load':5s} {'n':>3s} "
             + " ".join(f"{f:>18s}" for f in FIGURES)]
    for key in sorted(errors):
        by = errors[key]
        n = max(len(v) for v in by.values())
        cells = [f"{statistics.median(by[f]):+18.0%}" if by.get(f) else f"{'':>18s}"
                 for f in FIGURES]
        lines.append(f"{key[0]:16s} {key[1]:9s} {key[2]:5s} {n:3d} " + " ".join(cells))
    return lines


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("run", type=Path, help="a published.py --json file")
    args = ap.parse_args(argv)
    rows = json.loads(args.run.read_text())["rows"]
    print("\n".join(table(rows, {c.id: c for c in load_cases(None)})))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
