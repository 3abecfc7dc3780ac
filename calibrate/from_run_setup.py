"""What a black-box fit replays against: scenario points, the base profile, the output profile.

The deployment (model, hardware, policy and its knobs, KV cache, replicas) comes from a
scenario. One deployment serves every run; points that differ only in the workload or SLO
are one deployment (the requests come from the runs). A sweep of deployments is matched to
a run folder point by point, in order (the folder was written from that scenario, as
``servesim validate --measured`` assumes). The base cost profile is the scenario's own
(``cost.profile``, inline coefficients, the per-user or shipped profile, else a roofline
prior), or ``--base`` instead; its ``time_scale`` and ``overhead``, if any, are the start
(the fit replaces the terms it fits); the scenario's own ``time_scale``, ``overhead`` and
``jitter_cv`` are dropped (replays are deterministic).
"""

from __future__ import annotations

import copy
import datetime as dt
import json
from collections.abc import Sequence
from dataclasses import asdict, replace
from typing import Any

from calibrate.fit_spread import TermSpread
from calibrate.from_run import Calibration, FitResult, Target
from calibrate.run_records import MeasuredRun
from simulator.costs.from_config import profile_path_for
from simulator.costs.host import split_host
from simulator.costs.profile import FITTED, CostProfile, load_profile
from simulator.costs.roofline import KNOBS
from simulator.deployment import Deployment, resolve
from simulator.errors import ConfigError
from simulator.policies.continuous import overlaps

DROPPED = ("time_scale", "overhead", "jitter_cv")  # scenario cost keys the fit replaces
NOT_DEPLOYMENT = ("workload", "slo", "name", "description", "seed")  # a replay ignores them


def base_point(point: dict[str, Any], base: str | None) -> dict[str, Any]:
    """The point with the cost section a replay uses: the base profile, no jitter."""
    out = copy.deepcopy(point)
    section = {k: v for k, v in out.get("cost", {}).items() if k not in DROPPED}
    if base is not None:
        section = {"profile": base, **({"force": section["force"]} if "force" in section else {})}
    out["cost"] = {**section, "jitter_cv": 0}
    return out


def match_points(folders: list[list[MeasuredRun]],
                 points: list[tuple[dict[str, Any], dict[str, Any]]],
                 names: list[str]) -> list[tuple[MeasuredRun, dict[str, Any]]]:
    """Each run with its scenario point (one deployment for all, or a sweep point by point).

    Points that differ only in what a replay does not use (the workload, the SLO) are one
    deployment: the requests come from the runs.
    """
    out = []
    deployments = {json.dumps({k: v for k, v in p.items() if k not in NOT_DEPLOYMENT},
                              sort_keys=True, default=str) for _, p in points}
    for name, runs in zip(names, folders, strict=True):
        if len(deployments) == 1:
            out += [(r, points[0][1]) for r in runs]
        elif len(points) == len(runs):
            out += [(r, p) for r, (_, p) in zip(runs, points, strict=True)]
        else:
            raise ConfigError(f"{name}: {len(runs)} run point(s), but the scenario is a sweep of "
                              f"{len(points)}; choose one deployment with --set (e.g. "
                              "--set \"policy.name='continuous'\")")
    return out


def targets(pairs: list[tuple[MeasuredRun, dict[str, Any]]], base: str | None,
            warm: dict[str, int] | None = None
            ) -> tuple[list[Target], Calibration, Deployment, dict[str, Any]]:
    """Targets to fit, the start calibration, the first point's deployment and point
    (``warm``: input path -> how many of its runs' first prompts the server had cached
    before them, :func:`calibrate.from_run.with_warm_prompts`)."""
    out: list[Target] = []
    start, first, first_point = Calibration(), None, {}
    for run, point in pairs:
        p = base_point(point, base)
        dep = resolve(p)
        kernel, host = split_host(dep.cost)
        if first is None:
            first, first_point, start = dep, p, Calibration(1.0, host)
        elif dep.cost_source != first.cost_source:
            raise ConfigError(f"{run.name}: priced with {dep.cost_source}, but the first run "
                              f"with {first.cost_source}; one fit needs one base profile")
        spec = replace(dep.cluster(), cost=kernel, request_s=0.0)
        cached = warm_prompts(run.name, warm or {})
        if cached and not spec.prefix_caching:
            raise ConfigError(f"--warm {run.name}: the scenario's prefix caching is off "
                              "(kv.prefix_caching), so no prompt stays cached")
        out.append(Target(run, spec, overlaps(dep.policy, dep.speculative is not None),
                          cached))
    if first is None:
        raise ConfigError("nothing to fit: no measured runs")
    return out, start, first, first_point


