"""Explorer: one scenario, every knob in the sidebar, the answer as tiles and plots."""

from __future__ import annotations

import streamlit as st

from dashboard import figures
from dashboard.logic.feature_knobs import expected_tokens_per_step
from dashboard.logic.run import (
    latency_samples,
    requests_csv,
    requests_parquet,
    step_series,
    summary_json,
)
from dashboard.logic.scenario_form import apply_knobs, knobs_from_point
from dashboard.logic.toml_out import to_toml
from dashboard.logic.track import margin_line, record_rows
from dashboard.sidebar import knob_widgets, scenario_picker
from dashboard.ui import cached_run, feature_tiles, guarded, kpi_tiles, plot
from simulator.track_record import point_record
from simulator.workload.clients import lockstep_lengths, lockstep_text

st.title("Explorer")
base, source = scenario_picker()
knobs = knob_widgets(knobs_from_point(base), base, source)
scenario = apply_knobs(base, knobs)
st.session_state["explorer_point"] = scenario  # the Fleet page can start from it
st.caption(str(base.get("description", base.get("name", ""))))

with st.spinner("Simulating..."):
    out = guarded("Simulation", lambda: cached_run(scenario))
s = out.summary
targets = {"ttft": knobs.ttft_ms, "tpot": knobs.tpot_ms}
kpi_tiles(s, targets, knobs.percentile)
feature_tiles(s)
if knobs.spec.on and not knobs.spec.use_counts:
    k, alpha = knobs.spec.num_tokens, knobs.spec.acceptance
    st.caption(f"Speculative decoding, k = {k}, alpha = {alpha:g}: a row given k drafts emits "
               f"(1 - alpha^(k+1)) / (1 - alpha) = {expected_tokens_per_step(alpha, k):.2f} "
               "tokens a step on average; the simulated mean above also counts rows near "
               "their end, given fewer drafts.")
st.caption(f"{s['completed']} of {len(out.requests)} requests finished, "
           f"{s['num_rejected']} rejected, {s['num_preemptions']} preemptions; "
           f"{s['num_gpus']} GPU(s); steps priced by {s['cost_profile']}; "
           f"simulated in {s['sim_wall_s']:.2f} s")
for note in s.get("workload_notes") or []:
    st.caption(note)
wl = scenario.get("workload", {})
lockstep = lockstep_lengths(str(wl.get("arrival", "poisson")),
                            str(wl.get("client_start", "together")), wl.get("concurrency"),
                            out.requests)
if lockstep is not None:
    st.caption(lockstep_text(*lockstep))
record = record_rows(point_record(scenario, tails=True))  # none on the CPU
if record:
    with st.expander("Track record: how servesim read published runs like this one"):
        st.table(record)
        st.caption("Held-out published serving runs replayed by benchmarks/published.py: the "
                   "narrowest group of at least 10 with this stack, GPU, GPUs a replica and "
                   "kind of load, else a wider one (the last column says which). A negative "
                   "median error reads lower than measured; docs/metrics.md, \"Track "
                   "record\".")
        margin = margin_line(scenario, s, targets, knobs.percentile)
        if margin is not None:
            st.caption(margin)

plot(figures.latency_cdfs(latency_samples(out.requests, out.steps), targets), "cdfs")
left, right = st.columns(2)
with left:
    plot(figures.step_series_figure(step_series(out.steps, out.kv_blocks)), "series")
with right:
    plot(figures.prompt_ttft_scatter(out.requests, knobs.ttft_ms), "scatter")

st.subheader("Downloads")
name = str(scenario.get("name", "scenario"))
toml_text = to_toml(scenario)  # exactly the point simulated above
with st.expander("Scenario that ran (TOML)"):
    st.code(toml_text, language="toml")
cols = st.columns(4)
cols[0].download_button("Scenario (TOML)", toml_text, f"{name}.toml",
                        "application/toml", key="dl_toml")
cols[1].download_button("Requests (CSV)", requests_csv(out), f"{name}-requests.csv",
                        "text/csv", key="dl_csv")
cols[2].download_button("Requests (Parquet)", requests_parquet(out),
                        f"{name}-requests.parquet", "application/octet-stream", key="dl_parquet")
cols[3].download_button("Summary (JSON)", summary_json(out), f"{name}-summary.json",
                        "application/json", key="dl_json")
