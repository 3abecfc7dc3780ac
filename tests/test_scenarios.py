"""Shipped scenarios load and resolve; sweeps expand; overrides parse; the demo ranks policies."""

from __future__ import annotations

from pathlib import Path

import pytest

from simulator.deployment import resolve
from simulator.errors import ConfigError
from simulator.runner import run_points
from simulator.scenario import apply_overrides, expand_sweep, load_scenario

SCENARIOS = sorted((Path(__file__).parents[1] / "scenarios").glob("*.toml"))


def test_the_use_cases_are_shipped() -> None:
    names = {p.stem for p in SCENARIOS}
    assert {"chat", "voice", "code-completion", "batch", "gpu-compare", "long-prompt"} <= names


@pytest.mark.parametrize("path", SCENARIOS, ids=lambda p: p.stem)
def test_every_point_of_every_shipped_scenario_resolves(path: Path) -> None:
    points = expand_sweep(load_scenario(path))
    assert points
    for _, point in points:
        dep = resolve(point)
        assert dep.kv_blocks > 0


def test_sweep_is_the_cartesian_product_with_labels() -> None:
    raw = {"policy": {"name": ["static", "continuous"]}, "workload": {"rate": [1, 2, 3]},
           "hardware": {"gpu": "h100-sxm"}}
    points = expand_sweep(raw)
    assert [labels for labels, _ in points] == [
        {"policy": p, "rate": r} for p in ("static", "continuous") for r in (1, 2, 3)]
    assert points[4][1]["workload"]["rate"] == 2 and points[4][1]["policy"]["name"] == "continuous"


def test_length_tables_are_not_sweeps() -> None:
    raw = {"workload": {"prompt": {"dist": "fixed", "tokens": 5}}}
    assert len(expand_sweep(raw)) == 1


def test_overrides_parse_toml_values_and_bare_words() -> None:
    raw = {"workload": {"rate": 1.0}, "policy": {"name": "static"}}
    out = apply_overrides(raw, ["workload.rate=[2, 4]", "policy.name=continuous",
                                "policy.chunked_prefill=true"])
    assert out["workload"]["rate"] == [2, 4]
    assert out["policy"] == {"name": "continuous", "chunked_prefill": True}
    assert raw["workload"]["rate"] == 1.0  # the original is untouched
    with pytest.raises(ConfigError, match="expected section.key=value"):
        apply_overrides(raw, ["rate=3"])


def test_overrides_set_a_top_level_field() -> None:
    raw = {"seed": 0, "workload": {"rate": 1.0}}
    out = apply_overrides(raw, ["seed=7", "name=trial"])
    assert out["seed"] == 7 and out["name"] == "trial"
    with pytest.raises(ConfigError, match="or one of name, description, seed=value"):
        apply_overrides(raw, ["workload=3"])


def test_empty_sweep_list_is_refused() -> None:
    with pytest.raises(ConfigError, match=r"workload.rate = \[\]"):
        expand_sweep({"workload": {"rate": []}})


def test_default_scenario_ranks_policies_and_rates() -> None:
    raw = apply_overrides(load_scenario(SCENARIOS[[p.stem for p in SCENARIOS].index("chat")]),
                          ["workload.num_requests=300", "workload.rate=[2.0, 12.0]",
                           'policy.name=["static", "continuous"]'])
    res = {(r.labels["policy"], r.labels["rate"]): r.summary for r in run_points(expand_sweep(raw))}
    # iteration-level batching serves chat far better than padded run-to-completion batches
    assert res["continuous", 2.0]["request_goodput"] > 5 * res["static", 2.0]["request_goodput"]
    # more load, more waiting
    assert res["continuous", 12.0]["p99_ttft_ms"] > res["continuous", 2.0]["p99_ttft_ms"]
    assert res["continuous", 2.0]["slo_met"] is True


def test_policy_subtable_overrides_shared_knobs_for_that_policy_only() -> None:
    raw = {"policy": {"name": ["continuous", "chunked"], "max_num_batched_tokens": 16384,
                      "chunked": {"max_num_batched_tokens": 2048}}}
    deps = [resolve(point) for _, point in expand_sweep(raw)]
    assert [d.policy.max_num_batched_tokens for d in deps] == [16384, 2048]  # type: ignore[attr-defined]
    assert [d.policy.chunked_prefill for d in deps] == [False, True]  # type: ignore[attr-defined]


def test_policy_subtable_with_an_unknown_knob_is_refused() -> None:
    from simulator.scenario import check_structure

    with pytest.raises(ConfigError, match="policy.chunked.budget"):
        check_structure({"policy": {"chunked": {"budget": 1}}}, "x.toml")
