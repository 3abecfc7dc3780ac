"""servesim's ground floor: pure simulation logic (no torch, no streamlit).

Workloads, model and hardware specs, cost models, the KV block manager, the batching
policies shared with the engine, the SimPy replica and cluster, and the metrics.
"""

from simulator.accel import install as _install_compiled

_install_compiled()  # the compiled core when built for these sources (simulator/accel.py)
