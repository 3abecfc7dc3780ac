"""Capacity planning: the cheapest deployment that serves a target rate within an SLO.

A thin page over ``dashboard.logic.capacity`` (which calls ``simulator.capacity.plan``)
and ``dashboard.figures_capacity``. Plans are cached by their inputs; finished points are
kept for the life of the server, so a new rate or new prices re-run only cluster checks.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import Any

import streamlit as st

from dashboard import figures_capacity
from dashboard.logic.capacity import (
    DEFAULT_GPUS,
    DEFAULT_POLICIES,
    DEFAULT_REQUESTS,
    DEFAULT_SCENARIO,
    default_rate,
    expected_points,
    parse_prices,
    plan_scenario,
    plan_table,
    plannable_scenarios,
    run_plan,
    settings_for,
    verdict,
)
from dashboard.logic.form_fields import choices
from dashboard.logic.hardware import CATALOGUE_GPUS
from dashboard.logic.scenario_form import default, load_shipped, policy_label
from dashboard.logic.track import record_rows
from dashboard.ui import guarded, plot
from simulator.capacity import PlanResult, load_prices
from simulator.capacity.headroom import headroom_lines
from simulator.specs import MODELS, WEIGHT_DTYPE_BYTES
from simulator.track_record import point_record

# the margin choices: label -> record_margin (simulator/capacity/margin.py); a comment, not
# a docstring: Streamlit's magic would print a bare string on the page
MARGINS = {"none: the targets as given": None, "cover 50% of published runs like it": 0.5,
           "cover 80%": 0.8, "cover 95%": 0.95}
SCENARIO_KEYS = ("cap_model", "cap_rate", "cap_ttft_ms", "cap_tpot_ms", "cap_percentile",
                 "cap_dtypes")


@st.cache_resource
def _point_store() -> dict[str, dict[str, Any]]:
    """Finished points (key -> summary), shared by every session of this server."""
    return {}


@st.cache_data(show_spinner=False, max_entries=64)
def cached_plan(raw: dict[str, Any], axes: dict[str, list[Any]], target_rps: float,
                slo: dict[str, float], prices: dict[str, float], requests_per_point: int,
                _expected_points: int, record_margin: float | None = None
                ) -> tuple[PlanResult, float]:
    """``run_plan`` cached by its inputs, with a progress bar; also returns its seconds.

    The bar is made (and emptied) in here: Streamlit replays the elements a cached
    function drew, which only works for blocks it created itself.
    """
    bar = st.progress(0.0, text="Planning...")

    def tick(done: int) -> None:
        bar.progress(min(done / _expected_points, 0.99),
                     text=f"Planning: {done} points simulated (roughly {_expected_points})")

    start = time.perf_counter()
    try:
        result = run_plan(raw, axes, target_rps, slo, prices, requests_per_point,
                          _point_store(), tick, record_margin)
    finally:
        bar.empty()
    return result, time.perf_counter() - start


def _reset() -> None:
    for key in SCENARIO_KEYS:
        st.session_state.pop(key, None)


def _pick(label: str, options: Sequence[Any], default: Any, key: str, where: Any = st,
          **kw: Any) -> Any:
    return where.selectbox(label, list(options), index=list(options).index(default)
                           if default in options else 0, key=key, **kw)


def _prices(gpus: Sequence[str], shipped: Mapping[str, float]) -> dict[str, float]:
    table = load_prices()
    with st.expander("Prices (US$ per GPU-hour, on demand; edit them)", expanded=False):
        st.caption(f"Prefilled from the shipped table, dated {table.date}: {table.source}.")
        cols = st.columns(4)
        texts = {g: cols[i % 4].text_input(g, f"{shipped.get(g, 0.0):g}",
                                           key=f"cap_price_{g}")
                 for i, g in enumerate(gpus)}
    return guarded("Prices", lambda: parse_prices(texts))


st.title("Capacity planning")
st.caption("Which GPU, tensor parallelism and policy serve a target rate within the SLO for "
           "the least money? For each candidate: the highest rate one replica sustains, the "
           "replicas that needs, a check of the whole cluster at the target rate, and the "
           "cost (docs/capacity.md).")
names = plannable_scenarios()
c = st.columns(4)
name = _pick("Workload from scenario", names, DEFAULT_SCENARIO, "cap_scenario", c[0],
             on_change=_reset)
raw = load_shipped(name)
slo0 = raw.get("slo", {})
model = _pick("Model", list(MODELS), raw.get("model", {}).get("name"), "cap_model", c[1])
rate = float(c[2].number_input("Target rate (req/s)", 0.01, 100_000.0, default_rate(raw), 5.0,
                               key="cap_rate"))
n = int(c[3].number_input("Requests per point", 100, 20_000, DEFAULT_REQUESTS, 100,
                          key="cap_requests_per_point"))
c = st.columns(4)
ttft = float(c[0].number_input("TTFT target (ms)", 1.0, 1e6,
                               float(slo0.get("ttft_ms", default("slo.ttft_ms"))),
                               50.0, key="cap_ttft_ms"))
tpot = float(c[1].number_input("TPOT target (ms)", 1.0, 1e5,
                               float(slo0.get("tpot_ms", default("slo.tpot_ms"))),
                               5.0, key="cap_tpot_ms"))
q = float(_pick("Percentile", [50.0, 90.0, 95.0, 99.0],
                float(slo0.get("percentile", default("slo.percentile"))), "cap_percentile",
                c[2]))
dtype0 = raw.get("model", {}).get("weight_dtype", "bf16")
dtypes = c[3].multiselect("Weight dtypes", list(WEIGHT_DTYPE_BYTES),
                          dtype0 if isinstance(dtype0, list) else [dtype0], key="cap_dtypes")
cand = st.columns([2, 1, 2])
gpus = cand[0].multiselect("GPUs", list(CATALOGUE_GPUS), list(DEFAULT_GPUS), key="cap_gpus")
tps = cand[1].multiselect("Tensor parallelism", [1, 2, 4, 8], [1], key="cap_tp")
ranks, dp0 = [1], raw.get("hardware", {}).get("attention_dp", 1)
if MODELS[model].num_experts > 1:  # attention data parallel spreads a MoE model's experts
    ranks = cand[1].multiselect("Attention DP ranks (tp 1)", [1, 2, 4, 8],
                                [dp0] if dp0 in (1, 2, 4, 8) else [1],
                                key="cap_attention_dp",
                                help="each GPU an attention rank with its own requests, the "
                                     "experts spread over the ranks (TensorRT-LLM's DEP); "
                                     "a candidate with tp > 1 and ranks > 1 is infeasible")
policies = cand[2].multiselect("Policies", list(choices("policy")), list(DEFAULT_POLICIES),
                            key="cap_policies", format_func=policy_label)
margin_label = st.selectbox(
    "Margin from servesim's track record", list(MARGINS), key="cap_margin",
    help="size each candidate against its targets less servesim's error on the published "
         "runs most like it (measured within the targets; at P90 and above, its error on "
         "their published P99, P95 or P90, the nearest to the target's, where they have "
         "one), so the answer would hold had "
         "servesim erred as on that share of them (servesim plan --record-margin; "
         "docs/capacity.md)")
prices = _prices(gpus, load_prices().usd_per_gpu_hour)
st.info(f"Each point simulates {n} requests, so a P{q:g} rests on about "
        f"{n * (1 - q / 100):.0f} requests beyond it and is noisy: a rerun with more requests "
        "may need a replica more or less. `servesim plan` uses 10,000 per P99 point.")
for label, chosen in (("GPU", gpus), ("tensor-parallel degree", tps), ("policy", policies),
                      ("weight dtype", dtypes), ("attention DP rank count", ranks)):
    if not chosen:
        st.error(f"Candidates: choose at least one {label}.")
        st.stop()

axes: dict[str, list[Any]] = {"gpus": gpus, "tp": tps, "attention_dp": ranks,
                              "policies": policies, "dtypes": dtypes}
slo = {"ttft_ms": ttft, "tpot_ms": tpot, "percentile": q}
expected = expected_points(len(gpus) * len(tps) * len(ranks) * len(policies) * len(dtypes),
                           settings_for(n))
started = time.perf_counter()
result, seconds = guarded("Plan", lambda: cached_plan(plan_scenario(raw, model), axes, rate, slo,
                                                     prices, n, expected,
                                                     MARGINS[margin_label]))
from_cache = time.perf_counter() - started < seconds / 2
table = plan_table(result)
st.markdown(verdict(result))
left, right = st.columns(2)
with left:
    plot(figures_capacity.pareto_figure(table, rate, ttft), "cap_pareto")
with right:
    plot(figures_capacity.max_rate_bars(table, rate), "cap_max_rate")
st.dataframe(table, hide_index=True)
if result.record_margin is not None:
    st.caption(f"Each candidate was sized against its targets less servesim's error on the "
               f"published runs like it, covering {result.record_margin:.0%} of them "
               "(the *_target_planned_ms columns; docs/capacity.md, \"How far to trust the "
               "answer\").")
answer = result.best or result.closest
if answer is not None:  # its own GPU and GPUs a replica, the scenario's stack and load
    hardware = {**raw.get("hardware", {}), "gpu": answer.gpu, "tp": answer.tp,
                "attention_dp": answer.labels.get("attention_dp", 1)}
    records = point_record({**raw, "hardware": hardware}, rate=rate, tails=True,
                           percentile=q)  # the tails nearest the SLO's, as its headroom reads
    if records:
        which = "best" if result.best else "closest"
        with st.expander(f"Track record of the {which} candidate on published runs like it"):
            st.table(record_rows(records))
            if result.best is not None:  # its unused share of each target, against the record
                for line in headroom_lines(result.best, rate, records, result.given_slo):
                    st.caption(line)
            st.caption(f"{answer.name}: how servesim's replays of held-out published serving "
                       "runs of its stack, GPU, GPUs a replica and kind of load (else a wider "
                       "group: the last column) read; a negative median error is lower than "
                       "measured. Leave headroom under a target the record misses often "
                       "(docs/metrics.md, \"Track record\").")
st.caption(f"Planned in {seconds:.1f} s{' (this answer is from the cache)' if from_cache else ''}"
           ": "
           f"{result.computed} points simulated, "
           f"{result.reused} reused from earlier plans on this server. Cost = replicas x GPUs a "
           "replica (TP x attention DP ranks) x price; $ per million output tokens at the "
           "target rate, from the cluster check.")
