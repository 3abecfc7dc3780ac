"""Inter-token latency as a benchmark client measures it, next to servesim's, on replays.

    python benchmarks/client_itl.py --case CASE_ID_OR_PREFIX [--case ...] [--max-prompts 1000]

vLLM's ``benchmark_serving.py`` and SGLang's ``bench_serving.py`` record, per request, the
gap since that request's previous streamed chunk (``timestamp - most_recent_timestamp``),
so a prefill-only step between two of its chunks is inside the gap. servesim's ITL charges
a token the duration of the step that emitted it (docs/metrics.md, "Inter-token
latency"). This replays each published case as ``benchmarks/published.py`` does
(:func:`published.replay_point`), then rebuilds each finished request's chunk times from
the step log (its first token, then the end of every step on its replica that emitted
decode tokens, up to its finish: a running request emits at every such step, a multi-step
chunk being one row) and prints mean / median / P99 of those gaps beside servesim's ITL
and the published figures. A request preempted between two chunks is counted as if it
had emitted at the steps it sat out; the replays here run without preemptions.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run as a script from anywhere

from benchmarks.published import burst_rate_accepted, replay_point, select  # noqa: E402
from benchmarks.published_cases import load_cases  # noqa: E402
from simulator.runner import run_point  # noqa: E402


def client_gaps_ms(requests: pd.DataFrame, steps: pd.DataFrame) -> np.ndarray:
    """Every finished request's gaps between consecutive chunks, in ms (module docstring)."""
    gaps = []
    emitting = steps[steps["num_decode_tokens"] > 0]
    ends_by_replica = {r: np.sort(g["end_s"].to_numpy()) for r, g in emitting.groupby("replica")}
    done = requests[(requests["status"] == "finished") & (requests["output_tokens"] > 1)]
    for replica, first, finish in zip(done["replica"], done["first_token_s"], done["finish_s"],
                                      strict=True):
        ends = ends_by_replica.get(replica, np.empty(0))
        lo, hi = np.searchsorted(ends, [first, finish], side="right")
        gaps.append(np.diff(np.concatenate(([first], ends[lo:hi]))))
    return np.concatenate(gaps) * 1000.0 if gaps else np.empty(0)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--case", action="append", required=True, help="case id or id prefix")
    ap.add_argument("--max-prompts", type=int, default=1000)
    args = ap.parse_args(argv)
    rate, _ = burst_rate_accepted()
    for case in select(load_cases(None), args.case, None):
        point, _ = replay_point(case, max_prompts=args.max_prompts, burst_rate=rate)
        out = run_point({}, point)
        if out.result.steps.empty:
            print(f"{case.id}: no step log kept; nothing to rebuild")
            continue
        gaps = client_gaps_ms(out.result.requests, out.result.steps)
        s = out.summary
        published = " / ".join(f"{case.metrics[k]:.1f}" if k in case.metrics else "-"
                               for k in ("mean_itl_ms", "median_itl_ms", "p99_itl_ms"))
        print(f"{case.id}: ITL mean / median / P99 ms: client's gaps "
              f"{gaps.mean():.1f} / {np.median(gaps):.1f} / {np.percentile(gaps, 99):.1f}; "
              f"servesim's {s['mean_itl_ms']:.1f} / {s['median_itl_ms']:.1f} / "
              f"{s['p99_itl_ms']:.1f}; published {published} "
              f"({len(gaps)} gaps, {s.get('num_preemptions', 0)} preemptions)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
