"""Hardware comparison: one workload on each GPU where the model fits; latency and cost."""

from __future__ import annotations

from dataclasses import replace

import streamlit as st

from dashboard import figures
from dashboard.logic.hardware import (
    CATALOGUE_GPUS,
    DEFAULT_PRICES_USD_PER_HOUR,
    DEFAULT_REQUESTS,
    cheapest_meeting_slo,
    hardware_points,
    hardware_table,
)
from dashboard.logic.scenario_form import (
    POLICY_LABELS,
    collapse,
    knobs_from_point,
    load_shipped,
    shipped_scenarios,
)
from dashboard.ui import guarded, plot, run_all
from simulator.scenario import POLICY_NAMES
from simulator.specs import MODELS

st.title("Hardware comparison")
names = list(shipped_scenarios())
c = st.columns(4)
name = c[0].selectbox("Workload from scenario", names, index=names.index("gpu-compare"),
                      key="scenario")
base = collapse(load_shipped(name))
d = knobs_from_point(base)
models = list(MODELS)
model = c[1].selectbox("Model", models, index=models.index(d.model), key="model")
tp = c[2].selectbox("Tensor parallelism", [1, 2, 4, 8], index=[1, 2, 4, 8].index(d.tp), key="tp")
policies: list[str] = list(POLICY_NAMES)
policy = c[3].selectbox("Policy", policies, index=policies.index(d.policy), key="policy",
                        format_func=lambda p: POLICY_LABELS[p])
c = st.columns(4)
rate = float(c[0].number_input("Rate (req/s)", 0.01, 10_000.0, d.rate, 1.0, key="rate"))
n = int(c[1].number_input("Requests", 10, 20_000, DEFAULT_REQUESTS, 100, key="num_requests"))
ttft = float(c[2].number_input("TTFT target (ms)", 1.0, 1e6, d.ttft_ms, 50.0, key="ttft_ms"))
tpot = float(c[3].number_input("TPOT target (ms)", 1.0, 1e5, d.tpot_ms, 5.0, key="tpot_ms"))
gpus = st.multiselect("GPUs", list(CATALOGUE_GPUS), list(CATALOGUE_GPUS), key="gpus")
with st.expander("Price per GPU-hour (USD; illustrative cloud list prices, edit them)"):
    cols = st.columns(4)
    prices = {g: float(cols[i % 4].number_input(g, 0.0, 1000.0, DEFAULT_PRICES_USD_PER_HOUR[g],
                                                 0.05, key=f"price_{g}"))
              for i, g in enumerate(CATALOGUE_GPUS)}

arrival = "poisson" if d.arrival in ("closed", "trace") else d.arrival
knobs = replace(d, model=model, tp=tp, policy=policy, rate=rate, num_requests=n, ttft_ms=ttft,
                tpot_ms=tpot, arrival=arrival, percentile=99.0)
points, skipped = hardware_points(base, knobs, gpus)
for gpu, why in skipped.items():
    st.warning(f"{gpu} skipped: {why}")
if not points:
    st.info("No GPU chosen fits this deployment.")
    st.stop()
outs = guarded("Simulation", lambda: run_all(points, "Simulating GPUs"))
table = hardware_table([o.summary for o in outs], prices)
st.markdown(cheapest_meeting_slo(table))
left, right = st.columns(2)
with left:
    plot(figures.bars(table, "gpu", [("p50_ttft_ms", "P50 TTFT"), ("p99_ttft_ms", "P99 TTFT")],
                      "TTFT (ms)", "TTFT by GPU", ttft), "hw_ttft")
    plot(figures.bars(table, "gpu", [("output_tok_s_per_gpu", "output tokens"),
                                     ("total_tok_s_per_gpu", "all tokens")],
                      "throughput per GPU (tok/s)", "Throughput per GPU"), "hw_tput")
with right:
    plot(figures.bars(table, "gpu", [("p50_tpot_ms", "P50 TPOT"), ("p99_tpot_ms", "P99 TPOT")],
                      "TPOT (ms)", "TPOT by GPU", tpot), "hw_tpot")
    plot(figures.bars(table, "gpu", [("usd_per_m_output_tokens", "per M output tokens"),
                                     ("usd_per_m_total_tokens", "per M tokens (in + out)")],
                      "cost (USD per million tokens)", "Cost per million tokens"), "hw_cost")
st.caption("At a fixed rate a GPU that keeps up serves the same tokens per second as a faster "
           "one; raise the rate to compare capacity.")
st.dataframe(table, hide_index=True)
