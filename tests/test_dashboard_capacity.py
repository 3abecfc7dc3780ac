"""The capacity page: its logic (prices, sample size, table, verdict, monotonicity) and
the page under AppTest (defaults, knobs that must move the answer, bad input)."""

from __future__ import annotations

import pytest

from dashboard.logic.capacity import (
    MemoryPointCache,
    default_rate,
    parse_prices,
    plan_scenario,
    plan_table,
    run_plan,
    settings_for,
    verdict,
)
from dashboard.logic.scenario_form import load_shipped
from simulator.capacity import sample_size
from simulator.capacity.margin import record_limits, under_reading
from simulator.slo import SLO
from simulator.track_record import deployment_record, point_record

SLO_500 = {"ttft_ms": 500.0, "tpot_ms": 50.0, "percentile": 99.0}
ONE = {"gpus": ["h100-sxm"], "tp": [1], "policies": ["chunked"]}
PRICES = {"h100-sxm": 2.99, "h200": 3.79}


def _plan(target=20.0, slo=SLO_500, axes=ONE, prices=PRICES, store=None, n=200):
    raw = plan_scenario(load_shipped("capacity"), "llama-3.1-8b")
    return run_plan(raw, axes, target, slo, prices, n, {} if store is None else store)


def test_parse_prices_names_the_bad_field():
    assert parse_prices({"h200": "3.5", "l40s": " 1 "}) == {"h200": 3.5, "l40s": 1.0}
    with pytest.raises(ValueError, match="price for h200: 'abc' is not a number"):
        parse_prices({"h100-sxm": "2", "h200": "abc"})
    with pytest.raises(ValueError, match="price for l40s: '-1' must be a number >= 0"):
        parse_prices({"l40s": "-1"})


def test_sample_size_is_the_requests_per_point_and_scenario_count_is_dropped():
    assert sample_size(SLO(ttft_ms=500), settings_for(500)) == 500
    assert settings_for(500).max_cluster_requests == 5000
    chat = load_shipped("chat")
    assert "num_requests" not in plan_scenario(chat, "qwen2.5-7b")["workload"]
    assert plan_scenario(chat, "qwen2.5-7b")["model"]["name"] == "qwen2.5-7b"
    assert default_rate(chat) == 20.0 and default_rate(load_shipped("capacity")) == 40.0


def test_points_are_reused_and_prices_scale_cost():
    store: dict = {}
    first = _plan(store=store)
    again = _plan(store=store, prices={"h100-sxm": 5.98})
    assert first.computed > 0 and again.computed == 0 and again.reused == first.computed
    a, b = plan_table(first).iloc[0], plan_table(again).iloc[0]
    assert b["usd_per_hour"] == pytest.approx(2 * a["usd_per_hour"])
    assert b["replicas"] == a["replicas"]
    seen = []
    cache = MemoryPointCache(store, seen.append)
    assert cache.load(next(iter(store))) is not None and seen == [1]


def test_stricter_slo_and_higher_rate_never_cost_less():
    store: dict = {}
    base = _plan(store=store).best
    strict = _plan(store=store, slo={**SLO_500, "ttft_ms": 350.0}).best
    faster = _plan(store=store, target=40.0).best
    assert base is not None and faster is not None and strict is not None
    assert faster.replicas >= base.replicas and faster.usd_per_hour >= base.usd_per_hour
    assert strict.replicas >= base.replicas and strict.usd_per_hour >= base.usd_per_hour
    assert _plan(store=store, slo={**SLO_500, "ttft_ms": 200.0}).best is None  # none meets it


def test_verdict_names_best_or_closest_miss():
    ok = _plan()
    assert verdict(ok).startswith("**Best for 20 req/s") and "per hour" in verdict(ok)
    none = _plan(slo={**SLO_500, "ttft_ms": 5.0})
    text = verdict(none)
    assert text.startswith("**No candidate meets the SLO**")
    assert "Closest: **h100-sxm x1 bf16 chunked**, which misses p99_ttft_ms by" in text
    assert plan_table(none).iloc[0]["status"] == "misses SLO"


def test_a_record_margin_plans_against_the_records_targets():
    result = run_plan(plan_scenario(load_shipped("capacity"), "llama-3.1-8b"), ONE, 20.0,
                      SLO_500, PRICES, 200, {}, record_margin=0.8)
    table = plan_table(result)
    point = {**load_shipped("capacity"), "hardware": {"gpu": "h100-sxm", "tp": 1}}
    records = point_record(point, rate=20.0, limits=record_limits(SLO.from_dict(SLO_500)),
                           tails=True)
    factor = {r.figure: min(1.0, 1.0 + (under_reading(r.errors, 0.8) or 0.0))
              for r in records}
    # P99 targets: each latency's published P99s where runs like it have them, else its mean
    factor = {m: factor.get(f"{m}_p99", factor[m]) for m in ("ttft", "tpot")}
    assert table["ttft_target_planned_ms"].iloc[0] == pytest.approx(500 * factor["ttft"])
    assert table["tpot_target_planned_ms"].iloc[0] == pytest.approx(50 * factor["tpot"])
    assert factor["tpot"] < 1  # this record does tighten TPOT
    assert result.record_margin == 0.8
    assert "tpot_target_planned_ms" not in plan_table(_plan()).columns  # no margin: none


