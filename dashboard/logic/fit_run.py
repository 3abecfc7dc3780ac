"""Fit host costs to the measured runs on the Validation page: ``servesim calibrate
--from-run`` (calibrate/from_run.py) on the uploaded file and any more runs of the same
deployment, for the deployment the page shows.

The files are read as the command reads them (simulator/measured/, through
:func:`calibrate.run_records.read_runs`), except request records (CSV/Parquet, contract 4),
which the command takes only inside a results folder: their TTFT, TPOT and E2E come from
the records' own times. The answer is what the command prints: the terms (chosen by
leave-one-run-out error where asked, with two runs or more), each term's value and how
firmly the runs pin it (calibrate/fit_spread.py) with its range over the leave-one-run-out
fits, the run to measure next where a term is loose (calibrate/next_run.py), each run's
errors before, after and held out (predicted by a fit on the others), and the calibrated
profile (JSON) it writes.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from calibrate.fit_check import fit_checked
from calibrate.from_run import CANDIDATE_TERMS, errors, replay
from calibrate.from_run_setup import base_profile, calibrated_profile, match_points, targets
from calibrate.next_run import advice
from calibrate.run_records import MeasuredRun, read_runs
from dashboard.logic.validation import _read_table
from simulator.errors import ConfigError
from simulator.scenario import expand_sweep

SHOWN = ("ttft_mean", "ttft_p50", "ttft_p90", "tpot_mean", "tpot_p50", "tpot_p90",
         "e2e_mean")
RECORDS = (".csv", ".parquet", ".pq")
# the page's default: a time scale, a cost per output token and a latency per request, the
# smallest set that reads both TTFT and TPOT (calibrate/from_run.py CANDIDATE_TERMS); one
# run seldom tells more apart
PAGE_TERMS = CANDIDATE_TERMS[1]


@dataclass(frozen=True, slots=True)
class RunFit:
    """What a fit to one measured run found (module docstring)."""

    terms: pd.DataFrame  # term, value, unit, shared, partner, pinned (yes, loose, not
    # seen), its least and largest value over the leave-one-run-out fits (NaN: one run)
    errors: pd.DataFrame  # run, statistic, before, after, held out: simulated / measured - 1
    profile_json: str  # the calibrated profile, as `servesim calibrate --out` writes it
    replays: int  # replays the fit took
    wall_s: float  # seconds it took
    measure_next: str = ""  # where a term is loose: the run that would best separate it


def records_run(path: Path) -> MeasuredRun:
    """Request records (contract 4; the page's loader has checked their columns) as a
    fitting target: each finished request's TTFT, TPOT and E2E from its own times."""
    df = _read_table(path)  # the page's reader of records (its errors name the file)
    done = df[df["status"] == "finished"] if "status" in df else df.dropna(subset=["finish_s"])
    done = done.sort_values(["arrival_s", "request_id"]).reset_index(drop=True)
    sent = done["arrival_s"].to_numpy(np.float64)
    ttft = done["first_token_s"].to_numpy(np.float64) - sent
    e2e = done["finish_s"].to_numpy(np.float64) - sent
    out = done["output_tokens"].to_numpy(np.float64)
    tpot = np.divide(e2e - ttft, out - 1, out=np.full(len(out), np.nan), where=out > 1)
    table = done[["request_id", "arrival_s", "prompt_tokens", "output_tokens"]].astype(
        {"request_id": "int64", "prompt_tokens": "int64", "output_tokens": "int64"})
    return MeasuredRun(path.name, table, ttft, tpot, e2e, per_request=True)


def measured_run(path: Path) -> MeasuredRun:
    """The uploaded file as one fitting target (records, or a client's result file)."""
    if path.suffix.lower() in RECORDS:
        return records_run(path)
    runs = read_runs(path)
    if len(runs) != 1:
        raise ConfigError(f"{path.name}: holds {len(runs)} runs; fit a file of one")
    return replace(runs[0], name=path.name)  # named as uploaded, not by where it was saved


def fit_run(scenario: dict[str, Any], paths: Sequence[Path],
            terms: Sequence[str] | None) -> RunFit:
    """Fit ``terms`` (None: chosen by leave-one-run-out error, which needs two runs; one
    run takes :data:`PAGE_TERMS`) to the runs in ``paths`` on ``scenario``'s deployment
    (its workload is the runs' own requests). With two runs or more each is also predicted
    by a fit on the others, and each term's range over those fits is reported."""
    if len({str(p) for p in paths}) < len(paths):  # an upload is saved by its content
        raise ConfigError(f"the same file twice among {', '.join(p.name for p in paths)}")
    runs: list[MeasuredRun] = []
    for p in paths:  # two files of one name (two runs' bench.json) are told apart
        run = measured_run(p)
        taken = len([r for r in runs if r.name.split(" (")[0] == run.name])
        runs.append(replace(run, name=f"{run.name} ({taken + 1})") if taken else run)
    names = [r.name for r in runs]
    points = expand_sweep(scenario)
    fitted, start, dep, point = targets(match_points([[r] for r in runs], points[:1], names),
                                        None, {})
    checked = fit_checked(fitted, start, terms, PAGE_TERMS)
    result, loo, spread = checked.result, checked.loo, checked.spread
    rows = []
    for s in spread:
        value = result.calibration.value(s.term)
        scale = 1.0 if s.term == "time_scale" else 1e3
        rows.append({"term": s.term, "value": value * scale,
                     "unit": "x" if scale == 1.0 else "ms",
                     "shared": s.shared if s.seen else np.nan, "partner": s.partner,
                     "pinned": "not seen" if not s.seen else "loose" if s.loose() else "yes",
                     "leave-one-run-out low": s.low * scale,
                     "leave-one-run-out high": s.high * scale})
    errs = []
    for t in fitted:
        before = errors(t.run, replay(t, start))
        held = loo.get(t.run.name, ({k: np.nan for k in SHOWN}, None))[0]
        errs += [{"run": t.run.name, "statistic": k, "before": before[k],
                  "after": result.errors[t.run.name][k], "held out": held[k]} for k in SHOWN]
    profile = calibrated_profile(base_profile(point, dep), result, checked.heldout,
                                 dep.cost_source,
                                 f"servesim dashboard: Validation, fit host costs to "
                                 f"{', '.join(names)}", [r.fingerprint for r in runs], spread)
    said = advice(checked.nexts)
    return RunFit(pd.DataFrame(rows), pd.DataFrame(errs),
                  json.dumps(profile.to_dict(), indent=2) + "\n", result.evaluations,
                  result.wall_s, said[:1].upper() + said[1:])
