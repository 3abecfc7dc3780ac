"""Widgets whose values live in ``st.session_state`` under one page's own keys.

Each page names its widgets with its own prefix (``hw_rate``, ``val_gpu``), so no two
pages share a value. A widget is created without a default of its own: :func:`refill`
drops the page's scenario-filled keys whenever the page's scenario (its ``source``) is not
the one they were filled from, and each widget then takes the value the page passes it,
read from the new scenario. A value the user set stays until the scenario changes.
Ranges are the scenario schema's (``dashboard.logic.form_fields.bounds``) unless given.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import streamlit as st

from dashboard.logic.form_fields import bounds, form_field, problem

KNOB_STEPS = {"max_wait_s": 0.01, "max_num_batched_tokens": 256}  # widget steps, not limits


def knob_label(knob: str, policy: str | None = None) -> str:
    """``max_wait_s (s)``: a knob's name with the schema's unit."""
    unit = form_field(knob, policy).unit
    return f"{knob} ({unit})" if unit else knob


def refill(prefix: str, source: str, keys: Iterable[str]) -> None:
    """Forget the widgets ``keys`` when ``source`` is not the scenario they show."""
    marker = f"_{prefix}_source"
    if st.session_state.get(marker) != source:
        for key in keys:
            st.session_state.pop(key, None)
        st.session_state[marker] = source


def seed(key: str, value: Any) -> None:
    """The widget ``key`` shows ``value`` unless the user (or a scenario change) set it."""
    if key not in st.session_state:
        st.session_state[key] = value


def choice(where: Any, label: str, options: Sequence[Any], value: Any, key: str,
           **kw: Any) -> Any:
    """A select box showing ``value`` (the first option when it is not one of them)."""
    options = list(options)
    seed(key, value if value in options else options[0])
    if st.session_state[key] not in options:
        st.session_state[key] = options[0]
    return where.selectbox(label, options, key=key, **kw)


def number(where: Any, label: str, knob: str, value: Any, key: str, step: Any = None,
           limits: tuple[Any, Any] | None = None, policy: str | None = None) -> Any:
    """A number box for the scenario field behind ``knob`` showing ``value``; its range is
    the schema's (or ``limits``). A value the schema refuses is named and the page stops."""
    low, high = limits or bounds(knob, policy)
    integer = isinstance(low, int) if limits else form_field(knob, policy).rule.kind == "int"
    cast = int if integer else float
    seed(key, cast(value))
    current = cast(st.session_state[key])
    current = current if low is None else max(current, low)
    st.session_state[key] = current if high is None else min(current, high)
    out = where.number_input(label, low, high, step=step, key=key)
    why = None if limits else problem(knob, out, policy)
    if why:
        st.error(f"Not run: {why}")
        st.stop()
    return out
