"""Policy comparison: static vs dynamic vs continuous (and chunked prefill) across rates."""

from __future__ import annotations

from dataclasses import replace

import streamlit as st

from dashboard import figures
from dashboard.logic.compare import (
    DEFAULT_RATES,
    DEFAULT_REQUESTS,
    comparison_table,
    parse_rates,
    policy_knobs,
    policy_points,
    recommend,
)
from dashboard.logic.scenario_form import POLICY_LABELS, collapse, load_shipped, shipped_scenarios
from dashboard.ui import guarded, plot, run_all
from simulator.scenario import POLICY_NAMES

st.title("Policy comparison")
names = list(shipped_scenarios())
c = st.columns(4)
name = c[0].selectbox("Workload from scenario", names, index=names.index("chat"), key="scenario")
base = collapse(load_shipped(name))
rates_text = c[1].text_input("Request rates (req/s)", ", ".join(f"{r:g}" for r in DEFAULT_RATES),
                             key="rates")
n = int(c[2].number_input("Requests per point", 10, 20_000, DEFAULT_REQUESTS, 100,
                          key="num_requests"))
chosen = c[3].multiselect("Policies", list(POLICY_NAMES), list(POLICY_NAMES), key="policies",
                          format_func=lambda p: POLICY_LABELS[p])
rates = guarded("Rates", lambda: parse_rates(rates_text))
knobs = policy_knobs(base, chosen)
first = next(iter(knobs.values()), None)
c = st.columns(4)
ttft = float(c[0].number_input("TTFT target (ms)", 1.0, 1e6, first.ttft_ms if first else 500.0,
                               50.0, key="ttft_ms"))
tpot = float(c[1].number_input("TPOT target (ms)", 1.0, 1e5, first.tpot_ms if first else 50.0,
                               5.0, key="tpot_ms"))
with st.expander("Policy knobs"):
    k = st.columns(len(knobs) or 1)
    for col, (policy, own) in zip(k, knobs.items(), strict=False):
        col.markdown(f"**{POLICY_LABELS[policy]}**")
        ni = col.number_input
        if policy == "static":
            own = replace(own, batch_size=int(ni("batch_size", 1, 1024, own.batch_size,
                                                 key="static_batch_size")))
        elif policy == "dynamic":
            own = replace(own, max_batch_size=int(ni("max_batch_size", 1, 1024,
                                                     own.max_batch_size, key="dyn_max_batch")),
                          max_wait_s=float(ni("max_wait_s (s)", 0.0, 10.0, own.max_wait_s, 0.01,
                                              key="dyn_max_wait_s")))
        else:
            own = replace(own, max_num_seqs=int(ni("max_num_seqs", 1, 4096, own.max_num_seqs,
                                                   key=f"{policy}_max_num_seqs")),
                          max_num_batched_tokens=int(ni(
                              "max_num_batched_tokens", 16, 1_000_000,
                              own.max_num_batched_tokens, 256, key=f"{policy}_tokens")))
        knobs[policy] = replace(own, num_requests=n, ttft_ms=ttft, tpot_ms=tpot, percentile=99.0)
if not knobs:
    st.info("Pick at least one policy.")
    st.stop()

points = policy_points(base, knobs, rates)
outs = guarded("Simulation", lambda: run_all(points, "Simulating policies x rates"))
table = comparison_table([(labels, o.summary) for (labels, _), o in zip(points, outs, strict=True)])
slo_text = f"P99 TTFT ≤ {ttft:g} ms and P99 TPOT ≤ {tpot:g} ms"
st.markdown(recommend(table, knobs, slo_text))

left, right = st.columns(2)
with left:
    plot(figures.against_rate(table, [("p50_ttft_ms", "P50"), ("p99_ttft_ms", "P99")],
                              "TTFT (ms, log scale)", "TTFT vs rate", ttft, log_y=True), "ttft")
with right:
    plot(figures.against_rate(table, [("p50_tpot_ms", "P50"), ("p99_tpot_ms", "P99")],
                              "TPOT (ms, log scale)", "TPOT vs rate", tpot, log_y=True), "tpot")
plot(figures.against_rate(table, [("request_throughput", "throughput"),
                                  ("request_goodput", "goodput")],
                          "requests per second (req/s)", "Throughput and goodput vs rate"),
     "throughput")
st.dataframe(table.drop(columns=["series"]), hide_index=True)
