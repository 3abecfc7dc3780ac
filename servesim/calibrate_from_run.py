"""``servesim calibrate --from-run DIR [DIR ...] --scenario S --out profile.json``.

Black-box calibration (calibrate/from_run.py): fit a ``time_scale`` on the scenario's cost
profile and host costs (per step, per request, per token, and the non-blocking per-request
latency) so that the simulator's replay of measured runs matches their TTFT and TPOT. The
runs are read by the one loader of measured runs (simulator/measured/, as ``servesim
validate --measured``), through :func:`calibrate.run_records.read_runs`.
Prints the fitted terms and the error on each run (in-sample, and held out: each run
predicted by a fit on the others), writes the base profile with ``time_scale`` and
``overhead`` filled in. ``servesim/calibrate_command.py`` wires these flags into
``servesim calibrate``.
"""

from __future__ import annotations

import argparse
import shlex
import sys
from typing import Any

from simulator.errors import ConfigError

_STAT_COLUMNS = ("ttft_mean", "ttft_p50", "ttft_p90", "tpot_mean", "tpot_p50", "tpot_p90",
                 "e2e_mean", "e2e_p50", "e2e_p90")


def add_from_run_arguments(parser: argparse.ArgumentParser) -> None:
    """``--from-run``, ``--scenario``, ``--set``, ``--base``, ``--fit``, ``--holdout``,
    ``--bench-seed``, ``--warm``."""
    from simulator.costs.host import DEFAULT_FIT_TERMS, FIT_TERMS

    g = parser.add_argument_group("black-box calibration from measured runs")
    g.add_argument("--from-run", nargs="+", default=None, metavar="DIR",
                   help="measured runs to fit, the same inputs as validate --measured (one "
                        "loader): results folders of servesim serve --records-out, servesim "
                        "measure or servesim run --backend engine (every point in them; "
                        "tokens.parquet not needed), or client result files: GuideLLM "
                        "benchmarks.json, AIPerf profile_export.jsonl, vLLM bench JSON "
                        "(--save-detailed)")
    g.add_argument("--scenario", default=None, metavar="S.toml",
                   help="the deployment the runs were served with (model, hardware, policy, "
                        "KV); one point, or a sweep matching each folder's points in order")
    g.add_argument("--set", dest="from_run_sets", action="append", default=[],
                   metavar="SECTION.KEY=VALUE", help="override a scenario field, repeatable")
    g.add_argument("--base", default=None, metavar="PROFILE.json",
                   help="base cost profile (default: the scenario's [cost])")
    g.add_argument("--fit", default="auto", metavar="TERMS",
                   help=f"comma-separated terms to fit, among {', '.join(FIT_TERMS)}; "
                        "default auto: with two or more runs, the set of terms whose "
                        "leave-one-run-out error is least (smaller sets on ties), else "
                        f"{','.join(DEFAULT_FIT_TERMS)}")
    g.add_argument("--holdout", nargs="+", default=[], metavar="DIR",
                   help="runs not used in the fit, only predicted with it")
    g.add_argument("--bench-seed", type=int, default=0, metavar="N",
                   help="the --seed vLLM bench result files were run with (default 0, the "
                        "tool's): their send times are rebuilt from it")
    g.add_argument("--warm", action="append", default=[], metavar="PATH=N",
                   help="the server had served (and cached) the first N prompts of this "
                        "input's runs before them, e.g. an earlier run of the same prompts "
                        "with prefix caching on: they are replayed first and not scored "
                        "(repeatable)")


