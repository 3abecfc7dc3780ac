"""Dashboard logic that is not UI: plain functions over the simulator, unit-tested.

Nothing here imports streamlit; the pages call these and only lay out widgets and plots.
"""
