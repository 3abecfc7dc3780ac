"""What produced a results folder: ``manifest.json``, written last, beside the results.

``servesim run`` (simulated), ``run --backend engine`` (engine), ``servesim measure``
(endpoint-measured) and ``servesim validate`` (validation) each write one::

    {"manifest_version": 1, "kind": "engine", "backend": "engine", "endpoint": null,
     "machine": {...fingerprint...}, "machine_id": "3f2a...", "servesim_version": "0.1.0",
     "created_utc": "2026-12-01T15:30:00Z", "scenario": "chat",
     "scenario_file": "scenarios/chat.toml", "points": 2,
     "files": ["summary.json", "requests.parquet", "steps.parquet", "tokens.parquet"]}

``machine`` is the fingerprint of the machine whose speed the numbers measure (the engine's;
the server's when ``servesim serve`` said it; for simulated results the machine that ran the
simulator) or null when unknown (another server behind an endpoint).

A command refuses to write into a folder holding results of another kind unless asked
(``--overwrite``), so a measurement is never replaced by a simulation without a word; and
when it writes, result files it did not write (an engine run's ``tokens.parquet``) are
removed, never left beside the new ones. The manifest is removed before the new files are
written and written after them: a folder torn by a crash has no manifest, and its kind is
then read from ``summary.json`` as for folders from before manifests (:func:`folder_kind`).
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from simulator.atomic import atomic_write
from simulator.errors import ConfigError
from simulator.fingerprint import fingerprint_id, this_machine
from simulator.results_folder import check_writable

MANIFEST = "manifest.json"
MANIFEST_VERSION = 1
SIMULATED, ENGINE, ENDPOINT, VALIDATION = "simulated", "engine", "endpoint-measured", "validation"
KINDS = (SIMULATED, ENGINE, ENDPOINT, VALIDATION)
BACKENDS = {SIMULATED: "sim", ENGINE: "engine", ENDPOINT: "endpoint", VALIDATION: None}
# Every file a results command writes at a folder's top; those a new write does not
# produce are removed (the checkpoint and cache folders are kept: they are keyed).
RESULT_FILES = ("summary.json", "requests.parquet", "steps.parquet", "tokens.parquet",
                "comparison.csv", "comparison.json", "cdf.png")
WHAT = {SIMULATED: "simulated results (`servesim run`)",
        ENGINE: "engine measurements (`servesim run --backend engine`)",
        ENDPOINT: "an endpoint's measurements (`servesim measure`)",
        VALIDATION: "a validation report (`servesim validate`)"}


def read_manifest(folder: str | Path) -> dict[str, Any] | None:
    """The folder's manifest, or None when it has none (or an unreadable one)."""
    try:
        data = json.loads((Path(folder) / MANIFEST).read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) and data.get("kind") in KINDS else None


def folder_kind(folder: str | Path) -> tuple[str | None, str]:
    """(kind or None, how it is known): from the manifest, else inferred from the files
    (``summary.json`` of a folder written before manifests: ``backend = "engine"`` is an
    engine run, an ``endpoint`` a measurement, ``sim_events`` a simulation)."""
    path = Path(folder)
    manifest = read_manifest(path)
    if manifest is not None:
        return str(manifest["kind"]), f"its {MANIFEST} says so"
    if (path / "comparison.json").is_file():
        return VALIDATION, "no manifest; inferred from its comparison.json"
    try:
        summaries = json.loads((path / "summary.json").read_text())
    except (OSError, ValueError):
        return None, "no manifest and no readable summary.json"
    rows = [s for s in summaries if isinstance(s, dict)] if isinstance(summaries, list) else []
    how = "no manifest (written before servesim recorded one); inferred from summary.json"
    if any(s.get("backend") == "engine" for s in rows):
        return ENGINE, how + " (backend = 'engine')"
    if any("endpoint" in s for s in rows):
        return ENDPOINT, how + " (it names an endpoint)"
    if rows and all("sim_events" in s for s in rows):
        return SIMULATED, how + " (sim_events: a simulator's run)"
    return None, "no manifest; summary.json does not say what produced it"


def prepare_results(folder: str | Path, kind: str, *, overwrite: bool = False,
                    flag: str = "--out") -> Path:
    """Before any work: ``folder`` is writable and holds no results of another kind (unless
    ``overwrite``). Raises ConfigError naming the folder and what it holds."""
    if kind not in KINDS:
        raise ValueError(f"kind={kind!r} must be one of {KINDS}")
    path = Path(folder)
    held, how = folder_kind(path) if path.is_dir() else (None, "")
    if held is not None and held != kind and not overwrite:
        raise ConfigError(
            f"{flag} {str(path)!r} holds {WHAT[held]} ({how}); writing {WHAT[kind]} there "
            "would replace them. Choose another folder, or pass --overwrite to replace them")
    return check_writable(path, flag)


def begin_writing(folder: str | Path) -> None:
    """Drop the old manifest: until the new one is written the folder says nothing."""
    (Path(folder) / MANIFEST).unlink(missing_ok=True)


def seal_results(folder: str | Path, kind: str, written: list[Path], *,
                 machine: dict[str, Any] | None | str = "this", endpoint: str | None = None,
                 scenario: str | None = None, scenario_file: str | None = None,
                 points: int | None = None, requests_from: str = "scenario") -> Path:
    """Remove stale result files (known names not in ``written``), then write the manifest.

    ``machine``: the fingerprint whose speed the results measure; ``"this"`` (default) for
    this machine's CPU fingerprint, None when unknown. ``requests_from``: ``"scenario"``
    (the scenario's workload drew the requests) or ``"clients"`` (``servesim serve``'s
    records: whatever clients sent; ``validate --measured`` replays them).
    """
    path = Path(folder)
    names = sorted({str(Path(p).relative_to(path)) if Path(p).is_relative_to(path) else str(p)
                    for p in written})
    for stale in RESULT_FILES:
        if stale not in names:
            (path / stale).unlink(missing_ok=True)
    fingerprint = this_machine("cpu", 1) if machine == "this" else machine
    data = {
        "manifest_version": MANIFEST_VERSION, "kind": kind, "backend": BACKENDS[kind],
        "endpoint": endpoint,
        "machine": fingerprint,
        "machine_id": fingerprint_id(fingerprint) if isinstance(fingerprint, dict) else None,
        "servesim_version": _version(),
        "created_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "scenario": scenario, "scenario_file": scenario_file, "points": points,
        "requests_from": requests_from,
        "files": names,
    }
    text = json.dumps(data, indent=2) + "\n"
    return atomic_write(path / MANIFEST, lambda p: p.write_text(text))


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("servesim")
    except PackageNotFoundError:
        return "unknown"


def requests_from_clients(folder: str | Path) -> bool:
    """Whether a results folder's requests came from clients (``servesim serve
    --records-out``), not from a scenario's workload: its manifest says so."""
    manifest = read_manifest(folder) if Path(folder).is_dir() else None
    return manifest is not None and manifest.get("requests_from") == "clients"
