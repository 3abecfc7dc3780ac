"""Which profile prices the simulated side of ``servesim validate``: one measured where the
engine ran, or a refusal that says why.

Comparing an engine with a profile measured on another machine tests the machines, not the
simulator (the tiny model's CPU profile from an AMD EPYC VM was 2-4x slow on an Intel Xeon
with AMX). So, per point, against the fingerprint of the machine that served the measured
side (this one, or the one recorded in ``--measured DIR``'s summary):

- ``[cost] profile = FILE``: its fingerprint must match, field by field; otherwise the run
  is refused with the differing fields and the one command that fixes it, unless
  ``cost.force = true`` (the output then says it was forced);
- no ``[cost]`` profile: the profile ``servesim calibrate --here`` stored for this machine
  in the per-user cache; when there is none and the engine runs here, it runs first (said
  on stderr), on its own grid of step shapes, never on the workload being validated. A
  shipped CPU profile is not used even when its fingerprint matches: a fingerprint names
  a kind of machine, and two VMs of one kind still differ by several percent.

A measured side without a fingerprint (``servesim measure`` against another server) is not
checked: the machine behind an endpoint is not known.

With ``--drift``, :func:`drift_corrected` scales each point's profile by the machine's speed
while the engine served it (a speed probe of three fixed steps before and after the point),
meant to compare the simulator with the engine rather than with the VM's drift since
calibrating. Off by default: on this project's VM it helped in one run and hurt in another.
"""

from __future__ import annotations

import copy
import sys
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import pandas as pd

from simulator.costs.base import CostModel
from simulator.costs.from_config import profile_file
from simulator.costs.machine import profile_fingerprint
from simulator.costs.profile import load_profile
from simulator.deployment import resolve
from simulator.errors import ConfigError
from simulator.fingerprint import HOW_TO_FIX, describe_differences, differences
from simulator.profile_cache import find_cached_profile
from simulator.shapes import StepShapes

Point = tuple[dict[str, Any], dict[str, Any]]
Calibrator = Callable[[str, str, int], Path]  # (model, weight dtype, threads) -> profile


