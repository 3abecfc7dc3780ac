"""Run shipped scenarios and print a fingerprint of every result: the compiled-core check.

``python tests/accel_runs.py SCENARIO.toml ...`` runs each scenario's points (its sweep
lists expanded, the horizon cut to ``--horizon`` seconds of arrivals when given) and
prints one JSON object: whether the compiled core ran (:func:`simulator.accel.active`)
and, per point, the summary (less ``sim_wall_s``) and a hash of every request record and
step-log row. tests/test_accel.py runs it with ``SERVESIM_ACCEL=1`` and ``=0`` and
compares the two: the compiled modules must give the Python modules' answers bit for bit.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from simulator.accel import active  # noqa: E402 (after the path: run as a script)
from simulator.runner import run_point  # noqa: E402
from simulator.scenario import apply_overrides, expand_sweep, load_scenario  # noqa: E402


def frame_hash(frame: pd.DataFrame | None) -> str:
    """A hash of a frame's values, index and column names (None: no frame)."""
    if frame is None:
        return "none"
    values = pd.util.hash_pandas_object(frame, index=True).to_numpy()
    return f"{len(frame)}:{','.join(map(str, frame.columns))}:{int(values.sum()) & (2**64 - 1):x}"


def fingerprint(path: str, overrides: list[str]) -> list[dict[str, Any]]:
    """Each point of the scenario at ``path``: labels, summary and record/step hashes."""
    out = []
    for labels, point in expand_sweep(apply_overrides(load_scenario(path), overrides)):
        res = run_point(labels, point)
        summary = {k: v for k, v in res.summary.items() if k != "sim_wall_s"}
        out.append({"labels": labels, "summary": summary,
                    "requests": frame_hash(res.result.requests),
                    "steps": frame_hash(res.result.steps)})
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("scenarios", nargs="+")
    ap.add_argument("--set", dest="overrides", action="append", default=[],
                    help="an override for every scenario, as servesim run --set takes")
    args = ap.parse_args()
    runs = {Path(p).name: fingerprint(p, args.overrides) for p in args.scenarios}
    print(json.dumps({"compiled": active(), "runs": runs}, sort_keys=True, default=str))


if __name__ == "__main__":
    main()
