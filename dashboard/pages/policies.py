"""policies (to come)."""

import streamlit as st

st.title("policies")
