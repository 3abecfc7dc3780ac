"""The results ``servesim validate`` reads: ``--measured DIR`` must hold measurements
(simulator/results_manifest.py says what a folder holds), and each side is read as
(summary, request records) per point. ``--measured FILE`` is a client's result file
(GuideLLM, AIPerf, vLLM bench: simulator/measured/), endpoint-measured by construction:
its requests (send times and lengths) become the simulated side's workload
(:func:`replay_measured`), and the figures its format cannot give are null in its summary,
so they get no comparison row.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pandas as pd

from simulator.errors import ConfigError
from simulator.measured import MeasuredRun, load_measured_runs
from simulator.measured.servesim_folder import check_measured_folder
from simulator.results_manifest import SIMULATED, WHAT, folder_kind, read_manifest
from simulator.scenario import TRACE_REPLACES, with_trace

Side = list[tuple[dict[str, Any], pd.DataFrame]]  # per point: (summary, request records)


Point = tuple[dict[str, Any], dict[str, Any]]  # (sweep labels, scenario dict)


def is_measured_file(path: str | Path | None) -> bool:
    """Whether ``--measured`` names a client's result file rather than a results folder."""
    return path is not None and Path(path).is_file()


def replay_measured(path: str | Path, points: list[Point], out: Path, bench_seed: int = 0
                    ) -> tuple[list[Point], Side, list[str]]:
    """The points replaying the measured file's requests, its side, and notes.

    One run is compared with every point (e.g. each policy of a sweep); points that differ
    only in traffic the file replaces (``workload.rate``, ...) become one. A file of as many
    runs as points pairs them in order. Each point's workload becomes the run's finished
    requests (send times and lengths), written to ``out/measured/replay-<i>.parquet``;
    a closed-loop vLLM bench run keeps a closed loop of its clients instead of times
    (``bench_seed``: a vLLM bench file's client ``--seed``, from which its send times are
    rebuilt). The measured side's records and summaries go to ``out/measured`` as a
    results folder.
    """
    runs = load_measured_runs(path, bench_seed)
    if len(runs) not in (1, len(points)):
        raise ConfigError(f"--measured {path}: {len(runs)} runs, but the scenario has "
                          f"{len(points)} points; pick one point with --set")
    one = len(runs) == 1
    folder = out / "measured"
    folder.mkdir(parents=True, exist_ok=True)
    replayed: list[Point] = []
    side: Side = []
    seen: set[str] = set()
    for i, (labels, point) in enumerate(points):
        run = runs[0 if one else i]
        table = folder / f"replay-{0 if one else i}.parquet"
        run.replay_table().to_parquet(table, index=False)
        new = with_trace(point, table)
        if run.closed_clients is not None:
            new["workload"] |= {"arrival": "closed", "concurrency": run.closed_clients}
        if run.max_concurrency is not None:
            new["workload"] |= {"max_concurrency": run.max_concurrency}
        key = json.dumps(new, sort_keys=True, default=str)
        if one and key in seen:
            continue  # a swept traffic field (rate, ...) the file's requests replace
        seen.add(key)
        kept = {k: v for k, v in labels.items()
                if k.removeprefix("workload.") not in TRACE_REPLACES}
        replayed.append((kept, new))
        side.append((run.summary(), run.records()))  # records() conforms to contract 4
    records = pd.concat([r.assign(point=i) for i, (_, r) in enumerate(side)], ignore_index=True)
    records.to_parquet(folder / "requests.parquet", index=False)
    text = json.dumps([s for s, _ in side], indent=2, allow_nan=False) + "\n"
    (folder / "summary.json").write_text(text)
    return replayed, side, _notes(runs[0], len(replayed))


def _notes(run: MeasuredRun, points: int) -> list[str]:
    notes = [f"--measured {run.source}: {run.format}, {len(run.finished)} finished of "
             f"{len(run.requests)} requests; the simulation replays the finished ones"]
    if points > 1:
        notes.append(f"the one measured run is compared with each of the {points} points")
    notes += [f"{run.format} cannot give: {m}" for m in run.missing]
    return notes + run.notes


def check_measured(folder: str | Path) -> str | None:
    """Refuse a ``--measured`` folder that holds no measurements; a note when its kind is
    only inferred (a folder from before manifests) or unknown."""
    path = Path(folder)
    if path.is_file():
        return None  # a client's result file: endpoint-measured by construction
    check_measured_folder(path, f"--measured {str(path)!r}")
    kind, how = folder_kind(path)
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
