"""Writing a scenario dict back out as TOML (the explorer's "download scenario").

Only what scenarios hold: tables of scalars, lists of scalars, inline tables (length
distributions) and one level of sub-tables (``[policy.chunked]``). Keys starting with
``_`` (``_base_dir``) are left out.
"""

from __future__ import annotations

import json
import math
from typing import Any

TOP_LEVEL_FIRST = ("name", "description", "seed")


def toml_value(value: Any) -> str:
    """One TOML value: string, bool, int, float, list or inline table."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            return "inf" if value > 0 else ("-inf" if value < 0 else "nan")
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value)  # a JSON string is a valid TOML basic string
    if isinstance(value, list | tuple):
        return "[" + ", ".join(toml_value(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{ " + ", ".join(f"{k} = {toml_value(v)}" for k, v in value.items()) + " }"
    raise TypeError(f"cannot write {value!r} ({type(value).__name__}) as TOML")


def to_toml(scenario: dict[str, Any]) -> str:
    """The scenario as TOML text that ``load_scenario`` reads back to the same dict."""
    lines = [f"{k} = {toml_value(scenario[k])}" for k in TOP_LEVEL_FIRST if k in scenario]
    for section, table in scenario.items():
        if section.startswith("_") or section in TOP_LEVEL_FIRST or not isinstance(table, dict):
            continue
        subtables = {k: v for k, v in table.items()
                     if isinstance(v, dict) and section == "policy"}
        lines += ["", f"[{section}]"]
        lines += [f"{k} = {toml_value(v)}" for k, v in table.items() if k not in subtables]
        for name, sub in subtables.items():
            lines += ["", f"[{section}.{name}]"]
            lines += [f"{k} = {toml_value(v)}" for k, v in sub.items()]
    return "\n".join(lines) + "\n"
