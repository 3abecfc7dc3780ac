"""Policy and hardware comparison: logic (table, recommendation, cost) and AppTest pages."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from dashboard.logic.compare import max_rate_met, parse_rates, policy_knobs, recommend
from dashboard.logic.hardware import cost_per_million, hardware_table
from dashboard.logic.scenario_form import collapse, load_shipped


def _table(rows):
    return pd.DataFrame(rows, columns=["policy", "rate", "slo_met", "request_goodput",
                                       "p99_ttft_ms"])


def test_parse_rates():
    assert parse_rates("10, 2;5, 2") == [2.0, 5.0, 10.0]
    with pytest.raises(ValueError, match="'x' is not a number"):
        parse_rates("1, x")
    with pytest.raises(ValueError, match="> 0"):
        parse_rates("0")


def test_max_rate_met_stops_at_the_first_miss():
    t = _table([("a", 1, True, 1, 1), ("a", 2, False, 1, 1), ("a", 3, True, 1, 1),
                ("b", 1, False, 1, 1)])
    assert max_rate_met(t) == {"a": 1.0, "b": None}


def test_recommendation_names_policy_knobs_and_rate():
    knobs = policy_knobs(collapse(load_shipped("chat")), ["static", "chunked"])
    t = _table([("static", 2, False, 0, 900), ("static", 5, False, 0, 950),
                ("chunked", 2, True, 2, 100), ("chunked", 5, False, 3, 600)])
    text = recommend(t, knobs, "P99 TTFT ≤ 500 ms")
    assert "chunked prefill" in text and "max_num_batched_tokens=2048" in text
    assert "up to **2 req/s**" in text and "static (padded batches): at no rate tried" in text
    none = recommend(_table([("static", 2, False, 0, 900), ("chunked", 2, False, 0, 700)]),
                     knobs, "X")
    assert none.startswith("No policy meets X") and "P99 TTFT 700 ms" in none


def test_cost_per_million_tokens():
    # 2 GPUs at $3/h serving 1000 tok/s: $6/h / 3.6M tokens per hour = $1.667 per M
    assert cost_per_million(3.0, 2, 1000.0) == pytest.approx(6 / 3.6)
    assert math.isnan(cost_per_million(3.0, 1, 0.0))
    s = {"gpu": "h100-sxm", "num_gpus": 2, "output_throughput": 1000.0,
         "total_token_throughput": 4000.0, "slo_met": True}
    row = hardware_table([s], {"h100-sxm": 3.0}).iloc[0]
    assert row["output_tok_s_per_gpu"] == 500 and row["usd_per_m_total_tokens"] == pytest.approx(
        6 / 14.4)


pytest.importorskip("streamlit")
from dashboard_support import array, axis_titles, figures, page, trace_names  # noqa: E402


def test_policy_page_series_slo_lines_and_recommendation():
    at = page("policies").run()
    assert not at.exception, at.exception
    figs = figures(at)
    names = trace_names(figs["TTFT vs rate"])
    for policy in ("static", "dynamic", "continuous", "chunked prefill"):
        assert f"{policy} P50" in names and f"{policy} P99" in names
    assert "SLO 500 ms" in names and "SLO 50 ms" in trace_names(figs["TPOT vs rate"])
    assert "chunked prefill goodput" in trace_names(figs["Throughput and goodput vs rate"])
    assert all(all(axis_titles(spec)) for spec in figs.values())
    text = " ".join(m.value for m in at.markdown)
    assert "Recommended:" in text and "req/s" in text
    # P99 TTFT grows with rate for continuous batching
    ttft = figs["TTFT vs rate"]["data"][names.index("continuous P99")]
    y = array(ttft["y"])
    assert y[-1] > y[0]


def test_policy_page_tighter_slo_changes_the_recommendation():
    at = page("policies").run()
    at.multiselect(key="pol_policies").set_value(["continuous", "chunked"]).run()
    at.number_input(key="pol_ttft_ms").set_value(100.0).run()
    assert not at.exception
    assert "No policy meets P99 TTFT ≤ 100 ms" in " ".join(m.value for m in at.markdown)


def test_policy_page_bad_rates_show_an_error():
    at = page("policies").run()
    at.text_input(key="pol_rates").set_value("2, fast").run()
    assert not at.exception
    assert "'fast' is not a number" in " ".join(e.value for e in at.error)


def test_hardware_page_catalogue_and_editable_price():
    at = page("hardware").run()
    assert not at.exception, at.exception
    figs = figures(at)
    gpus = list(figs["Cost per million tokens"]["data"][0]["x"])
    assert {"a100-80gb", "h100-sxm", "h200"} <= set(gpus) and len(gpus) == 8
    assert trace_names(figs["TTFT by GPU"]) == ["P50 TTFT", "P99 TTFT"]
    assert all(all(axis_titles(spec)) for spec in figs.values())
    cost = array(figs["Cost per million tokens"]["data"][0]["y"])[gpus.index("h200")]
    at.number_input(key="hw_price_h200").set_value(7.0).run()
    new = array(figures(at)["Cost per million tokens"]["data"][0]["y"])[gpus.index("h200")]
    assert new == pytest.approx(cost * 2)


def test_hardware_page_skips_gpus_where_the_model_does_not_fit():
    at = page("hardware").run()
    at.selectbox(key="hw_model").set_value("llama-3.1-70b").run()
    assert "h200 skipped" in " ".join(w.value for w in at.warning)  # 140 GB of bf16 weights
    at.selectbox(key="hw_tp").set_value(2).run()
    assert not at.exception
    warnings = " ".join(w.value for w in at.warning)
    assert "rtx4090 skipped" in warnings
    gpus = figures(at)["TTFT by GPU"]["data"][0]["x"]
    assert "rtx4090" not in gpus and "h200" in gpus
    assert np.all(np.isfinite(array(figures(at)["TTFT by GPU"]["data"][0]["y"])))
