"""The ``servesim`` command line, ten commands:

- ``run`` and ``sweep``: simulate a scenario's points (``--backend engine``: serve them);
- ``plan``: the cheapest deployment that meets an SLO at a target rate;
- ``validate``: serve a scenario on the real engine and simulate it, then compare;
- ``profile``: measure prefill/decode step times on a real model;
- ``calibrate``: fit a cost profile from a profile table (or a measured run);
- ``serve``: serve a model over an OpenAI-compatible HTTP API;
- ``measure``: replay a workload against an OpenAI-compatible endpoint;
- ``stacks``: the serving-stack presets and what each sets for a model on a GPU;
- ``dashboard``: start the Streamlit dashboard.

Commands that need the engine (torch) import it only when they run, so ``servesim run``
starts fast without torch.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path

from servesim.calibrate_command import add_calibrate_parser
from servesim.commands import run_command
from servesim.measure_command import add_measure_parser
from servesim.plan_command import add_plan_parser
from servesim.profile_command import add_profile_parser
from servesim.serve_command import add_serve_parser
from servesim.stacks_command import add_stacks_parser
from servesim.validate_command import add_validate_parser

DEFAULT_SCENARIO = Path(__file__).resolve().parents[1] / "scenarios" / "chat.toml"


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("scenario", nargs="?", default=None,
                   help=f"scenario TOML file (default: {DEFAULT_SCENARIO.name}, the chat demo)")
    p.add_argument("--set", dest="overrides", action="append", default=[],
                   metavar="SECTION.KEY=VALUE",
                   help="override a field (TOML value; a list makes a sweep), repeatable")
    p.add_argument("--out", default=None, metavar="DIR",
                   help="results folder (default: results/<scenario name>)")
    p.add_argument("--json", action="store_true",
                   help="print the list of summary objects on stdout and nothing else there")
    p.add_argument("--workers", type=int, default=None,
                   help="processes to run points on (default: every local CPU)")
    p.add_argument("--dask", default=None, metavar="ADDRESS",
                   help="run points on a Dask cluster: scheduler address, or 'local'")
    p.add_argument("--no-cache", action="store_true",
                   help="sweep: recompute every point (default: reuse <out>/cache)")
    p.add_argument("--trace", default=None, metavar="FILE",
                   help="replay FILE's requests (arrivals and lengths; path from the current "
                        "directory) instead of the scenario's traffic; --set workload.rate=R "
                        "rescales its arrivals; a trace of lengths only keeps the scenario's "
                        "arrivals")


def _overwrite(p: argparse.ArgumentParser) -> None:
    p.add_argument("--overwrite", action="store_true",
                   help="replace results of another kind in --out (an engine run's, a "
                        "measurement's); refused without it")


def build_parser() -> argparse.ArgumentParser:
    """The argument parser for every ``servesim`` command."""
    parser = argparse.ArgumentParser(
        prog="servesim", description="LLM-serving simulator calibrated against real runs.")
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="simulate a scenario (every point if it holds lists)")
    _common(run)
    _overwrite(run)
    run.add_argument("--backend", choices=("sim", "engine"), default="sim",
                     help="sim: the simulator (default); engine: serve the workload on the "
                          "real engine here, in real time (needs the engine extra)")
    run.add_argument("--threads", type=int, default=1,
                     help="engine backend: torch intra-op threads, on CPU or GPU (default 1, "
                          "stable timings; recorded in the machine fingerprint)")
    sweep = sub.add_parser("sweep", help="simulate every point of a sweep, with progress")
    _common(sweep)
    _overwrite(sweep)
    sweep.add_argument("--vary", action="append", default=[], metavar="SECTION.KEY=A,B,C",
                       help="add a sweep axis from the command line, repeatable")
    add_plan_parser(sub, _common)
    dash = sub.add_parser("dashboard", help="start the Streamlit dashboard on 127.0.0.1")
    dash.add_argument("--port", type=int, default=8501, help="port to serve on (default 8501)")
    add_calibrate_parser(sub)
    add_profile_parser(sub)
    add_validate_parser(sub)
    add_serve_parser(sub)
    add_measure_parser(sub)
    add_stacks_parser(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``servesim`` console script; Ctrl-C anywhere is one line and
    exit status 130 (finished points are already on disk: engine runs and sweeps resume)."""
    try:
        return _dispatch(argv)
    except KeyboardInterrupt:
        print("\nservesim: interrupted", file=sys.stderr)
        return 130


def _dispatch(argv: Sequence[str] | None) -> int:
    """Parse ``argv`` and run the command it names."""
    args = build_parser().parse_args(argv)
    if args.command == "dashboard":
        from servesim.dashboard_command import dashboard_command

        return dashboard_command(args.port)
    if args.command == "calibrate":
        from servesim.calibrate_command import calibrate_command

        return calibrate_command(args, list(argv) if argv is not None else None)
    if args.command == "validate":
        from servesim.validate_command import validate_command

        return validate_command(args)
    if args.command == "profile":
        from servesim.profile_command import profile_command

        return profile_command(args)
    if args.command == "serve":
        from servesim.serve_command import serve_command

        return serve_command(args)
    if args.command == "measure":
        from servesim.measure_command import measure_command

        return measure_command(args)
    if args.command == "stacks":
        from servesim.stacks_command import stacks_command

        return stacks_command(args)
    if args.scenario is None:
        args.scenario = str(DEFAULT_SCENARIO)
    try:
        summaries, text = run_command(args)
    except (ValueError, OSError) as e:  # ConfigError, TraceError, CapacityError are ValueErrors
        print(f"servesim: error: {e}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(summaries, indent=2))
    else:
        print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
