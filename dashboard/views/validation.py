"""Validation: a measured run against the simulator on the same workload.

Widgets are keyed ``val_*`` and refilled from the chosen scenario (the replay rate: from
the measured file) as dashboard/page_form.py says.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import streamlit as st

from dashboard.figures_fit import overlay_cdfs
from dashboard.logic.fit_run import PAGE_TERMS, RunFit, fit_run
from dashboard.logic.form_fields import choices, usable_scenarios
from dashboard.logic.run import latency_samples
from dashboard.logic.scenario_form import (
    apply_knobs,
    collapse,
    knobs_from_point,
    load_shipped,
    policy_label,
)
from dashboard.logic.validation import (
    comparison,
    demo_records,
    load_measured,
    replay_trace,
    tolerance_text,
    verdict,
)
from dashboard.page_form import choice, number, refill
from dashboard.ui import BAD_INPUT, cached_run, guarded, plot, upload, upload_many
from simulator.costs.host import FIT_TERMS

DEMO_SLOWDOWN = 1.3


@st.cache_data(show_spinner=False, max_entries=32)
def cached_demo(point: dict, slowdown: float) -> str:
    """The demo measurement's file (cached by the deployment)."""
    return str(demo_records(point, slowdown))


@st.cache_data(show_spinner=False, max_entries=16)
def cached_fit(scenario: dict, paths: tuple[str, ...], terms: tuple[str, ...] | None
               ) -> RunFit:
    """A fit to the measured runs (cached by the deployment, the files and the terms)."""
    return fit_run(scenario, [Path(p) for p in paths], terms)


st.title("Validation")
names = usable_scenarios()  # every value fits this page's lists
c = st.columns(5)
name = choice(c[0], "Deployment from scenario", names, "chat", "val_scenario")
base = collapse(load_shipped(name))
refill("val", f"shipped:{name}", ("val_model", "val_gpu", "val_tp", "val_policy"))
d = knobs_from_point(base)
model = choice(c[1], "Model", choices("model"), d.model, "val_model")
gpu = choice(c[2], "GPU", choices("gpu"), d.gpu, "val_gpu")
tp = choice(c[3], "Tensor parallelism", choices("tp"), d.tp, "val_tp")
policy = choice(c[4], "Policy", choices("policy"), d.policy, "val_policy",
                format_func=policy_label)
knobs = replace(knobs_from_point({**base, "policy": {**base["policy"], "name": policy}}),
                model=model, gpu=gpu, tp=tp)

path = upload("Measured run: request records (CSV/Parquet, contract 4), GuideLLM "
              "benchmarks.json, AIPerf profile_export.jsonl or a vLLM bench result JSON "
              "(--save-detailed)", ("csv", "parquet", "pq", "json", "jsonl"), "measured_file")
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
for note in measured.notes:
    st.caption(note)
has_arrivals = not measured.table["arrival_s"].isna().any()
rate = measured.rate or knobs.rate
if not has_arrivals:
    refill("val_rate", f"{name}:{measured.source}", ("val_rate",))  # refilled per file
    rate = float(number(st, "Arrival rate to replay at (req/s; the file has no arrival times)",
                        "rate", rate, "val_rate", 0.5))
trace = str(guarded("Workload", lambda: replay_trace(measured)))
sim_knobs = replace(knobs, trace=trace, arrival="trace" if has_arrivals else "poisson",
                    rate=rate, num_requests=len(measured.table),
                    rescale_trace=False)  # replay measured arrival times as they are

scenario = apply_knobs(base, sim_knobs)
with st.spinner("Simulating the measured workload..."):
    out = guarded("Simulation", lambda: cached_run(scenario))
simulated = latency_samples(out.requests, out.steps)
table = comparison(measured, out.summary, policy)
st.markdown(verdict(table))
st.caption(tolerance_text())
shown = table.drop(columns=["policy", "load"]).assign(ok=table["ok"].map({True: "ok",
                                                                          False: "MISS"}))
st.dataframe(shown.style.format({"measured": "{:.4g}", "simulated": "{:.4g}",
                                 "relative_error": "{:+.1%}", "tolerance": "{:.0%}"}),
             hide_index=True)
plot(overlay_cdfs(measured.samples, simulated), "overlay")
if "itl" not in measured.samples:
    st.caption(f"{measured.source} carries no per-token times, so ITL is not compared.")

st.subheader("Fit host costs to this run")
st.caption("`servesim calibrate --from-run` on this file (and any more runs of this "
           "deployment): a time scale on the profile's steps and the stack's host costs, "
           "fitted request by request (docs/calibration.md), each term with how firmly the "
           "runs pin it: at 95% shared or more they cannot tell it from its partner. With "
           "two runs or more each is also predicted by a fit on the others (held out).")
more = upload_many("More runs of this deployment (optional; e.g. a burst beside a paced run)",
                   ("csv", "parquet", "pq", "json", "jsonl"), "val_fit_more")
runs = (str(path), *(str(p) for p in more))
auto = st.checkbox("Choose the terms by leave-one-run-out error (two runs or more)",
                   value=False, key="val_fit_auto", disabled=len(runs) < 2)
terms = st.multiselect("Terms to fit", list(FIT_TERMS), default=list(PAGE_TERMS),
                       key="val_fit_terms", disabled=auto and len(runs) >= 2)
chosen = None if auto and len(runs) >= 2 else tuple(terms)
asked = (runs, chosen, repr(sorted(scenario.items())))
if st.button("Fit", key="val_fit", disabled=chosen == ()):
    st.session_state["val_fit_asked"] = asked
if chosen != () and st.session_state.get("val_fit_asked") == asked:
    with st.spinner("Fitting (each candidate replays the runs)..."):
        got = guarded("Fit", lambda: cached_fit(scenario, runs, chosen))
    st.caption(f"fitted {', '.join(got.terms['term'])} on {len(runs)} run(s): "
               f"{got.replays} replays, {got.wall_s:.1f} s")
    st.dataframe(got.terms.style.format(
        {"value": "{:.4g}", "shared": "{:.0%}", "leave-one-run-out low": "{:.4g}",
         "leave-one-run-out high": "{:.4g}"}, na_rep="-"), hide_index=True)
    if got.measure_next:
        st.caption(got.measure_next)
    st.dataframe(got.errors.style.format(
        {"before": "{:+.1%}", "after": "{:+.1%}", "held out": "{:+.1%}"}, na_rep="-"),
        hide_index=True)
    st.download_button("Calibrated profile (JSON)", got.profile_json,
                       file_name=f"{Path(str(path)).stem}-calibrated.json",
                       mime="application/json", key="val_fit_profile")
