"""Scenario files: one TOML file describes a deployment, its traffic and its targets.

Sections: ``[model] [hardware] [kv] [policy] [workload] [slo] [cluster] [cost] [run]``
plus top-level ``name``, ``description`` and ``seed``. A list in a field makes a sweep
(the cartesian product of every listed field); ``--set section.key=value`` overrides a
field before expansion; ``--trace FILE`` replaces the scenario's traffic with a trace's.
This module reads and expands the TOML; each point is then checked and typed once by
``simulator.scenario_types.Scenario.from_dict``. Every error names the file or field and
the bad value.
"""

from __future__ import annotations

import copy
import itertools
import tomllib
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from simulator.errors import ConfigError, did_you_mean
from simulator.policies import POLICIES
from simulator.scenario_types import section_fields

# Field names per section, derived from the typed schema (simulator/scenario_types.py);
# an empty tuple: the section's own class checks its keys (workload, slo, cost).
SECTIONS: dict[str, tuple[str, ...]] = section_fields()
TOP_LEVEL = ("name", "description", "seed")
# Fields whose value is a table or a list by nature, never a sweep.
NOT_SWEPT = {("workload", "prompt"), ("workload", "output"), ("speculative", "acceptance_counts")}
POLICY_NAMES = tuple(POLICIES)  # for the faces' pickers; derived from the one registry
# What --trace FILE replaces: the scenario's own traffic (rate and lengths); --set after it
# can give a rate (the trace's arrivals are rescaled to it) or num_requests (its first rows).
TRACE_REPLACES = ("rate", "num_requests", "prompt", "output", "cv", "concurrency",
                  "think_time_s", "client_start", "client_ramp_s", "trace_format",
                  # a trace's requests carry their own prefixes (workload/prefix_knobs.py)
                  "system_prompt_tokens", "system_prompt_share", "system_prompts",
                  "session_turns",
                  "rate_schedule")  # a trace's arrivals replace a schedule (docs/fleet.md)
# of those, the arrival process: kept when a trace gives lengths only (with_trace)
TRACE_ARRIVALS = ("rate", "cv", "concurrency", "think_time_s", "client_start", "client_ramp_s",
                  "rate_schedule")


def load_scenario(path: str | Path) -> dict[str, Any]:
    """Read a scenario file; syntax errors name the file and line. Adds ``_base_dir``."""
    p = Path(path)
    try:
        text = p.read_text()
    except OSError as e:
        raise ConfigError(f"{p}: cannot read scenario ({e.strerror})") from e
    try:
        raw = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise ConfigError(f"{p}: not valid TOML: {e}") from e
    check_structure(raw, str(p))
    raw["_base_dir"] = str(p.resolve().parent)
    raw.setdefault("name", p.stem)
    return raw


def check_structure(raw: dict[str, Any], source: str) -> None:
    """Reject unknown sections and keys, naming them and the known ones."""
    for key, value in raw.items():
        if key.startswith("_") or key in TOP_LEVEL:
            continue
        sections = section_fields()  # read now: a policy added to POLICIES shows at once
        if key not in sections:
            raise ConfigError(f"{source}: unknown section [{key}]"
                              f"{did_you_mean(key, sections)}; known: {sorted(sections)}")
        if not isinstance(value, dict):
            raise ConfigError(f"{source}: [{key}] must be a table, got {value!r}")
        known = sections[key]
        for field, sub in value.items():
            if known and field not in known:
                raise ConfigError(f"{source}: unknown field {key}.{field}"
                                  f"{did_you_mean(field, known)}; known: {list(known)}")
            if key == "policy" and field in POLICIES:
                if not isinstance(sub, dict):
                    raise ConfigError(f"{source}: [policy.{field}] must be a table of knobs")
                for knob in sub:
                    if knob not in known or knob in POLICIES or knob == "name":
                        raise ConfigError(f"{source}: unknown field policy.{field}.{knob}")


