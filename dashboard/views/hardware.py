"""Hardware comparison: one workload on each GPU where the model fits; latency and cost.

Widgets are keyed ``hw_*`` and refilled from the chosen scenario (dashboard/page_form.py).
"""

from __future__ import annotations

from dataclasses import replace

import streamlit as st

from dashboard import figures
from dashboard.logic.form_fields import choices, usable_scenarios
from dashboard.logic.hardware import (
    CATALOGUE_GPUS,
    DEFAULT_PRICES_USD_PER_HOUR,
    DEFAULT_REQUESTS,
    cheapest_meeting_slo,
    hardware_points,
    hardware_table,
)
from dashboard.logic.scenario_form import (
    collapse,
    knobs_from_point,
    load_shipped,
    policy_label,
)
from dashboard.page_form import choice, number, refill
from dashboard.ui import guarded, plot, run_all

FILLED = ("hw_model", "hw_tp", "hw_policy", "hw_rate", "hw_num_requests", "hw_ttft_ms",
          "hw_tpot_ms")  # widgets the scenario fills (page_form.refill)

st.title("Hardware comparison")
names = usable_scenarios()  # every value fits this page's lists
c = st.columns(4)
name = choice(c[0], "Workload from scenario", names, "gpu-compare", "hw_scenario")
base = collapse(load_shipped(name))
refill("hw", f"shipped:{name}", FILLED)
d = knobs_from_point(base)
model = choice(c[1], "Model", choices("model"), d.model, "hw_model")
tp = choice(c[2], "Tensor parallelism", choices("tp"), d.tp, "hw_tp")
policy = choice(c[3], "Policy", choices("policy"), d.policy, "hw_policy",
                format_func=policy_label)
c = st.columns(4)
rate = float(number(c[0], "Rate (req/s)", "rate", d.rate, "hw_rate", 1.0))
n = int(number(c[1], "Requests", "num_requests", min(DEFAULT_REQUESTS, d.num_requests),
               "hw_num_requests", 100))
ttft = float(number(c[2], "TTFT target (ms)", "ttft_ms", d.ttft_ms, "hw_ttft_ms", 50.0))
tpot = float(number(c[3], "TPOT target (ms)", "tpot_ms", d.tpot_ms, "hw_tpot_ms", 5.0))
gpus = st.multiselect("GPUs", list(CATALOGUE_GPUS), list(CATALOGUE_GPUS), key="hw_gpus")
with st.expander("Price per GPU-hour (USD; illustrative cloud list prices, edit them)"):
    cols = st.columns(4)
    prices = {g: float(cols[i % 4].number_input(g, 0.0, 1000.0, DEFAULT_PRICES_USD_PER_HOUR[g],
                                                 0.05, key=f"hw_price_{g}"))
              for i, g in enumerate(CATALOGUE_GPUS)}

arrival = "poisson" if d.arrival in ("closed", "trace") else d.arrival
knobs = replace(d, model=model, tp=tp, policy=policy, rate=rate, num_requests=n, ttft_ms=ttft,
                tpot_ms=tpot, arrival=arrival, percentile=99.0)  # the page reports P99
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
