"""Shipped scenario files, and one point of a sweep (what the dashboard's pages start from)."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

from simulator.scenario import NOT_SWEPT, load_scenario

SCENARIOS_DIR = Path(__file__).resolve().parents[2] / "scenarios"
DEFAULT_SCENARIO = "chat"


def shipped_scenarios() -> dict[str, Path]:
    """Shipped scenario files by name (file stem), sorted."""
    return {p.stem: p for p in sorted(SCENARIOS_DIR.glob("*.toml"))}


def load_shipped(name: str) -> dict[str, Any]:
    """A shipped scenario's raw dict (as ``load_scenario`` gives it)."""
    return load_scenario(shipped_scenarios()[name])


def collapse(raw: dict[str, Any]) -> dict[str, Any]:
    """One point of a sweep: each list takes its middle value; a policy list prefers chunked.

    The middle of a rate sweep is a more telling start than its first, idle-server value.
    """
    point = copy.deepcopy(raw)
    for section, table in point.items():
        if not isinstance(table, dict):
            continue
        for key, value in table.items():
            if isinstance(value, list) and (section, key) not in NOT_SWEPT and value:
                if (section, key) == ("policy", "name") and "chunked" in value:
                    table[key] = "chunked"
                else:
                    table[key] = value[len(value) // 2]
    return point


def sweep_note(raw: dict[str, Any], source: str) -> str | None:
    """Which point of a sweep :func:`collapse` keeps, in words; None for a single point."""
    point = collapse(raw)
    picked = [f"{section}.{key} = {point[section][key]!r}"
              for section, table in raw.items() if isinstance(table, dict)
              for key, value in table.items()
              if isinstance(value, list) and (section, key) not in NOT_SWEPT]
    if not picked:
        return None
    return f"{source} is a sweep; the explorer runs one point of it: {', '.join(picked)}"