def apply_overrides(raw: dict[str, Any], overrides: Iterable[str]) -> dict[str, Any]:
    """Apply ``section.key=value`` overrides (values in TOML syntax; bare words are strings);
    a top-level field (``seed``, ``name``, ``description``) is set as ``key=value``."""
    out = copy.deepcopy(raw)
    for item in overrides:
        path, sep, text = item.partition("=")
        parts = path.strip().split(".")
        top = len(parts) == 1 and parts[0] in TOP_LEVEL
        if not sep or (len(parts) < 2 and not top) or not all(parts):
            raise ConfigError(f"--set {item!r}: expected section.key=value "
                              f"(or one of {', '.join(TOP_LEVEL)}=value)")
        try:
            value = tomllib.loads(f"v = {text.strip()}")["v"]
        except tomllib.TOMLDecodeError:
            value = text.strip()
        node = out
        for part in parts[:-1]:
            node = node.setdefault(part, {})
            if not isinstance(node, dict):
                raise ConfigError(f"--set {item!r}: {part} is not a table")
        node[parts[-1]] = value
    check_structure(out, "--set")
    return out


def with_trace(raw: dict[str, Any], trace: str | Path, own_arrivals: bool = False
               ) -> dict[str, Any]:
    """The scenario replaying ``trace`` (a path from the current directory): its arrivals
    and lengths replace the scenario's traffic (the fields in TRACE_REPLACES).

    With ``own_arrivals`` (``--trace`` on the command line) a trace without arrival times
    (a lengths-only CSV, a vLLM bench result) gives only the lengths, and the scenario
    keeps its arrival process (the fields in TRACE_ARRIVALS): what a user replaying
    ShareGPT's lengths at the scenario's rates means, where ``arrival = 'trace'`` could
    only fail."""
    path = Path(trace).expanduser().resolve()
    lengths_only = own_arrivals and not _has_arrivals(path)
    replaced = [k for k in TRACE_REPLACES if not (lengths_only and k in TRACE_ARRIVALS)]
    out = copy.deepcopy(raw)
    workload = {k: v for k, v in out.get("workload", {}).items() if k not in replaced}
    if not lengths_only:
        workload["arrival"] = "trace"
    out["workload"] = {**workload, "trace": str(path)}
    return out


def _has_arrivals(path: Path) -> bool:
    """Whether the trace at ``path`` gives arrival times, by its layout (not read whole: a
    trace may hold millions of rows); True when the layout cannot be told (the run then
    names the problem, with any ``trace_format`` the scenario sets)."""
    from simulator.workload.traces import LENGTHS_ONLY, detect_format

    try:
        return detect_format(path) not in LENGTHS_ONLY
    except (ValueError, OSError):
        return True


def expand_sweep(raw: dict[str, Any]) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """All points of the sweep: ``(labels, scenario)`` pairs, labels naming swept values.

    Labels use the field name (``rate``, ``max_num_seqs``), or ``section.field`` when the
    name is ambiguous; the policy name is labelled ``policy``.
    """
    axes: list[tuple[str, str]] = []
    for section, table in raw.items():
        if isinstance(table, dict):
            axes += [(section, k) for k, v in table.items()
                     if isinstance(v, list) and (section, k) not in NOT_SWEPT]
    for section, key in axes:
        if not raw[section][key]:
            raise ConfigError(f"{section}.{key} = []: a sweep needs at least one value")
    names = [k for _, k in axes]
    points = []
    for values in itertools.product(*(raw[s][k] for s, k in axes)):
        point = copy.deepcopy(raw)
        labels: dict[str, Any] = {}
        for (section, key), value in zip(axes, values, strict=True):
            point[section][key] = value
            label = "policy" if (section, key) == ("policy", "name") else (
                key if names.count(key) == 1 else f"{section}.{key}")
            labels[label] = value
        points.append((labels, point))
    return points