def warm_prompts(run_name: str, warm: dict[str, int]) -> int:
    """The warm prompts given for the input a run came from (its name is the input's path,
    or the path and `` point K`` for a folder's K-th point); 0 when none."""
    for path, count in warm.items():
        if run_name == path or run_name.startswith(f"{path} point "):
            return count
    return 0


def parse_warm(values: Sequence[str], inputs: Sequence[str]) -> dict[str, int]:
    """``--warm PATH=N`` (repeatable) as {PATH: N}; PATH must be one of ``inputs``."""
    out = {}
    for value in values:
        path, sep, count = value.rpartition("=")
        if not sep or not count.isdigit() or int(count) < 1:
            raise ConfigError(f"--warm {value!r}: give PATH=N, N the prompts cached before "
                              "that run (e.g. --warm runs/16rps.json=200)")
        if path not in inputs:
            raise ConfigError(f"--warm {value!r}: {path!r} is not one of the --from-run or "
                              f"--holdout inputs ({', '.join(inputs)})")
        out[path] = int(count)
    return out


def base_profile(point: dict[str, Any], dep: Deployment) -> CostProfile:
    """The base as a cost profile: its file, else the inline form, else a roofline prior."""
    section = point.get("cost", {})
    path = profile_path_for(section, dep.model, dep.hardware, dep.tp, dep.weight_dtype,
                            dep.kv_dtype)
    if path is not None:
        return load_profile(path)
    form = section.get("form", "roofline")
    if form in FITTED:
        cls, names = FITTED[form]
        coefficients = asdict(cls(**{k: float(v) for k, v in section.items() if k in names}))
        source = f"inline {form} coefficients (the scenario's [cost] section)"
    else:
        coefficients = {k: float(v) for k, v in section.items() if k in KNOBS}
        source = "roofline prior (not measured)"
    return CostProfile(hardware=dep.hardware.name, model=dep.model.name,
                       weight_dtype=dep.weight_dtype, kv_dtype=dep.kv_dtype, tp=dep.tp,
                       form=form, coefficients=coefficients, provenance={"source": source})


def calibrated_profile(base: CostProfile, result: FitResult,
                       heldout: dict[str, dict[str, float]], base_source: str,
                       command: str, fingerprints: Sequence[dict[str, Any] | None] = (),
                       spread: Sequence[TermSpread] = ()) -> CostProfile:
    """``base`` with the fitted time_scale and overhead, and the fit described (``spread``:
    how firmly the runs pinned each term, calibrate/fit_spread.py); its fingerprint is the
    runs' machine when they all recorded the same one, else none."""
    cal = result.calibration
    runs = list(result.errors)
    record = {
        "method": "black-box: Gauss-Newton, soft_l1 loss, on TTFT and TPOT relative errors "
                  "(per request when send times are known, else of their distributions) of "
                  "the simulator's replay of the same requests (calibrate/from_run.py)",
        "runs": runs, "base": base_source,
        "fitted_terms": list(result.terms), "fitted_time_scale": cal.time_scale,
        "seq_s": ("beside each step: the runs' scheduler overlaps its steps "
                  "(simulator/costs/host.py)" if result.beside_step else "in series"),
        "insample_error": result.errors,
        "heldout": "leave-one-run-out" if heldout else "not computed (needs two runs)",
        "heldout_error": heldout, "replays": result.evaluations,
        "fit_wall_s": round(result.wall_s, 2),
        "term_spread": {s.term: s.to_dict() for s in spread},
    }
    provenance = {**base.provenance, "calibrated_from_run": {
        "runs": runs, "date": dt.date.today().isoformat(), "command": command}}
    provenance.pop("fingerprint", None)  # the profile now describes the runs' machine:
    machines = {json.dumps(fp, sort_keys=True) for fp in fingerprints}
    if len(machines) == 1 and None not in fingerprints:
        provenance["fingerprint"] = fingerprints[0]
    else:
        provenance["fingerprint_note"] = (
            "the measured runs did not all say which machine served them (an endpoint other "
            "than servesim serve): no fingerprint")
    return replace(base, time_scale=base.time_scale * cal.time_scale,
                   overhead=cal.overhead.to_dict(), fit={**base.fit, "from_run": record},
                   provenance=provenance)
