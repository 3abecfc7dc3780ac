"""Fleet: the autoscaler, the front door, the router, priority classes and disaggregated
prefill/decode pools on one scenario.

Pick a shipped fleet scenario (or the Explorer's current one); every fleet knob is seeded
from it (keys ``fl_*``, dashboard/page_form.py) and written back by
``dashboard.logic.fleet.apply_fleet``. "Time scale" runs a share of the scenario's
requests with its rate schedule's times scaled alike, so a long day of traffic runs in
seconds with the same load curve (the autoscaler's own intervals stay as they are).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import replace

import streamlit as st

from dashboard import figures_fleet
from dashboard.fleet_disagg_view import disagg_section
from dashboard.fleet_widgets import (
    WIDGET_KEYS,
    admission_widgets,
    autoscale_widgets,
    class_keys,
    class_widgets,
    disagg_widgets,
    router_widgets,
)
from dashboard.logic.fleet import (
    FleetKnobs,
    apply_fleet,
    fleet_from_point,
    fleet_scenarios,
    policy_name,
    scale_time,
    supports_scheduling,
)
from dashboard.logic.fleet_disagg import disagg_from_point, write_disagg
from dashboard.logic.fleet_results import (
    class_table,
    class_ttft,
    fleet_cost,
    offered_rate,
    refusals,
    replica_steps,
)
from dashboard.logic.scenario_form import collapse, load_shipped
from dashboard.logic.toml_out import to_toml
from dashboard.page_form import choice, refill, seed
from dashboard.ui import cached_run, guarded, kpi_tiles, plot

FLEET_MAX_REQUESTS = 6000  # the starting time scale keeps a run to about this many requests
EXPLORER = "the Explorer's current scenario"

st.title("Fleet")
names = fleet_scenarios()
current = st.session_state.get("explorer_point")  # the point the Explorer last ran
options = ([EXPLORER] if current else []) + names
c = st.columns([2, 1])
name = choice(c[0], "Scenario", options, "autoscaling-step", "fl_scenario")
if name == EXPLORER and current:
    base = current
    source = "explorer:" + hashlib.sha256(json.dumps(base, sort_keys=True, default=str)
                                          .encode()).hexdigest()
else:
    source, base = f"shipped:{name}", collapse(load_shipped(name))
d = fleet_from_point(base)
refill("fl", source, [f"fl_{k}" for k in WIDGET_KEYS] + ["fl_scale"] + class_keys(d.classes))
n = int(base.get("workload", {}).get("num_requests") or 1)
seed("fl_scale", round(min(1.0, FLEET_MAX_REQUESTS / n), 2))
scale = float(c[1].number_input("Time scale", 0.01, 1.0, step=0.05, key="fl_scale",
                                help="run this share of the scenario's requests, with its "
                                     "rate schedule's start times scaled alike"))
st.caption(str(base.get("description", "")) + f" — {round(n * scale):,} of {n:,} requests.")

cols = st.columns(4)
below = st.container()  # the class rows, full width under the four groups
with cols[0]:
    st.subheader("Router")
    split = disagg_widgets(st, disagg_from_point(base))
    replicas, router = (1, d.router) if split.on else router_widgets(st, d.replicas, d.router)
NOT_SPLIT = "Not with disaggregated pools (docs/fleet.md, limits)."
with cols[1]:
    st.subheader("Autoscaler")
    auto = replace(d.autoscale, on=False) if split.on else autoscale_widgets(st, d.autoscale)
with cols[2]:
    st.subheader("Front door")
    admission = (replace(d.admission, rate_limit=None, max_queue=None) if split.on
                 else admission_widgets(st, d.admission))
for col in cols[1:3] if split.on else ():
    col.caption(NOT_SPLIT)
with cols[3]:
    st.subheader("Priorities")
    sched = d.scheduling if supports_scheduling(policy_name(base)) else None
    scheduling, classes = class_widgets(st, below, d.classes, sched)
knobs = FleetKnobs(replicas, router, auto, admission, scheduling or d.scheduling, classes)
scenario = scale_time(write_disagg(apply_fleet(base, knobs), split), scale)

with st.spinner("Simulating the fleet..."):
    out = guarded("Simulation", lambda: cached_run(scenario))
s = out.summary
slo = s.get("slo") or {}
kpi_tiles(s, {m: float(slo[f"{m}_ms"]) for m in ("ttft", "tpot") if slo.get(f"{m}_ms")},
          float(slo.get("percentile") or 99.0))

st.subheader("Replicas and cost")
steps = replica_steps(s)
if steps.empty:  # a fixed fleet: one flat step over the run
    end = float(s.get("duration") or 0.0)
    steps = replica_steps({"replica_timeline": [[0.0, s["replicas"], s["replicas"]]],
                           "fleet_end_s": end})
rate, rate_label = offered_rate(scenario, out.requests)
plot(figures_fleet.replica_timeline(steps, rate, rate_label), "fl_timeline")
cost = fleet_cost(s)
if cost is None:
    pools = (f" ({split.prefill_replicas} prefill + {split.decode_replicas} decode)"
             if split.on else "")
    st.caption(f"Autoscaler off: {s['replicas']} replica(s){pools} throughout.")
else:
    m = st.columns(4)
    m[0].metric("Replica-hours", f"{cost['replica_seconds'] / 3600:.2f}",
                help="each replica billed from its start (cold start included) until it leaves")
    m[1].metric("Mean / peak replicas", f"{cost['mean_replicas']:.2f} / {cost['peak_replicas']:g}")
    m[2].metric("Cost", f"${cost['cost_usd']:.2f}",
                delta=f"{-cost['saving']:.0%} vs fixed", delta_color="inverse", delta_arrow="off",
                help=f"replica-hours x tp x ${s.get('usd_per_gpu_hour')}/GPU-hour")
    m[3].metric(f"Fixed fleet of {cost['peak_replicas']:g}", f"${cost['fixed_cost_usd']:.2f}",
                help="the peak count for the whole run (same span, fleet_end_s); its latency "
                     "would differ: run it with the autoscaler off")

st.subheader("Refusals")
refused = refusals(s)
if refused.empty:
    st.caption(f"No request refused ({s['completed']} finished, {s['num_in_flight']} "
               "unfinished at the horizon).")
else:
    left, right = st.columns(2)
    left.dataframe(refused, hide_index=True, key="fl_refusals")
    with right:
        plot(figures_fleet.refusals_bar(refused), "fl_refusals_bar")

if s.get("classes"):
    st.subheader("Priority classes")
    table = class_table(s)
    st.dataframe(table, hide_index=True, key="fl_classes", column_config={
        col: st.column_config.NumberColumn(format="%.1f") for col in table.columns
        if col.endswith(("ms", "req/s"))} | {
        "goodput share": st.column_config.NumberColumn(format="percent")})
    targets = {name: (figures.get("slo") or {}).get("ttft_ms")
               for name, figures in s["classes"].items()}
    plot(figures_fleet.class_ttft_cdfs(class_ttft(out.requests, s), targets), "fl_class_ttft")

if split.on:
    disagg_section(scenario, out)

with st.expander("Scenario that ran (TOML)"):
    st.code(to_toml(scenario), language="toml")
