"""Prefix caching and speculative decoding in the dashboard's form (issue 14 item 3).

The form reads ``[kv] prefix_caching``, the workload's prefix knobs and ``[speculative]``
from a scenario and writes exactly those keys back; the Explorer and the Policy comparison
page show the features' metrics when they are on. Expected values are the shipped
scenarios' (docs/prefix-caching.md, docs/speculative.md) or worked by hand in comments.
"""

from __future__ import annotations

import copy
from dataclasses import replace

import pytest

from dashboard.logic.compare import comparison_table, policy_knobs, with_features
from dashboard.logic.feature_knobs import (
    PrefixKnobs,
    SpecKnobs,
    draft_layer_bounds,
    draft_models,
    expected_tokens_per_step,
)
from dashboard.logic.form_fields import form_problems
from dashboard.logic.run import simulate
from dashboard.logic.scenario_form import apply_knobs, collapse, knobs_from_point, load_shipped
from simulator.deployment import resolve
from simulator.errors import ConfigError

PREFIX_KEYS = ("system_prompt_tokens", "system_prompt_share", "system_prompts", "session_turns")


def _point(name: str) -> dict:
    return collapse(load_shipped(name))


def _round_trip(point: dict) -> dict:
    return apply_knobs(point, knobs_from_point(point))


def test_speculative_scenario_is_read_and_round_trips_unchanged():
    point = _point("speculative-chat")  # num_tokens [0, 4]: the explorer runs 4
    spec = knobs_from_point(point).spec
    assert spec == SpecKnobs(on=True, num_tokens=4, acceptance=0.7, use_counts=False,
                             draft_kind="model", draft_model="llama-3.1-8b", draft_layers=20)
    ran = _round_trip(point)
    assert ran["speculative"] == point["speculative"] == {
        "num_tokens": 4, "acceptance": 0.7, "draft": "llama-3.1-8b"}
    assert "kv" not in ran
    resolve(ran)


@pytest.mark.parametrize(("name", "expected"), [
    ("prefix-caching-system-prompt", PrefixKnobs(True, 1000, 1.0, 1)),
    ("prefix-caching-multiturn", PrefixKnobs(True, 500, 0.33, 6)),
    ("prefix-caching-mooncake", PrefixKnobs(True, 2000, 1.0, 4)),
])
def test_prefix_scenarios_are_read_and_round_trip_unchanged(name, expected):
    point = _point(name)
    assert knobs_from_point(point).prefix == expected
    ran = _round_trip(point)
    assert ran["kv"] == point["kv"] == {"prefix_caching": True}
    for key in (*PREFIX_KEYS, "think_time_s", "arrival", "concurrency"):
        assert ran["workload"].get(key) == point["workload"].get(key), key
    assert "speculative" not in ran
    resolve(ran)


def test_a_scenario_without_them_gains_no_key():
    point = _point("chat")
    ran = _round_trip(point)
    assert "kv" not in ran and "speculative" not in ran
    assert not set(PREFIX_KEYS) & set(ran["workload"])
    assert knobs_from_point(point).prefix == PrefixKnobs(False, 0, 1.0, 1)
    assert not knobs_from_point(point).spec.on


def test_turning_speculation_on_writes_exactly_its_section():
    point = _point("chat")
    k = knobs_from_point(point)
    assert (k.spec.num_tokens, k.spec.acceptance, k.spec.draft_kind) == (4, 0.7, "layers")
    assert k.spec.draft_layers == 8  # a quarter of llama-3.1-8b's 32 layers
    off, on = apply_knobs(point, k), apply_knobs(point, replace(k, spec=replace(k.spec, on=True)))
    assert on["speculative"] == {"num_tokens": 4, "acceptance": 0.7, "draft_layers": 8}
    assert {key: v for key, v in on.items() if key != "speculative"} == off
    model = replace(k.spec, on=True, num_tokens=2, acceptance=0.5, draft_kind="model",
                    draft_model="llama-3.1-70b")
    assert apply_knobs(point, replace(k, spec=model))["speculative"] == {
        "num_tokens": 2, "acceptance": 0.5, "draft": "llama-3.1-70b"}
    assert resolve(on).policy.num_speculative_tokens == 4