def from_run_command(args: argparse.Namespace, argv: list[str] | None = None) -> int:
    """Fit, print the terms and errors, write ``args.out``; 2 on bad input."""
    from calibrate.fit_check import fit_checked
    from calibrate.from_run import errors, replay
    from calibrate.from_run_setup import (
        base_profile,
        calibrated_profile,
        match_points,
        parse_warm,
        targets,
    )
    from calibrate.run_records import read_runs
    from simulator.costs.host import DEFAULT_FIT_TERMS
    from simulator.costs.profile import save_profile
    from simulator.scenario import apply_overrides, expand_sweep, load_scenario

    try:
        if not args.scenario:
            raise ConfigError("--from-run needs --scenario (the deployment the runs were "
                              "served with)")
        terms = tuple(t.strip() for t in str(args.fit).split(",") if t.strip())
        raw = apply_overrides(load_scenario(args.scenario), list(args.from_run_sets))
        points = expand_sweep(raw)
        folders = [read_runs(d, args.bench_seed) for d in args.from_run]
        warm = parse_warm(args.warm, [*args.from_run, *args.holdout])
        fitted, start, dep, point = targets(
            match_points(folders, points, list(args.from_run)), args.base, warm)
        extra = []
        if args.holdout:
            held = [read_runs(d, args.bench_seed) for d in args.holdout]
            extra = targets(match_points(held, points, list(args.holdout)), args.base,
                            warm)[0]
        base = base_profile(point, dep)
        checked = fit_checked(fitted, start, None if terms == ("auto",) else terms,
                              DEFAULT_FIT_TERMS)
        result, scores, spread, nexts = (checked.result, checked.scores, checked.spread,
                                         checked.nexts)
        heldout = checked.heldout
        for t in extra:
            heldout[t.run.name] = errors(t.run, replay(t, result.calibration))
        command = "servesim " + shlex.join(argv if argv is not None else sys.argv[1:])
        machines = [r.fingerprint for runs in folders for r in runs]
        profile = calibrated_profile(base, result, heldout, dep.cost_source, command, machines,
                                     spread)
        save_profile(profile, args.out)
    except (ValueError, OSError) as e:
        print(f"servesim: error: {e}", file=sys.stderr)
        return 2
    if scores:
        print("terms chosen by leave-one-run-out error (mean |error| of TTFT, TPOT, E2E "
              "mean/P50/P90):")
        for cand, score in scores.items():
            mark = "  <- fitted" if cand == result.terms else ""
            print(f"  {score:6.1%}  {','.join(cand)}{mark}")
    _report(fitted, result, heldout, dep.cost_source, spread, nexts)
    print(f"wrote {args.out}")
    return 0


def _report(fitted: list[Any], result: Any, heldout: dict[str, dict[str, float]],
            base_source: str, spread: list[Any], nexts: list[Any]) -> None:
    from calibrate.fit_spread import SHARED_WARN, describe_spread
    from calibrate.from_run import describe_terms
    from calibrate.next_run import advice

    n_req = sum(len(t.run.requests) for t in fitted)
    print(f"base: {base_source}")
    for t in fitted:
        for note in t.run.notes:
            print(f"note: {t.run.name}: {note}")
    print(f"fitted on {len(fitted)} run(s), {n_req} requests: {result.evaluations} replays, "
          f"{result.wall_s:.1f} s")
    for (term, value), how in zip(describe_terms(result.calibration, result.terms), spread,
                                  strict=True):
        print(f"  {term:<11} {value:<12} {describe_spread(how)}")
    if any(s.loose() for s in spread):
        print(f"  (loose: {SHARED_WARN:.0%} or more of the term's effect on these runs' "
              "errors is the other terms' too, or it has none, so the runs pin a combination "
              "of it and its partner rather than the term: read the two together, and to "
              "separate them add a run at another load or with other lengths, e.g. a burst "
              "beside paced runs)")
    if nexts:
        print(f"  {advice(nexts)} (calibrate/next_run.py)")
    if result.beside_step and "seq_s" in result.terms:
        print("  (seq_s runs beside each step: the deployment's scheduler overlaps its steps, "
              "so it costs a step only where it outlasts the rest)")
    print("error, simulated / measured - 1 (mean, P50, P90):")
    print(_table("in-sample", result.errors))
    if heldout:
        print(_table("held out", heldout))
    else:
        print("held out: needs two runs (each is predicted by a fit on the others)")


def _table(title: str, rows: dict[str, dict[str, float]]) -> str:
    width = max(len(title), *(len(n) for n in rows))
    head = f"{title:<{width}}  " + "  ".join(f"{c.replace('_', ' '):>10}" for c in _STAT_COLUMNS)
    lines = [head]
    for name, errs in rows.items():
        lines.append(f"{name:<{width}}  " + "  ".join(f"{errs[c]:>+10.1%}" for c in _STAT_COLUMNS))
    return "\n".join(lines)
