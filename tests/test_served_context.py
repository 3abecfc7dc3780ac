"""The context requests are fitted to: the model's own, or a longer ``policy.max_model_len``
(an engine built for longer sequences than the config's positions)."""

from __future__ import annotations

from simulator.runner import run_point
from simulator.scenario_types import Scenario

POINT = {"model": {"name": "llama-2-7b"}, "hardware": {"gpu": "h100-sxm"},
         "workload": {"arrival": "poisson", "rate": 1.0, "num_requests": 3,
                      "prompt": {"dist": "fixed", "tokens": 5000},
                      "output": {"dist": "fixed", "tokens": 500}}}


def served(policy: dict) -> dict:  # noqa: ANN001
    summary = run_point({}, {**POINT, "policy": policy}).summary
    return {k: summary[k] for k in ("total_input_tokens", "num_rejected")}


def test_a_longer_max_model_len_serves_whole_prompts() -> None:
    # Llama-2-7B stops at 4,096 positions: 5,000 + 500 is cut to 3,596 + 500 by default
    assert served({"name": "continuous"}) == {"total_input_tokens": 3 * 3596,
                                              "num_rejected": 0}
    assert served({"name": "continuous", "max_model_len": 5500}) == {
        "total_input_tokens": 3 * 5000, "num_rejected": 0}
    sc = Scenario.from_dict({**POINT, "policy": {"name": "continuous", "max_model_len": 8192}})
    assert (sc.model_spec().max_context_tokens, sc.served_context()) == (4096, 8192)


def test_a_shorter_max_model_len_still_refuses_rather_than_cuts() -> None:
    # Fitted to the model's 4,096 first (3,596 + 500), then refused over 2,048, as vLLM's API
    out = served({"name": "continuous", "max_model_len": 2048})
    assert out == {"total_input_tokens": 0, "num_rejected": 3}
