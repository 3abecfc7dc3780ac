"""``servesim measure --endpoint http://127.0.0.1:8000/v1 --workload W --out DIR``.

Replays a workload (scenario TOML or trace) against any OpenAI-compatible endpoint and
writes requests.parquet, tokens.parquet and summary.json (docs/serving.md). No torch.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from simulator.results_manifest import ENDPOINT, prepare_results


def add_measure_parser(sub: Any) -> None:
    """The ``measure`` subcommand and its flags."""
    p = sub.add_parser("measure", help="replay a workload against an OpenAI-compatible "
                                       "endpoint (this engine, vLLM, SGLang) and record it")
    p.add_argument("--endpoint", required=True, metavar="URL",
                   help="API base, e.g. http://127.0.0.1:8000/v1")
    p.add_argument("--workload", required=True, metavar="SCENARIO_OR_TRACE",
                   help="scenario TOML (its [workload], drawn with its seed) or trace file")
    p.add_argument("--out", required=True, metavar="DIR", help="results folder")
    p.add_argument("--model", default=None,
                   help="model name to send (default: the first one /v1/models lists)")
    p.add_argument("--set", dest="overrides", action="append", default=[],
                   metavar="SECTION.KEY=VALUE", help="override a scenario field, repeatable")
    p.add_argument("--concurrency", type=int, default=None,
                   help="closed loop with N clients (default: the workload's arrivals)")
    p.add_argument("--max-concurrency", type=int, default=None,
                   help="open loop: requests in flight at most (default unbounded)")
    p.add_argument("--rate-scale", type=float, default=1.0,
                   help="divide arrival times by this (2 = twice the rate; default 1)")
    p.add_argument("--num-requests", type=int, default=None,
                   help="send only the first N requests")
    p.add_argument("--timeout", type=float, default=300.0, metavar="S",
                   help="per-request limit from sending to the last token (default 300)")
    p.add_argument("--max-context", type=int, default=None,
                   help="fit requests to this context (default: the server's max_model_len, "
                        "else the scenario model's)")
    p.add_argument("--prompt-format", choices=("ids", "text"), default="ids",
                   help="ids: token-id lists of exact length (default); text: words")
    p.add_argument("--vocab-size", type=int, default=32000,
                   help="prompt token ids are drawn in [1, N) (default 32000)")
    p.add_argument("--seed", type=int, default=None,
                   help="seed of the prompt ids (default: the scenario's seed; 0 for a trace)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar on stderr")
    p.add_argument("--overwrite", action="store_true",
                   help="replace results of another kind in --out (a simulation's, an engine "
                        "run's); refused without it")


def measure_command(args: argparse.Namespace) -> int:
    """Measure, write the results, print a short report; 2 on bad input or no server, 1
    when every request failed (the results are written all the same)."""
    try:
        from clients.measure import LoopConfig, MeasureError, load_workload, measure, write_run
    except ImportError as e:
        print(f"servesim: error: `servesim measure` needs the serve extra ({e}): "
              "pip install -e '.[serve]'", file=sys.stderr)
        return 2
    if not Path(args.workload).is_file():
        print(f"servesim: error: --workload {args.workload}: no such file", file=sys.stderr)
        return 2
    out = Path(args.out)
    created = not out.exists()
    try:
        prepare_results(out, ENDPOINT, overwrite=args.overwrite)  # before sending anything
        cfg = LoopConfig(args.endpoint, model=args.model, concurrency=args.concurrency,
                         max_concurrency=args.max_concurrency, timeout_s=args.timeout,
                         prompt_format=args.prompt_format, vocab_size=args.vocab_size,
                         max_context=args.max_context, seed=args.seed,
                         progress=not args.no_progress)

        def load(max_context: int | None) -> Any:
            return load_workload(args.workload, overrides=args.overrides,
                                 max_context=max_context, num_requests=args.num_requests,
                                 rate_scale=args.rate_scale)

        load(args.max_context)  # the user's own inputs are checked before any connection
        run = measure(cfg, load)
        paths = write_run(run, out)
    except (MeasureError, ValueError, OSError) as e:  # ConfigError, TraceError: ValueErrors
        if created and out.is_dir() and not any(out.iterdir()):
            out.rmdir()  # made by the check above; nothing was measured
        print(f"servesim: error: {e}", file=sys.stderr)
        return 2
    s = run.summary()
    print(f"{run.model} at {run.endpoint}, {run.mode}: {s['completed']} of "
          f"{s['num_requests']} finished, {s['num_rejected']} failed")
    for reason, count in s["rejection_reasons"].items():
        print(f"  {count} x {reason}")
    if s["completed"]:
        print(f"TTFT mean {s['mean_ttft_ms']:.1f} ms, P99 {s['p99_ttft_ms']:.1f} ms; "
              f"E2E mean {s['mean_e2el_ms']:.1f} ms; output {s['output_throughput']:.1f} tok/s")
    print(f"wrote {', '.join(str(p) for p in paths)}")
    if s["num_requests"] and not s["completed"]:
        top = next(iter(s["rejection_reasons"]), "no reason recorded")
        print(f"servesim: error: every request failed ({s['num_requests']} of "
              f"{s['num_requests']}); the most common reason: {top}", file=sys.stderr)
        return 1
    return 0
