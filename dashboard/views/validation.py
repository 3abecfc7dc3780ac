"""Validation: a measured run against the simulator on the same workload."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import streamlit as st

from dashboard.figures_fit import overlay_cdfs
from dashboard.logic.run import latency_samples
from dashboard.logic.scenario_form import (
    POLICY_LABELS,
    apply_knobs,
    collapse,
    knobs_from_point,
    load_shipped,
    shipped_scenarios,
)
from dashboard.logic.validation import (
    demo_records,
    error_table,
    load_measured,
    replay_trace,
    worst_offender,
)
from dashboard.ui import BAD_INPUT, cached_run, guarded, plot, upload
from simulator.scenario import POLICY_NAMES
from simulator.specs import HARDWARE, MODELS

DEMO_SLOWDOWN = 1.3


@st.cache_data(show_spinner=False, max_entries=32)
def cached_demo(point: dict, slowdown: float) -> str:
    """The demo measurement's file (cached by the deployment)."""
    return str(demo_records(point, slowdown))


st.title("Validation")
names = list(shipped_scenarios())
c = st.columns(5)
name = c[0].selectbox("Deployment from scenario", names, index=names.index("chat"),
                      key="scenario")
base = collapse(load_shipped(name))
d = knobs_from_point(base)
models, gpus = list(MODELS), [g for g in HARDWARE if g != "cpu"]
policies: list[str] = list(POLICY_NAMES)
model = c[1].selectbox("Model", models, index=models.index(d.model), key="model")
gpu = c[2].selectbox("GPU", gpus, index=gpus.index(d.gpu), key="gpu")
tp = c[3].selectbox("Tensor parallelism", [1, 2, 4, 8], index=[1, 2, 4, 8].index(d.tp), key="tp")
policy = c[4].selectbox("Policy", policies, index=policies.index(d.policy), key="policy",
                        format_func=lambda p: POLICY_LABELS[p])
knobs = replace(knobs_from_point({**base, "policy": {**base["policy"], "name": policy}}),
                model=model, gpu=gpu, tp=tp)

path = upload("Measured run: request records (CSV/Parquet, contract 4) or a vLLM bench "
              "result JSON (--save-detailed)", ("csv", "parquet", "pq", "json"), "measured_file")
if path is None:
    demo = replace(knobs, num_requests=400)
    path = Path(guarded("Demo", lambda: cached_demo(apply_knobs(base, demo), DEMO_SLOWDOWN)))
    st.info(f"No file uploaded: the 'measured' side is a demo, this deployment simulated with "
            f"every step {DEMO_SLOWDOWN:g}x slower, so the error table should show it.")
try:
    measured = load_measured(path)
except BAD_INPUT as e:
    st.error(f"Measured run not used: {e}")
    st.stop()
st.caption(f"{measured.source}: {measured.kind}, {len(measured.table)} finished requests")
has_arrivals = not measured.table["arrival_s"].isna().any()
rate = measured.rate or knobs.rate
if not has_arrivals:
    rate = float(st.number_input("Arrival rate to replay at (req/s; the file has no arrival "
                                 "times)", 0.01, 10_000.0, float(rate), 0.5, key="rate"))
trace = str(guarded("Workload", lambda: replay_trace(measured)))
sim_knobs = replace(knobs, trace=trace, arrival="trace" if has_arrivals else "poisson",
                    rate=rate, num_requests=len(measured.table))

scenario = apply_knobs(base, sim_knobs)
if has_arrivals:
    scenario["workload"].pop("rate")  # replay the measured arrival times as they are
with st.spinner("Simulating the measured workload..."):
    out = guarded("Simulation", lambda: cached_run(scenario))
simulated = latency_samples(out.requests, out.steps)
table = error_table(measured.samples, simulated)
st.markdown(worst_offender(table))
st.dataframe(table.style.format({"measured_ms": "{:.1f}", "simulated_ms": "{:.1f}",
                                 "error_pct": "{:+.1f}"}), hide_index=True)
plot(overlay_cdfs(measured.samples, simulated), "overlay")
if "itl" not in measured.samples:
    st.caption("Request records carry no per-token times, so ITL is not compared.")