def test_turning_prefix_caching_on_writes_exactly_its_keys():
    point = _point("chat")
    k = knobs_from_point(point)
    off = apply_knobs(point, k)
    on = apply_knobs(point, replace(k, prefix=PrefixKnobs(True, 1000, 0.5, 1)))
    assert on["kv"] == {"prefix_caching": True}
    assert {key: v for key, v in on["workload"].items() if key not in off["workload"]} == {
        "system_prompt_tokens": 1000, "system_prompt_share": 0.5}
    assert {key: v for key, v in on.items() if key not in ("kv", "workload")} == {
        key: v for key, v in off.items() if key != "workload"}
    # the cache alone: one key; a share of 1 (the default) is not written
    assert apply_knobs(point, replace(k, prefix=PrefixKnobs(True, 0, 1.0, 1)))["kv"] == {
        "prefix_caching": True}
    full = apply_knobs(point, replace(k, prefix=PrefixKnobs(False, 1000, 1.0, 1)))
    assert "kv" not in full and full["workload"]["system_prompt_tokens"] == 1000
    assert "system_prompt_share" not in full["workload"]


def test_turning_them_off_keeps_the_scenarios_section():
    point = _point("speculative-chat")
    k = knobs_from_point(point)
    ran = apply_knobs(point, replace(k, spec=replace(k.spec, on=False)))
    assert ran["speculative"] == {"num_tokens": 0, "acceptance": 0.7, "draft": "llama-3.1-8b"}
    assert resolve(ran).policy.num_speculative_tokens == 0
    point = _point("prefix-caching-multiturn")
    k = knobs_from_point(point)
    ran = apply_knobs(point, replace(k, prefix=replace(k.prefix, on=False)))
    assert ran["kv"] == {"prefix_caching": False}
    assert ran["workload"]["system_prompt_tokens"] == 500  # the same traffic, no cache
    # no system prompt: its share would be refused (prefix_knobs.py), so it goes too
    ran = apply_knobs(point, replace(k, prefix=replace(k.prefix, system_prompt_tokens=0)))
    assert ran["workload"]["system_prompt_tokens"] == 0
    assert "system_prompt_share" not in ran["workload"]
    resolve(ran)


def test_an_open_loop_drops_sessions_and_think_time_and_a_trace_every_prefix_knob():
    point = _point("prefix-caching-multiturn")  # closed, 64 clients, 6 turns, think 10 s
    k = knobs_from_point(point)
    ran = apply_knobs(point, replace(k, arrival="poisson", rate=2.0))
    wl = ran["workload"]
    assert "session_turns" not in wl and "think_time_s" not in wl and "concurrency" not in wl
    assert (wl["rate"], wl["system_prompt_tokens"], wl["system_prompt_share"]) == (2.0, 500, 0.33)
    resolve(ran)
    traced = apply_knobs(point, replace(k, arrival="poisson", trace="t.csv"))["workload"]
    assert not set(PREFIX_KEYS) & set(traced)


def test_measured_acceptance_counts_round_trip_and_can_be_replaced_by_alpha():
    point = _point("chat")
    point["speculative"] = {"num_tokens": 2, "acceptance_counts": [0.2, 0.3, 0.5],
                            "draft_layers": 4}
    k = knobs_from_point(point)
    assert (k.spec.on, k.spec.use_counts, k.spec.num_tokens) == (True, True, 2)
    assert _round_trip(point)["speculative"] == point["speculative"]
    alpha = apply_knobs(point, replace(k, spec=replace(k.spec, use_counts=False)))
    assert alpha["speculative"] == {"num_tokens": 2, "acceptance": 0.7, "draft_layers": 4}


