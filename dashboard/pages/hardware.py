"""hardware (to come)."""

import streamlit as st

st.title("hardware")
