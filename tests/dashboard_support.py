"""Helpers for the dashboard tests: run a page under AppTest, read its plotly figures."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import numpy as np

PAGES = Path(__file__).resolve().parents[1] / "dashboard" / "views"


def page(name: str, timeout: float = 120) -> Any:
    """An AppTest for ``dashboard/views/<name>.py`` (not yet run)."""
    from streamlit.testing.v1 import AppTest

    return AppTest.from_file(str(PAGES / f"{name}.py"), default_timeout=timeout)


def figures(at: Any) -> dict[str, dict[str, Any]]:
    """The page's plotly figures as JSON specs, by chart key (streamlit's element id)."""
    out = {}
    for i, chart in enumerate(at.get("plotly_chart")):
        spec = json.loads(chart.proto.spec)
        title = spec["layout"].get("title", {})
        name = title.get("text") if isinstance(title, dict) else title
        out[name or f"chart{i}"] = spec
    return out


def trace_names(spec: dict[str, Any]) -> list[str]:
    """Names of a figure's traces."""
    return [t.get("name") for t in spec["data"]]


def array(value: Any) -> np.ndarray:
    """A plotly JSON array: a list, or numpy's base64 ``{"dtype", "bdata"}`` form."""
    if isinstance(value, dict) and "bdata" in value:
        return np.frombuffer(base64.b64decode(value["bdata"]), dtype=np.dtype(value["dtype"]))
    return np.asarray(value, dtype=float)


def axis_titles(spec: dict[str, Any]) -> list[str]:
    """Every axis's title text in a figure's layout ("" for an axis without one)."""
    titles = []
    for key, axis in spec["layout"].items():
        if key.startswith(("xaxis", "yaxis")) and isinstance(axis, dict):
            titles.append((axis.get("title") or {}).get("text", ""))
    return titles


def metrics(at: Any) -> dict[str, Any]:
    """The page's st.metric tiles: label -> (value, delta)."""
    return {m.label: (m.value, m.proto.delta) for m in at.metric}
