"""What TensorRT-LLM's DEP rows replay as: pool, batch, step time, against the published rate.

    python benchmarks/dep_check.py [--case ID ...] [--model NAME] [--terms]

For each attention-data-parallel case of the performance overview
(``published_cases_trtllm_overview.toml``, ``parallelism = "dep"``) on a catalogue model:
the replay's KV pool in tokens, the decode rows of its median step and that step's time,
the simulated and published output rates, and the step time the published rate implies at
the replay's batch (rows / published tokens a second). A published step longer than the
replay's at the same batch says the replay's step is fast; a batch the engine could not
have held says its pool or limits are. docs/gpu-profiles.md, "Attention data parallel +
expert parallel". ``--model`` takes every row of one catalogue model instead, tensor
parallel ones too (Llama 4 Maverick's: "Llama 4 Maverick"). ``--terms`` adds the roofline's
pieces of a pure decode step at the busiest steps' median rows and context (a roofline cost
only): the measured expert layers, the other matmuls, attention, all-reduces (or DEP's
token exchange) and fixed overheads, in ms. Seeded replays only: nothing here depends on
this machine's speed.
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.published_cases import (  # noqa: E402
    catalogue_status,
    load_cases,
    scenario_point,
)
from simulator.costs.roofline import RooflineCost  # noqa: E402
from simulator.runner import run_point  # noqa: E402
from simulator.shapes import StepShape  # noqa: E402

CASES = Path(__file__).parent / "published_cases_trtllm_overview.toml"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--case", action="append", default=None, help="a case id (default: all)")
    ap.add_argument("--model", default=None,
                    help="every row of this catalogue model, whatever its parallelism")
    ap.add_argument("--terms", action="store_true",
                    help="also print the roofline's pieces of the busiest decode step")
    args = ap.parse_args(argv)
    cases = [c for c in load_cases(CASES)
             if (c.model == args.model if args.model else c.parallelism == "dep")
             and catalogue_status(c) is None and (args.case is None or c.id in args.case)]
    print(f"{'case':58s} {'pool tok':>10s} {'rows':>5s} {'step ms':>8s} {'sim tok/s':>10s} "
          f"{'pub tok/s':>10s} {'pub step ms':>11s}")
    for case in cases:
        point, _ = scenario_point(case, max_prompts=1000, use_stack=True, burst_rate=math.inf)
        res = run_point({}, point)
        dep, steps = res.deployment, res.result.steps
        rows = steps["num_decode_seqs"]
        busy = steps[rows == rows.max()]
        step_s = float((busy["end_s"] - busy["start_s"]).median())
        published = case.metrics["output_throughput"]
        print(f"{case.id:58s} {dep.kv_blocks * dep.block_size:10d} {int(rows.max()):5d} "
              f"{step_s * 1e3:8.1f} {res.summary['output_throughput']:10,.0f} "
              f"{published:10,.0f} {rows.max() / published * 1e3:11.1f}")
        if args.terms:
            print("    " + step_terms(dep.cost, int(rows.max()),
                                      int(busy["decode_context_tokens"].median())))
    return 0


def step_terms(cost: object, rows: int, context: int) -> str:
    """The roofline's pieces of a decode of ``rows`` rows attending ``context`` tokens in
    all, in ms (``"not a roofline cost"`` for a profile)."""
    if not isinstance(cost, RooflineCost):
        return "terms: not a roofline cost"
    t = cost.terms(StepShape(num_decode_seqs=rows, decode_context_tokens=context))
    curve = cost.measured_moe
    experts = 0.0 if curve is None else cost.model.moe_layers * curve.time_s(float(rows))
    return (f"terms at {rows} rows, {context / rows:,.0f} tokens each: experts "
            f"{experts * 1e3:.1f}, other matmuls {(t.matmul_s - experts) * 1e3:.1f}, attention "
            f"{t.attention_s * 1e3:.1f}, all-reduce/exchange {t.allreduce_s * 1e3:.1f}, "
            f"overhead {t.overhead_s * 1e3:.1f}, total {t.total_s * 1e3:.1f} ms")


if __name__ == "__main__":
    raise SystemExit(main())
