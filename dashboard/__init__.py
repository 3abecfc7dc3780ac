"""The Streamlit dashboard over the simulator and validation results.

Top floor, beside ``servesim``. Filled in by the dashboard issue.
"""
