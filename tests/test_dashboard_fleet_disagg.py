"""The Fleet page's disaggregated prefill/decode view: its knobs round-trip the shipped
scenarios and write exactly their keys, the aggregated counterpart is the same GPUs, the
TTFT split adds up, and the page shows the pools beside the aggregated run."""

from __future__ import annotations

import copy
from dataclasses import replace

import numpy as np
import pytest
from dashboard_support import figures, metrics, page, trace_names

from dashboard.logic.fleet import apply_fleet, fleet_from_point, scale_time
from dashboard.logic.fleet_disagg import (
    aggregated,
    compare_table,
    disagg_from_point,
    transfer_tiles,
    ttft_parts,
    write_disagg,
)
from dashboard.logic.run import simulate
from dashboard.logic.scenario_form import collapse, load_shipped
from simulator.scenario_types import Scenario

PLAIN = {"model": {"name": "llama-3.1-8b"}, "hardware": {"gpu": "h100-sxm"},
         "policy": {"name": "chunked"}, "workload": {"rate": 5.0, "num_requests": 50}}


@pytest.mark.parametrize("name", ["disaggregated-h100", "disaggregated-slow-link"])
def test_a_shipped_disaggregated_scenario_round_trips_unchanged(name):
    point = collapse(load_shipped(name))
    out = write_disagg(apply_fleet(point, fleet_from_point(point)), disagg_from_point(point))
    assert out == point


def test_on_writes_exactly_its_keys_and_off_keeps_the_section_off():
    k = disagg_from_point(PLAIN)
    assert k.on is False and write_disagg(PLAIN, k) == PLAIN
    out = write_disagg(PLAIN, replace(k, on=True))
    assert out == {**PLAIN, "disaggregated": {}}
    assert Scenario.from_dict(out).disaggregated.enabled
    out = write_disagg(PLAIN, replace(k, on=True, decode_replicas=3, link="ideal"))
    assert out["disaggregated"] == {"decode_replicas": 3, "link": "ideal"}
    point = collapse(load_shipped("disaggregated-h100"))
    off = write_disagg(point, replace(disagg_from_point(point), on=False))
    assert off["disaggregated"] == {**point["disaggregated"], "enabled": False}
    assert disagg_from_point(off).on is False


def test_aggregated_is_the_same_gpus_as_one_fleet():
    point = collapse(load_shipped("disaggregated-h100"))  # 2 prefill + 2 decode, tp 1
    together = aggregated(point)
    assert together["cluster"] == {"replicas": 4}
    assert together["disaggregated"]["enabled"] is False
    other = copy.deepcopy(point)
    other["disaggregated"]["decode_gpu"] = "h200"
    assert aggregated(other) is None


def test_ttft_split_adds_up_and_an_ideal_link_costs_nothing():
    point = scale_time(collapse(load_shipped("disaggregated-h100")), 0.05)  # 150 requests
    out = simulate(point)
    parts = ttft_parts(out.requests)
    assert len(parts["TTFT"]) == out.summary["kv_transfers"]
    waited = parts.get("waiting for decode KV", 0.0)
    assert parts["to prefill done"] + waited + parts["KV transfer"] == pytest.approx(
        parts["TTFT"], abs=1e-6)
    tiles = dict((label, value) for label, value, _ in transfer_tiles(out.summary))
    assert tiles["Link busy"].endswith("%") and "Decode pool busy" in tiles
    point["disaggregated"]["link"] = "ideal"
    ideal = ttft_parts(simulate(point).requests)
    assert np.all(ideal["KV transfer"] == 0.0)
    table = compare_table(out.summary, None)
    assert table["deployment"].tolist() == ["disaggregated"] and table["GPUs"][0] == 4
    assert ttft_parts(out.requests.drop(columns=["kv_transfer_s"])) == {}


def test_page_shows_the_pools_beside_the_aggregated_run_and_switches_off():
    at = page("fleet")
    at.session_state["fl_scenario"] = "disaggregated-h100"
    at.session_state["_fl_source"] = "shipped:disaggregated-h100"
    at.session_state["fl_scale"] = 0.05
    at.run()
    assert not at.exception and not at.error
    assert at.dataframe[0].value["deployment"].tolist() == ["disaggregated", "aggregated"]
    assert trace_names(figures(at)["TTFT split: prefill pool and KV transfer"]) == [
        "to prefill done", "waiting for decode KV", "KV transfer", "TTFT"]
    assert "Link busy" in metrics(at)
    at.selectbox(key="fl_link").set_value("ideal").run()
    assert metrics(at)["KV transfer mean / p99"][0] == "0.0 / 0.0 ms"
    at.checkbox(key="fl_disagg").uncheck().run()
    assert "Link busy" not in metrics(at) and not at.error
    assert at.checkbox(key="fl_autoscale") is not None  # the fleet's own knobs are back
