"""The results folders ``servesim validate`` reads: ``--measured DIR`` must hold
measurements (simulator/results_manifest.py says what a folder holds), and each side is
read as (summary, request records) per point.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pandas as pd

from simulator.errors import ConfigError
from simulator.results_manifest import SIMULATED, VALIDATION, WHAT, folder_kind, read_manifest

Side = list[tuple[dict[str, Any], pd.DataFrame]]  # per point: (summary, request records)


def check_measured(folder: str | Path) -> str | None:
    """Refuse a ``--measured`` folder that holds no measurements; a note when its kind is
    only inferred (a folder from before manifests) or unknown."""
    path = Path(folder)
    kind, how = folder_kind(path)
    if kind in (SIMULATED, VALIDATION):
        hint = (f"; its measured side is {path / 'measured'}" if kind == VALIDATION else
                ": the simulator would be compared with itself")
        raise ConfigError(f"--measured {str(path)!r} holds {WHAT[kind]} ({how}), not a "
                          f"measurement{hint}. Pass a folder written by `servesim run "
                          "--backend engine` or `servesim measure`")
    if kind is None:
        return f"--measured {path}: {how}; taken as a measurement"
    return None if read_manifest(path) else f"--measured {path}: {kind}: {how}"


def read_results(folder: str | Path, expected: int) -> Side:
    """(summary, request records) per point from a results folder, in point order."""
    path = Path(folder)
    try:
        summaries = json.loads((path / "summary.json").read_text())
        requests = pd.read_parquet(path / "requests.parquet")
    except (OSError, ValueError) as e:
        raise ConfigError(f"{path}: not a results folder (summary.json, requests.parquet): "
                          f"{e}") from e
    if len(summaries) != expected:
        raise ConfigError(f"{path}: {len(summaries)} points, but the scenario has {expected}")
    return [(s, requests[requests["point"] == i].drop(columns="point"))
            for i, s in enumerate(summaries)]


def simulated_note(folder: str | Path) -> list[str]:
    """A note when ``--simulated DIR`` holds measurements (allowed: two engine runs may be
    compared, but the output should say that is what it is)."""
    held, how = folder_kind(folder)
    if held in (SIMULATED, None):
        return []
    return [f"--simulated {folder} holds {WHAT[held]} ({how}): this compares two "
            "measurements, not the simulator"]
