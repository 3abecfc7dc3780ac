"""``servesim validate SCENARIO``: the real engine and the simulator on the same workload.

Every point of the scenario (policies x loads) is served by the real engine on this
machine (``--backend engine``) and simulated with the scenario's cost profile; the two are
compared metric by metric (calibrate/validate.py). ``--measured DIR`` / ``--simulated DIR``
take either side from a results folder written earlier (``servesim run``, ``run --backend
engine``, ``servesim measure``) instead of running it; ``--measured FILE`` takes a
client's result file (GuideLLM ``benchmarks.json``, AIPerf ``profile_export.jsonl``, vLLM
bench JSON; read by simulator/measured/) and simulates the same requests (its send times
and lengths replace the scenario's workload); figures the format cannot give (GuideLLM:
the ITL distribution) are listed as notes and get no comparison row. Writes ``comparison.csv``,
``comparison.json``, ``cdf.png``, both sides' tables (``measured/``, ``simulated/``) and a
``manifest.json`` of kind ``validation`` under ``--out``, which is checked writable (and not
holding results of another kind) before anything runs. ``--measured DIR`` must hold
measurements: a folder whose manifest (or, from before manifests, whose summary.json) says
it was simulated is refused. The engine side keeps each finished point in
``measured/partial/`` until all are done, so an interrupted validate resumes
(servesim/engine_run.py).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from calibrate.validate import (
    WorstRequest,
    compare_summaries,
    format_rows,
    rows_table,
    worst_request,
)
from calibrate.validate_steps import inherited_note
from servesim.validate_folders import (
    Side,
    check_measured,
    is_measured_file,
    read_results,
    replay_measured,
    simulated_note,
)
from servesim.validate_profiles import (
    choose_profiles,
    drift_corrected,
    measured_fingerprint,
    overload_notes,
)
from servesim.validate_steps_drift import measured_steps, priced_rows, steps_drift_corrected
from simulator.atomic import atomic_write
from simulator.deployment import resolve
from simulator.errors import ConfigError
from simulator.fingerprint import this_machine
from simulator.results_folder import default_out
from simulator.results_manifest import (
    VALIDATION,
    begin_writing,
    prepare_results,
    requests_from_clients,
    seal_results,
)
from simulator.runner import run_points, write_results
from simulator.scenario import apply_overrides, expand_sweep, load_scenario
from simulator.scenario_types import Scenario


def add_validate_parser(sub: Any) -> None:
    """The ``validate`` subcommand and its flags."""
    p = sub.add_parser("validate", help="serve a scenario on the real engine and simulate it; "
                                        "compare metric by metric")
    p.add_argument("scenario", help="scenario TOML (e.g. scenarios/validate-cpu.toml)")
    p.add_argument("--set", dest="overrides", action="append", default=[],
                   metavar="SECTION.KEY=VALUE", help="override a field, repeatable")
    p.add_argument("--out", default=None, metavar="DIR",
                   help="results folder (default: results/<scenario name>-validate)")
    p.add_argument("--json", action="store_true",
                   help="print only the list of comparison rows on stdout")
    p.add_argument("--measured", default=None, metavar="DIR|FILE",
                   help="take the measured side from this results folder, or from a "
                        "GuideLLM benchmarks.json, AIPerf profile_export.jsonl or vLLM bench "
                        "JSON, whose requests the simulation replays (no engine run)")
    p.add_argument("--bench-seed", type=int, default=0, metavar="N",
                   help="the --seed a vLLM bench result file (--measured) was run with "
                        "(default 0, the tool's): its send times are rebuilt from it and "
                        "kept where the file's duration agrees")
    p.add_argument("--simulated", default=None, metavar="DIR",
                   help="take the simulated side from this results folder")
    p.add_argument("--threads", type=int, default=1,
                   help="engine intra-op threads on CPU (default 1)")
    p.add_argument("--drift", nargs="?", const="probe", choices=("probe", "steps"),
                   default=None,
                   help="scale each point's profile by the machine's speed while the engine "
                        "served it: 'probe' (the default of a bare --drift; three fixed steps "
                        "timed before and after the point: it helped in one run here and hurt "
                        "in another, docs/calibration.md) or 'steps' (the engine's own served "
                        "steps priced by the profile: what is left is the simulator's error)")
    p.add_argument("--strict", action="store_true",
                   help="exit 1 when any figure is outside its tolerance")
    p.add_argument("--overwrite", action="store_true",
                   help="replace results of another kind in --out (refused without it)")


def load_label(labels: dict[str, Any], point: dict[str, Any]) -> str:
    """The swept values other than the policy; else the offered rate or concurrency."""
    rest = {k: v for k, v in labels.items() if k != "policy"}
    if rest:
        return ", ".join(f"{k}={v}" for k, v in rest.items())
    workload = Scenario.from_dict(point).workload
    if workload.arrival == "closed":
        return f"concurrency={workload.concurrency}"
    return "-" if workload.rate is None else f"rate={workload.rate}"


@dataclass(slots=True)
class Validation:
    """Both sides of every point and their comparison."""

    rows: list[dict[str, Any]]  # calibrate.validate.ROW_KEYS
    worst: list[WorstRequest]
    pairs: list[tuple[str, Any, pd.DataFrame, pd.DataFrame]]  # policy, load, measured, sim
    measured: Side
    simulated: Side
    cost_source: str  # the profile that priced the simulated steps
    notes: list[str]  # how that profile was chosen (calibrated here, forced, unchecked)


def validate_points(points: list[tuple[dict[str, Any], dict[str, Any]]], out: Path, *,
                    threads: int = 1, measured_dir: str | None = None,
                    simulated_dir: str | None = None, drift: str | None = None,
                    bench_seed: int = 0) -> Validation:
    """Serve (or read) and simulate (or read) every point, compare, write the report files
    (``bench_seed``: a measured vLLM bench file's client ``--seed``)."""
    first = [resolve(p) for _, p in points]  # a bad point fails before anything runs
    device = "cpu" if all(d.hardware.name == "cpu" for d in first) else "cuda"
    notes: list[str] = []
    if measured_dir and (is_measured_file(measured_dir) or requests_from_clients(measured_dir)):
        points, measured, file_notes = replay_measured(measured_dir, points, out,
                                                       bench_seed)
        notes += file_notes
        fingerprint, engine_here = measured_fingerprint([s for s, _ in measured]), False
    elif measured_dir:
        note = check_measured(measured_dir)
        notes += [note] if note else []
        measured = read_results(measured_dir, len(points))
        fingerprint = measured_fingerprint([s for s, _ in measured])
        engine_here = fingerprint is not None and fingerprint.get("id") == \
            this_machine("cpu", int(fingerprint.get("threads", 1))).get("id")
    else:
        fingerprint, engine_here = _engine_fingerprint(device, threads), True
    if simulated_dir:
        notes += simulated_note(simulated_dir)
    if not simulated_dir:
        points, chosen = choose_profiles(points, fingerprint, engine_here=engine_here,
                                         calibrate=_calibrator(device))
        notes += chosen
    if not measured_dir:
        measured = _measured(points, out, threads)
    for warning in overload_notes(points, [s for s, _ in measured]):
        print(f"servesim: warning: {warning}", file=sys.stderr)
    steps = None if simulated_dir else measured_steps(
        out / "measured" if measured_dir is None else Path(measured_dir), len(points))
    # (the points as replayed: a client's file can merge the scenario's loads into one)
    names = [(resolve(p).policy_name, load_label(labels, p)) for labels, p in points]
    priced = [None] * len(points) if steps is None else \
        priced_rows(points, steps, [r for _, r in measured], names)  # the profile as chosen
    if drift == "probe" and not simulated_dir:
        points, drift_notes = drift_corrected(points, [s for s, _ in measured])
        notes += drift_notes
    elif drift == "steps" and not simulated_dir:
        if steps is None:
            raise ConfigError("--drift steps needs the engine's step log (steps.parquet "
                              "on the measured side); a client's file has none")
        points, drift_notes = steps_drift_corrected(points, steps, [r for _, r in measured],
                                                    names)
        notes += drift_notes
    deps = [resolve(p) for _, p in points]
    simulated = _simulated(simulated_dir, points, out)
    rows, worst, pairs = [], [], []
    for (policy, load), (m_sum, m_req), (s_sum, s_req), row in zip(
            names, measured, simulated, priced, strict=True):
        rows += compare_summaries(m_sum, s_sum, policy=policy, load=load)
        if row is not None:
            rows.append(row)
            notes.append(inherited_note(row))
        w = worst_request(m_req, s_req, policy=policy, load=load) \
            if m_req["arrival_s"].notna().any() else None  # no send times: no pairs
        if w is not None:
            worst.append(w)
        pairs.append((policy, load, m_req, s_req))
    table = rows_table(rows)
    out.mkdir(parents=True, exist_ok=True)
    begin_writing(out)
    atomic_write(out / "comparison.csv", lambda p: table.to_csv(p, index=False))
    text = json.dumps(rows, indent=2) + "\n"
    atomic_write(out / "comparison.json", lambda p: p.write_text(text))
    _plot(pairs, out / "cdf.png")
    written = [out / f for f in ("comparison.csv", "comparison.json", "cdf.png", "measured",
                                 "simulated") if (out / f).exists()]
    seal_results(out, VALIDATION, written, machine=fingerprint, points=len(points),
                 scenario=str(points[0][1].get("name", "")) if points else None)
    return Validation(rows, worst, pairs, measured, simulated, deps[0].cost_source, notes)


def validate_command(args: argparse.Namespace) -> int:
    """Run (or read) both sides, compare, write the report; the exit status."""
    try:
        raw = apply_overrides(load_scenario(args.scenario), list(args.overrides))
        points = expand_sweep(raw)
        out = Path(args.out) if args.out else default_out(raw.get("name", "scenario"),
                                                           "-validate")
        prepare_results(out, VALIDATION, overwrite=args.overwrite)  # before any work
        v = validate_points(points, out, threads=args.threads, measured_dir=args.measured,
                            simulated_dir=args.simulated, drift=args.drift,
                            bench_seed=args.bench_seed)
    except (ValueError, OSError) as e:
        print(f"servesim: error: {e}", file=sys.stderr)
        return 2
    if args.json:
        for note in v.notes:  # stdout holds only the rows
            print(f"servesim: note: {note}", file=sys.stderr)
        print(json.dumps(v.rows, indent=2))
    else:
        print(f"simulated with: {v.cost_source}")
        for note in v.notes:
            print(f"note: {note}")
        print(format_rows(v.rows, v.worst))
        files = ("comparison.csv", "comparison.json", "cdf.png")
        print("results: " + ", ".join(str(out / f) for f in files if (out / f).exists()))
    return 1 if args.strict and not rows_table(v.rows)["ok"].all() else 0


def _engine_fingerprint(device: str, threads: int) -> dict[str, Any]:
    """The fingerprint of this machine as the engine will serve on ``device``."""
    if device == "cpu":
        return this_machine("cpu", threads)
    try:
        import torch

        from engine.sweep import machine_fingerprint
    except ImportError as e:
        raise OSError(f"validate on a GPU needs the engine extra ({e})") from e
    return machine_fingerprint(torch.device("cuda"), threads)


def _calibrator(device: str) -> Callable[[str, str, int], Path]:
    """``servesim calibrate --here`` on ``device``, with a progress bar."""

    def calibrate(model: str, weight_dtype: str, threads: int) -> Path:
        try:
            from calibrate.here import calibrate_here
        except ImportError as e:
            raise OSError(f"calibrating this machine needs the engine extra ({e}); "
                          "pip install torch==2.13.0 -e '.[engine]'") from e
        from tqdm import tqdm

        with tqdm(desc=f"calibrate --here {model}", unit="run", file=sys.stderr,
                  leave=False) as bar:
            result = calibrate_here(model, weight_dtype, threads, device, progress=bar.update)
        print(f"servesim: calibrated in {result.seconds:.0f} s, held-out MAPE "
              f"{result.report.mape:.1%}: {result.profile_path}", file=sys.stderr)
        return result.profile_path

    return calibrate


def _measured(points: list[tuple[dict[str, Any], dict[str, Any]]], out: Path,
              threads: int) -> Side:
    from servesim.engine_run import run_on_engine

    results, _ = run_on_engine(points, out / "measured", threads=threads)
    return [(r.summary, r.result.requests) for r in results]


def _simulated(folder: str | None, points: list[tuple[dict[str, Any], dict[str, Any]]],
                out: Path) -> Side:
    if folder:
        return read_results(folder, len(points))
    results = run_points(points)
    write_results(results, out / "simulated")
    return [(r.summary, r.result.requests) for r in results]


def _plot(pairs: list[tuple[str, Any, pd.DataFrame, pd.DataFrame]], path: Path) -> Path | None:
    """The CDF overlay, or None (with a note) when matplotlib is not installed."""
    try:
        from calibrate.validate_plot import cdf_overlay

        return cdf_overlay(pairs, path)
    except ImportError:
        print("servesim: note: no CDF plot (pip install -e '.[calibrate]' for matplotlib)",
              file=sys.stderr)
        return None