def test_draft_choices_come_from_the_catalogue_and_the_target():
    # same 128,256-token vocabulary as llama-3.1-8b and no larger (Llama-3-8B: the same
    # 8.03B); the 32,000-token llamas and the 70B and 405B models are not offered
    assert draft_models("llama-3.1-8b") == ("llama-3-8b",)
    assert draft_models("llama-3.1-405b") == ("llama-3-8b", "llama-3-70b", "llama-3.1-8b",
                                              "llama-3.1-70b")
    assert draft_models("phi-2") == ()  # nothing shares its vocabulary: first layers only
    assert draft_layer_bounds("llama-3.1-8b") == (1, 31)
    assert draft_layer_bounds("smollm2-135m") == (1, 29)
    point = _point("chat")
    point["speculative"] = {"num_tokens": 4, "acceptance": 0.7, "draft_layers": 32}
    assert form_problems(point) == [
        "speculative.draft_layers = 32: llama-3.1-8b has 32 layers; a draft takes 1 to 31 of "
        "them"]
    point["speculative"] = {"num_tokens": 4, "acceptance": 1.5, "draft": "my/config.json"}
    problems = " | ".join(form_problems(point))
    assert "speculative.draft = 'my/config.json': the form offers catalogue models" in problems
    assert "speculative.acceptance = 1.5" in problems


def test_expected_tokens_per_step_closed_form():
    assert expected_tokens_per_step(0.7, 4) == pytest.approx((1 - 0.7 ** 5) / 0.3)  # 2.7731
    assert expected_tokens_per_step(1.0, 4) == 5.0 and expected_tokens_per_step(0.0, 4) == 1.0


def test_policy_page_turns_features_off_for_the_padded_policies():
    base = _point("chat")
    knobs = policy_knobs(base, ["static", "dynamic", "chunked"])
    prefix = PrefixKnobs(True, 1000, 1.0, 1)
    spec = replace(knobs["chunked"].spec, on=True)
    static = apply_knobs(copy.deepcopy(base), replace(knobs["static"], policy="static",
                                                      prefix=prefix))
    with pytest.raises(ConfigError, match="kv.prefix_caching = true: only for the continuous"):
        resolve(static)  # why the page cannot pass the features to every policy
    out, note = with_features(knobs, prefix, spec)
    assert note is not None and note.startswith(
        "static (padded batches), dynamic (size or timeout): run without prefix caching and "
        "speculative decoding")
    assert (out["static"].prefix.on, out["static"].spec.on) == (False, False)
    assert (out["chunked"].prefix.on, out["chunked"].spec.on) == (True, True)
    assert out["static"].prefix.system_prompt_tokens == 1000  # the same traffic for all
    assert with_features(knobs, replace(prefix, on=False), replace(spec, on=False))[1] is None


def test_comparison_table_gains_the_features_columns_when_on():
    plain = {"median_ttft_ms": 1.0, "slo_met": True}
    on = plain | {"prefix_hit_rate": 0.5, "prefill_tokens_saved": 992,
                  "spec_mean_accepted_tokens_per_step": 2.5, "spec_acceptance_rate": 0.4}
    table = comparison_table([({"policy": "static", "rate": 1.0}, plain),
                              ({"policy": "chunked", "rate": 1.0}, on)])
    assert table["prefix_hit_rate"].isna().tolist() == [True, False]
    assert table["spec_mean_accepted_tokens_per_step"].iloc[1] == 2.5
    bare = comparison_table([({"policy": "static", "rate": 1.0}, plain)])
    assert not {"prefix_hit_rate", "spec_acceptance_rate"} & set(bare.columns)


