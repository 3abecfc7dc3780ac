"""validation (to come)."""

import streamlit as st

st.title("validation")
