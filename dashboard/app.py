"""servesim dashboard: ``streamlit run dashboard/app.py`` (or ``servesim dashboard``).

Multipage app: each page is a thin script under ``dashboard/views/`` (not ``pages/``, which
Streamlit would also list as legacy pages) over the plain
modules in ``dashboard/logic`` and ``dashboard/figures*.py``.
"""

from __future__ import annotations

from pathlib import Path

import streamlit as st

PAGES = Path(__file__).resolve().parent / "views"

st.set_page_config(page_title="servesim", layout="wide")
nav = st.navigation([
    st.Page(PAGES / "explorer.py", title="Explorer", url_path="explorer", default=True),
    st.Page(PAGES / "policies.py", title="Policy comparison", url_path="policies"),
    st.Page(PAGES / "hardware.py", title="Hardware comparison", url_path="hardware"),
    st.Page(PAGES / "capacity.py", title="Capacity", url_path="capacity"),
    st.Page(PAGES / "fleet.py", title="Fleet", url_path="fleet"),
    st.Page(PAGES / "validation.py", title="Validation", url_path="validation"),
    st.Page(PAGES / "calibration.py", title="Calibration", url_path="calibration"),
])
nav.run()