def test_no_gpu_is_a_named_error():
    with pytest.raises(ValueError, match="choose at least one of gpus"):
        _plan(axes={**ONE, "gpus": []})


pytest.importorskip("streamlit")
from dashboard_support import array, axis_titles, figures, page, trace_names  # noqa: E402


def _text(at) -> str:
    return " ".join(m.value for m in at.markdown)


def test_capacity_page_defaults_then_knobs_and_bad_input():
    at = page("capacity").run()
    assert not at.exception, at.exception
    assert "**Best for 40 req/s" in _text(at)
    assert "record_margin" not in _text(at)  # no module-level string printed by Streamlit
    # the best candidate's track record: its GPU, the scenario's (Poisson) load
    assert "Track record of the best candidate on published runs like it" in \
        [e.label for e in at.expander]
    best_gpu = at.dataframe[0].value.iloc[0]["candidate"].split()[0]
    record = at.table[0].value
    want = deployment_record("none", best_gpu, "rate", tails=True)  # and the P99s published
    assert list(record["published runs"]) == [r.cases for r in want]
    assert list(record["figure"]) == ["TTFT", "TPOT", "output tok/s", "P99 TTFT", "P99 TPOT",
                                      "P99 ITL"]
    assert any(c.value.startswith(f"headroom of {best_gpu} ") and "at 40 req/s: P99 TTFT" in c.value
               for c in at.caption)
    figs = figures(at)
    pareto = figs["Cost vs P99 TTFT"]
    assert trace_names(pareto) == ["meet the SLO", "miss the SLO", "Pareto front",
                                   "TTFT target 500 ms"]
    front = pareto["data"][2]
    assert len(front["text"]) >= 1 and all(all(axis_titles(s)) for s in figs.values())
    assert "US$ per hour" in axis_titles(pareto)[0] and "(ms)" in axis_titles(pareto)[1]
    bars = figs["Max sustainable rate per replica"]["data"][0]
    assert len(bars["x"]) == 6 and array(bars["y"]).max() > 0

    def h200_cost(app) -> float:
        table = app.dataframe[0].value
        return float(table.loc[table["candidate"] == "h200 x1 bf16 chunked",
                               "usd_per_hour"].iloc[0])

    cost = h200_cost(at)
    at.text_input(key="cap_price_h200").set_value("7.58").run()  # shipped: 3.79
    assert h200_cost(at) == pytest.approx(2 * cost)

    best = at.dataframe[0].value.iloc[0]
    at.number_input(key="cap_rate").set_value(80.0).run()
    assert not at.exception
    higher = at.dataframe[0].value.iloc[0]
    assert higher["usd_per_hour"] >= best["usd_per_hour"] and "80 req/s" in _text(at)

    at.text_input(key="cap_price_h200").set_value("abc").run()
    assert not at.exception
    assert "price for h200: 'abc' is not a number" in " ".join(e.value for e in at.error)
    at.text_input(key="cap_price_h200").set_value("3.79").run()
    assert not at.error and at.dataframe

    at.multiselect(key="cap_gpus").set_value([]).run()
    assert not at.exception
    assert "choose at least one GPU" in " ".join(e.value for e in at.error)
    at.multiselect(key="cap_gpus").set_value(["h100-sxm"]).run()
    assert not at.error and len(at.dataframe[0].value) == 2
    # a margin from the track record: the targets each candidate was sized against
    assert "ttft_target_planned_ms" not in at.dataframe[0].value.columns
    at.selectbox(key="cap_margin").set_value("cover 80%").run()
    assert not at.exception and not at.error
    planned = at.dataframe[0].value
    assert (planned["tpot_target_planned_ms"] <= 50).all()
    assert (planned["ttft_target_planned_ms"] <= 500).all()
    assert any("sized against its targets less servesim's error" in c.value
               for c in at.caption)


def test_a_moe_model_plans_attention_data_parallel_candidates():
    at = page("capacity").run()
    assert "cap_attention_dp" not in [m.key for m in at.multiselect]  # the chat demo: dense
    at.selectbox(key="cap_scenario").set_value("moe-attention-dp").run()
    assert not at.exception
    assert at.multiselect(key="cap_attention_dp").value == [4]  # the scenario's own ranks
    at.multiselect(key="cap_gpus").set_value(["h200"])
    at.multiselect(key="cap_dtypes").set_value(["fp8"])
    at.multiselect(key="cap_policies").set_value(["continuous"])
    at.number_input(key="cap_rate").set_value(2.0)
    at.number_input(key="cap_requests_per_point").set_value(200)
    at.multiselect(key="cap_tp").set_value([1, 4])
    at.multiselect(key="cap_attention_dp").set_value([1, 4]).run()
    assert not at.exception and not at.error
    table = at.dataframe[0].value.set_index("candidate")
    # four candidates: tp 1 (does not fit), tp 4, DEP 4, and tp 4 x 4 ranks (refused)
    assert set(table.index) == {"h200 x1 fp8 continuous", "h200 x4 fp8 continuous",
                                "h200 x4 attention-DP4 fp8 continuous",
                                "h200 x16 attention-DP4 fp8 continuous"}
    assert table.loc["h200 x4 attention-DP4 fp8 continuous", "status"] == "meets SLO"
    assert table.loc["h200 x16 attention-DP4 fp8 continuous", "status"] == "infeasible"
