"""Calibration: shipped profiles' provenance, a profile's cost surface, and measured
profile points (contract 2) against the profile's predictions with residuals."""

from __future__ import annotations

import numpy as np
import streamlit as st

from dashboard import figures_fit
from dashboard.logic.calibration import (
    PROFILE_TABLE_COLUMNS,
    cached_table,
    decode_surface,
    fit_quality,
    predict,
    prefill_curve,
    profile_cost,
    provenance_table,
    read_profile_table,
    synthetic_table,
)
from dashboard.ui import BAD_INPUT, plot, upload
from simulator.costs.profile import PROFILES_DIR
from simulator.profile_cache import cache_root

DEFAULT_PROFILE = "h100-sxm__llama-3.1-8b__bf16__tp1.json"
DEMO_SCALE = 1.1

st.title("Calibration")
st.subheader("Shipped cost profiles")
prov = provenance_table()
st.dataframe(prov, hide_index=True, height=240)
cached = cached_table()
st.caption(f"Measured on a user's machine (`servesim calibrate --here`, cache {cache_root()}): "
           f"{len(cached)} profile(s)")
if len(cached):
    st.dataframe(cached, hide_index=True)
files = list(prov["file"])
name = st.selectbox("Profile", files, index=files.index(DEFAULT_PROFILE), key="profile")
profile, cost = profile_cost(PROFILES_DIR / name)
who = profile.provenance
st.caption(f"{profile.form} form; source: {who.get('source', 'not stated')}; "
           f"by {who.get('measured_by', '?')} on {who.get('date', '?')}")
with st.expander("Coefficients and provenance"):
    st.json({"coefficients": profile.coefficients, "fit": profile.fit,
             "provenance": profile.provenance})

st.subheader("Cost surface")
batch = np.unique(np.geomspace(1, 256, 24).round()).astype(int)
context = np.unique(np.geomspace(128, 16384, 24).round()).astype(int)
left, right = st.columns(2)
with left:
    plot(figures_fit.decode_surface(batch, context, decode_surface(cost, batch, context)),
         "surface")
with right:
    lines = {f"decode, {c} tokens of context": decode_surface(cost, batch, np.array([c]))[0]
             for c in (512, 2048, 8192)}
    plot(figures_fit.curves(batch, lines, "batch size (sequences)", "Decode step vs batch size"),
         "decode_curves")
tokens = np.unique(np.geomspace(16, 16384, 40).round()).astype(int)
plot(figures_fit.curves(tokens, {"prefill (one prompt)": prefill_curve(cost, tokens)},
                        "prompt length (tokens)", "Prefill step vs prompt length"), "prefill")

st.subheader("Measured profile points")
path = upload(f"Profile table (Parquet/CSV with {', '.join(PROFILE_TABLE_COLUMNS)})",
              ("parquet", "pq", "csv"), "profile_table")
if path is None:
    points = synthetic_table(cost, scale=DEMO_SCALE)
    st.info(f"No table uploaded: showing a synthetic one, {DEMO_SCALE:g}x this profile's "
            "prediction with 2% noise, so residuals sit near +10%.")
else:
    try:
        points, unit_warning = read_profile_table(path)
    except BAD_INPUT as e:
        st.error(f"Profile table not used: {e}")
        st.stop()
    if unit_warning:
        st.warning(unit_warning)
scored = predict(cost, points)
q = fit_quality(scored)
cols = st.columns(3)
cols[0].metric("MAPE", f"{q['mape_pct']:.1f} %")
cols[1].metric("R²", f"{q['r2']:.3f}")
cols[2].metric("Points", f"{q['n_points']}")
left, right = st.columns(2)
with left:
    plot(figures_fit.measured_vs_predicted(scored), "measured_vs_predicted")
with right:
    plot(figures_fit.residuals(scored), "residuals")
