"""calibration (to come)."""

import streamlit as st

st.title("calibration")