def measured_fingerprint(summaries: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The engine machine's fingerprint from a measured folder's summaries (None if absent)."""
    found = [s.get("fingerprint") for s in summaries if isinstance(s.get("fingerprint"), dict)]
    return found[0] if found else None


def choose_profiles(points: list[Point], fingerprint: dict[str, Any] | None, *,
                    engine_here: bool, calibrate: Calibrator) -> tuple[list[Point], list[str]]:
    """Points whose ``[cost]`` names a profile of the measured machine; notes to print.

    ``engine_here``: the measured side runs (or ran) on this machine, so a missing profile
    may be measured now with ``calibrate``.
    """
    if fingerprint is None:
        return points, ["the measured side has no machine fingerprint (an endpoint's run): "
                        "the profile's machine is not checked"]
    threads = int(fingerprint.get("threads", 1))
    out: list[Point] = []
    notes: list[str] = []
    made: dict[tuple[str, str, str, int], Path] = {}
    for labels, point in points:
        dep = resolve(point)
        section = dict(point.get("cost", {}))
        if "profile" in section:
            _check_explicit(section, dep.model.name, fingerprint, notes)
            out.append((labels, point))
            continue
        if "form" in section:  # inline coefficients: the user's own numbers
            out.append((labels, point))
            continue
        key = (dep.hardware.name, dep.model.name, dep.weight_dtype, dep.tp)
        path = find_cached_profile(fingerprint, *key)
        if path is None:
            if not engine_here:
                raise ConfigError(_no_profile(dep.model.name, fingerprint))
            if key not in made:
                print(f"servesim: no profile of {dep.model.name} ({dep.weight_dtype}, "
                      f"{threads} thread(s)) measured on this machine: calibrating it now "
                      f"(`{HOW_TO_FIX.format(model=dep.model.name, threads=threads)}`, "
                      "it times 69 step shapes: about a minute for tiny on one thread, "
                      "tens of minutes for a 100M+ model; the workload is not used)",
                      file=sys.stderr)
                made[key] = calibrate(dep.model.name, dep.weight_dtype, threads)
                notes.append(f"calibrated this machine first: {made[key]}")
            path = made[key]
        new = copy.deepcopy(point)
        new["cost"] = {**section, "profile": str(path)}
        out.append((labels, new))
    return out, notes


def _differs(path: Path, fingerprint: dict[str, Any]) -> list[tuple[str, Any, Any]]:
    """Differing fields (a missing fingerprint differs in every field)."""
    theirs = profile_fingerprint(load_profile(path))
    if not theirs:
        return [("fingerprint", "none", fingerprint.get("id"))]
    return differences(theirs, fingerprint)


def _check_explicit(section: dict[str, Any], model: str, fingerprint: dict[str, Any],
                    notes: list[str]) -> None:
    path = profile_file(section["profile"])
    diffs = _differs(path, fingerprint)
    if not diffs:
        return
    fix = HOW_TO_FIX.format(model=model, threads=fingerprint.get("threads", 1))
    where = f"cost.profile={str(section['profile'])!r} was measured on another machine " \
            f"than the engine ({describe_differences(diffs)})"
    if section.get("force") is True:
        notes.append(f"FORCED (cost.force = true): {where}")
        return
    raise ConfigError(f"{where}; comparing them tests the machines, not the simulator. Run "
                      f"`{fix}` and drop cost.profile (validate then uses it), or set "
                      "cost.force = true to compare anyway")


def _no_profile(model: str, fingerprint: dict[str, Any]) -> str:
    return (f"no cost profile of {model} measured on the machine that served the measured "
            f"side ({fingerprint.get('device')}, [{fingerprint.get('id')}]); measure it there "
            f"with `{HOW_TO_FIX.format(model=model, threads=fingerprint.get('threads', 1))}` "
            "and pass the profile as cost.profile (with cost.force = true if the fields "
            "differ only in a version)")


def drift_corrected(points: list[Point], summaries: list[dict[str, Any]]
                    ) -> tuple[list[Point], list[str]]:
    """Each point's profile scaled by the machine's speed while the engine served it.

    The engine's summary holds a speed probe (engine/speed_probe.py: three fixed steps timed
    just before and after the point); the factor is their measured time over what the
    point's profile predicts for them (its forward passes only: no host work, no jitter).
    It multiplies any ``cost.time_scale`` already set. Without a probe (an endpoint's run)
    or a profile file (inline coefficients) the point is left as it is.
    """
    out, notes = [], []
    for (labels, point), summary in zip(points, summaries, strict=True):
        rows = (summary.get("engine") or {}).get("speed_probe")
        section = dict(point.get("cost", {}))
        if not rows or "profile" not in section:
            out.append((labels, point))
            continue
        dep = resolve(point)
        factor = _point_factor(rows, section, dep)
        where = f"{dep.policy_name} {', '.join(f'{k}={v}' for k, v in labels.items())}"
        if not 0.5 <= factor <= 2.0:
            notes.append(f"{where}: speed probe {factor:.2f}x the profile: not a drift, the "
                         "profile is for other steps or another machine; not applied")
            out.append((labels, point))
            continue
        scale = float(section.get("time_scale", 1.0)) * factor
        notes.append(f"{where}: machine at {factor:.3f}x the profile's speed while serving "
                     "(speed probe before/after), applied as cost.time_scale")
        new = copy.deepcopy(point)
        new["cost"] = {**section, "time_scale": scale}
        out.append((labels, new))
    return out, notes


def _point_factor(rows: list[dict[str, Any]], section: dict[str, Any], dep: Any) -> float:
    """The probe's measured time over what ``section``'s profile predicts (forward passes)."""
    profile = replace(load_profile(profile_file(section["profile"])), overhead={})
    return probe_factor(rows, profile.build(dep.model, dep.hardware))


OVERLOAD_MARGIN = 0.15  # a probe this much slower than the profile: the machine was busy


def overload_notes(points: list[Point], summaries: list[dict[str, Any]]) -> list[str]:
    """Warnings for points served on a loaded machine: the engine's speed probe more than
    :data:`OVERLOAD_MARGIN` slower than the point's profile (same-machine profiles only:
    a probe 2x off means another machine, which :func:`choose_profiles` reports), or a
    load average above the CPU count while it served. Nothing for an endpoint's run."""
    out = []
    for (labels, point), summary in zip(points, summaries, strict=True):
        engine = summary.get("engine") or {}
        where = ", ".join(f"{k}={v}" for k, v in labels.items()) or "the point"
        load, cpus = engine.get("load_avg"), engine.get("cpus")
        if isinstance(load, int | float) and isinstance(cpus, int) and load > cpus:
            out.append(f"{where}: load average {load:.1f} on {cpus} CPUs while the engine "
                       "served: other work shared the machine, so the measured side is slow")
        rows, section = engine.get("speed_probe"), dict(point.get("cost", {}))
        if not rows or "profile" not in section:
            continue
        try:
            factor = _point_factor(rows, section, resolve(point))
        except (ValueError, OSError):
            continue  # the comparison itself reports a bad profile
        if 1 + OVERLOAD_MARGIN < factor <= 2.0:
            out.append(f"{where}: the machine ran {factor:.2f}x slower than its calibration "
                       f"while serving (speed probe; more than {OVERLOAD_MARGIN:.0%} off): it "
                       "was loaded or throttled; rerun on a quiet machine, or pass --drift")
    return out


def probe_factor(rows: list[dict[str, Any]], kernel: CostModel) -> float:
    """Measured seconds of the probe steps / ``kernel``'s prediction for them."""
    shapes = StepShapes.from_table(pd.DataFrame(rows))
    return float(sum(r["time_s"] for r in rows) / kernel.step_times(shapes).sum())
