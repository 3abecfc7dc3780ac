"""Policy comparison: static vs dynamic vs continuous (and chunked prefill) across rates.

Widgets are keyed ``pol_*`` and refilled from the chosen scenario (dashboard/page_form.py);
each policy shows the knobs it takes, with the scenario schema's ranges. Prefix caching
and speculative decoding apply to every compared policy that takes them (the padded
policies run without, and a note says so); the table gains their columns when on.
"""

from __future__ import annotations

from dataclasses import replace

import streamlit as st

from dashboard import figures
from dashboard.feature_widgets import FEATURE_KEYS, prefix_widgets, spec_widgets
from dashboard.logic.compare import (
    DEFAULT_RATES,
    DEFAULT_REQUESTS,
    comparison_table,
    parse_rates,
    policy_knobs,
    policy_points,
    recommend,
    with_features,
)
from dashboard.logic.form_fields import choices
from dashboard.logic.scenario_form import (
    POLICY_KNOBS,
    collapse,
    load_shipped,
    policy_label,
    shipped_scenarios,
)
from dashboard.page_form import KNOB_STEPS, choice, knob_label, number, refill, seed
from dashboard.ui import guarded, plot, run_all
from simulator.policies import policy_knobs as policy_knobs_of

st.title("Policy comparison")
names = list(shipped_scenarios())
c = st.columns(4)
name = choice(c[0], "Workload from scenario", names, "chat", "pol_scenario")
base = collapse(load_shipped(name))
all_knobs = policy_knobs(base, choices("policy"))  # every policy, as the scenario sets it
filled = ["pol_ttft_ms", "pol_tpot_ms", "pol_num_requests"]
filled += [f"pol_{p}_{k}" for p in all_knobs for k in POLICY_KNOBS]
filled += [f"pol_{k}" for k in FEATURE_KEYS]
refill("pol", f"shipped:{name}", filled)
rates_text = c[1].text_input("Request rates (req/s)", ", ".join(f"{r:g}" for r in DEFAULT_RATES),
                             key="pol_rates")
first = next(iter(all_knobs.values()))
n = int(number(c[2], "Requests per point", "num_requests",
               min(DEFAULT_REQUESTS, first.num_requests), "pol_num_requests", 100))
seed("pol_policies", list(choices("policy")))
chosen = c[3].multiselect("Policies", list(choices("policy")), key="pol_policies",
                          format_func=policy_label)
rates = guarded("Rates", lambda: parse_rates(rates_text))
c = st.columns(4)
ttft = float(number(c[0], "TTFT target (ms)", "ttft_ms", first.ttft_ms, "pol_ttft_ms", 50.0))
tpot = float(number(c[1], "TPOT target (ms)", "tpot_ms", first.tpot_ms, "pol_tpot_ms", 5.0))
if first.arrival == "closed":
    st.caption(f"{name}.toml sends a closed loop; this page sends Poisson traffic at each rate "
               "instead" + (f" (its sessions of {first.prefix.session_turns} turns too)"
                            if first.prefix.session_turns > 1 else "") + ".")
left, right = st.columns(2)
with left:
    prefix = prefix_widgets(st, first.prefix, "pol_", trace=bool(first.trace))
with right:
    spec = spec_widgets(st, first.spec, first.model, "pol_",
                        counts=base.get("speculative", {}).get("acceptance_counts"))
knobs = {}
with st.expander("Policy knobs"):
    k = st.columns(len(chosen) or 1)
    for col, policy in zip(k, chosen, strict=False):
        own = all_knobs[policy]
        col.markdown(f"**{policy_label(policy)}**")
        shown = {knob: number(col, knob_label(knob, policy), knob, getattr(own, knob),
                              f"pol_{policy}_{knob}", KNOB_STEPS.get(knob), policy=policy)
                 for knob in POLICY_KNOBS if knob in policy_knobs_of(policy)}
        knobs[policy] = replace(own, **shown, num_requests=n, ttft_ms=ttft, tpot_ms=tpot,
                                percentile=99.0)  # the page reports P99
if not knobs:
    st.info("Pick at least one policy.")
    st.stop()
knobs, feature_note = with_features(knobs, prefix, spec)
if feature_note:
    st.info(feature_note)

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