def test_what_the_form_runs_reports_the_expected_metrics():
    """A 1,000-token system prompt shared by every request: the first request computes it,
    its 62 full 16-token blocks (992 tokens) stay cached, and each of the other n - 1
    requests skips them (docs/prefix-caching.md's worked example)."""
    point = _point("chat")
    k = replace(knobs_from_point(point), num_requests=40, rate=2.0,
                prefix=PrefixKnobs(True, 1000, 1.0, 1), spec=replace(
                    knobs_from_point(point).spec, on=True))
    s = simulate(apply_knobs(point, k)).summary
    assert s["num_preemptions"] == 0
    assert s["prefill_tokens_saved"] == 39 * 992
    assert 0 < s["prefix_hit_rate"] < 1
    assert 1 <= s["spec_mean_accepted_tokens_per_step"] <= 5  # k + 1 = 5


pytest.importorskip("streamlit")
from dashboard_support import metrics, page  # noqa: E402


def _ran(at) -> dict:
    import tomllib

    return tomllib.loads(at.code[0].value)


def test_explorer_seeds_the_widgets_from_a_speculative_scenario():
    at = page("explorer").run()
    at.selectbox(key="scenario").set_value("speculative-chat").run()
    assert not at.exception and not at.error
    assert at.checkbox(key="speculative").value
    assert at.number_input(key="spec_num_tokens").value == 4
    assert at.number_input(key="spec_acceptance").value == 0.7
    assert at.selectbox(key="spec_draft_kind").value == "model"
    assert at.selectbox(key="spec_draft").value == "llama-3.1-8b"
    assert not at.checkbox(key="prefix_caching").value
    assert _ran(at)["speculative"] == {"num_tokens": 4, "acceptance": 0.7,
                                       "draft": "llama-3.1-8b"}
    tiles = metrics(at)
    assert 1 < float(tiles["Accepted tokens per step"][0]) <= 5
    assert "Prefix hit rate" not in tiles
    at.checkbox(key="speculative").uncheck().run()
    assert _ran(at)["speculative"]["num_tokens"] == 0
    assert "Accepted tokens per step" not in metrics(at)


def test_explorer_prefix_caching_through_the_widgets():
    at = page("explorer").run()
    at.number_input(key="num_requests").set_value(100).run()
    at.checkbox(key="prefix_caching").check().run()
    assert float(metrics(at)["Prefix hit rate"][0].rstrip("%")) == 0  # nothing shared
    at.number_input(key="system_prompt_tokens").set_value(1000).run()
    assert not at.exception and not at.error
    tiles = metrics(at)
    assert float(tiles["Prefix hit rate"][0].rstrip("%")) > 0
    assert tiles["Prefill tokens saved"][0] == f"{99 * 992:,}"  # as in the logic test
    ran = _ran(at)
    assert ran["kv"] == {"prefix_caching": True}
    assert ran["workload"]["system_prompt_tokens"] == 1000


def test_explorer_static_policy_turns_the_features_off_with_a_note():
    at = page("explorer").run()
    at.selectbox(key="scenario").set_value("prefix-caching-system-prompt").run()
    assert at.checkbox(key="prefix_caching").value
    at.selectbox(key="policy").set_value("static").run()
    assert not at.exception and not at.error
    captions = " ".join(c.value for c in at.caption)
    assert "Prefix caching: not with this policy" in captions
    assert _ran(at)["kv"] == {"prefix_caching": False}


def test_policy_page_speculation_adds_its_column_and_the_note():
    at = page("policies").run()
    at.multiselect(key="pol_policies").set_value(["static", "chunked"]).run()
    at.text_input(key="pol_rates").set_value("5").run()
    at.number_input(key="pol_num_requests").set_value(100).run()
    assert "spec_mean_accepted_tokens_per_step" not in at.dataframe[0].value.columns
    at.checkbox(key="pol_speculative").check().run()
    assert not at.exception and not at.error
    table = at.dataframe[0].value.set_index("policy")
    assert 1 < table.loc["chunked", "spec_mean_accepted_tokens_per_step"] <= 5
    assert table["spec_mean_accepted_tokens_per_step"].isna().loc["static"]
    assert "static (padded batches): run without speculative decoding" in " ".join(
        i.value for i in at.info)
