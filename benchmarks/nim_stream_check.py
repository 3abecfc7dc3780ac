"""What points to NIM's token stream (docs/stacks.md, "NIM's token stream"): the course's
H100 rows of 200-token prompts at 50 clients or more, by published output rate, with the
published and replayed ratio of p95 inter-token latency to its mean.

    python benchmarks/published.py --group trtllm-nim-1.0/h100-sxm --json F
    python benchmarks/nim_stream_check.py F

A server that hands out tokens one at a time spaces a client's tokens unevenly once it is
busy: the published ratio grows with the rate (1.0-1.3 below 8,000 tokens a second, to 3.4
at 12,500), in every setting alike, while a replay whose tokens reach the client at the
end of each step keeps it near 1. Prompts of 2,000 tokens are left out: their long prefill
steps stall every client, which the replay does price.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
from pathlib import Path

ROW = re.compile(r"nim1\.0-dli-h100-sxm-(?P<setting>.+)-(?P<lengths>200-\d+)-c(?P<c>\d+)$")
BANDS = (0, 4000, 8000, 10000, 12000, 1e9)  # published output tok/s


def rows(path: Path) -> list[tuple[float, float, float, str]]:
    """(published output tok/s, published p95/mean ITL, replayed p95/mean ITL, id)."""
    out = []
    for r in json.loads(path.read_text())["rows"]:
        m, metrics = ROW.match(r["id"]), r.get("metrics") or {}
        if not m or int(m["c"]) < 50 or "p95_itl_ms" not in metrics:
            continue
        p95, mean = metrics["p95_itl_ms"], metrics["mean_tpot_ms"]
        if p95["simulated"] is None or mean["simulated"] is None:
            continue
        out.append((metrics["output_throughput"]["published"],
                    p95["published"] / mean["published"],
                    p95["simulated"] / mean["simulated"], r["id"]))
    return sorted(out)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("run", type=Path, help="published.py --json output")
    args = ap.parse_args(argv)
    found = rows(args.run)
    print(f"{'published tok/s':>18} {'rows':>5} {'p95/mean ITL published':>23} "
          f"{'replayed':>9}  (medians)")
    for low, high in zip(BANDS, BANDS[1:], strict=False):
        band = [r for r in found if low <= r[0] < high]
        if band:
            label = f"{low:,.0f}-{high:,.0f}" if high < 1e9 else f"{low:,.0f}+"
            print(f"{label:>18} {len(band):>5} {statistics.median(r[1] for r in band):>23.2f} "
                  f"{statistics.median(r[2] for r in band):>9.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
