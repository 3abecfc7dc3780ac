"""The ``[speculative]`` section, its errors, and the draft/verify pricing (issue 14)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from servesim.cli import main
from simulator.costs import LinearCost, PiecewiseCost, RooflineCost
from simulator.costs.prior_efficiency import prior_knobs
from simulator.costs.speculative import LayerFractionCost, SpeculativeCost, first_layers
from simulator.deployment import resolve
from simulator.errors import ConfigError
from simulator.policies import ContinuousPolicy
from simulator.shapes import StepShape
from simulator.specs import get_hardware, get_model

SPEC = {"num_tokens": 4, "acceptance": 0.7, "draft_layers": 4}


def _point(spec: dict[str, Any], policy: str = "chunked", **more: Any) -> dict[str, Any]:
    return {"model": {"name": "llama-3.1-8b"}, "hardware": {"gpu": "h100-sxm"},
            "policy": {"name": policy, **more}, "speculative": spec}


def test_the_section_sets_the_policy_knob_and_the_acceptance() -> None:
    dep = resolve(_point(SPEC))
    assert isinstance(dep.policy, ContinuousPolicy) and dep.policy.num_speculative_tokens == 4
    assert dep.speculative is not None and dep.speculative.alpha == 0.7
    assert "speculative k=4, draft llama-3.1-8b's first 4 of 32 layers" in dep.cost_source
    off = resolve(_point({**SPEC, "num_tokens": 0}))
    assert off.speculative is None and off.policy.num_speculative_tokens == 0  # type: ignore[attr-defined]
    assert "speculative" not in off.cost_source


@pytest.mark.parametrize(("spec", "policy", "match"), [
    ({"num_tokens": 4, "draft_layers": 4}, "chunked",
     r"speculative.num_tokens = 4: give speculative.acceptance"),
    ({**SPEC, "acceptance_counts": [0.2, 0.2, 0.2, 0.2, 0.2]}, "chunked", "exactly one"),
    ({"num_tokens": 4, "acceptance": 0.7}, "chunked", "speculative.draft"),
    ({**SPEC, "draft": "llama-3.1-8b"}, "chunked", "exactly one"),
    ({**SPEC, "acceptance": 1.5}, "chunked", r"speculative.acceptance = 1.5"),
    ({**SPEC, "num_tokens": 17}, "chunked", r"speculative.num_tokens = 17"),
    ({"num_tokens": 2, "acceptance_counts": [0.5, 0.5], "draft_layers": 2}, "chunked",
     r"speculative.acceptance_counts has 2 values: needs 3"),
    ({"num_tokens": 2, "acceptance_counts": [0.5, 0.5, 0.5], "draft_layers": 2}, "chunked",
     "must sum to 1"),
    ({"num_tokens": 2, "acceptance_counts": [0.5, "a", 0.5], "draft_layers": 2}, "chunked",
     r"speculative.acceptance_counts\[1\]"),
    ({"num_tokens": 2, "acceptance_counts": 0.5, "draft_layers": 2}, "chunked",
     "speculative.acceptance_counts = 0.5: must be a list"),
    ({**SPEC, "draft_layers": 32}, "chunked",
     r"speculative.draft_layers = 32: must be in \[1, 31\]"),
    ({**SPEC, "draft_layers": 0}, "chunked", r"speculative.draft_layers = 0"),
    ({"num_tokens": 4, "acceptance": 0.7, "draft": "no-such-model"}, "chunked",
     "speculative.draft"),
    ({"num_tokens": 4, "acceptance": 0.7, "draft": "llama-2-7b"}, "chunked",
     r"speculative.draft = 'llama-2-7b': its vocabulary \(32,000\) differs"),
    ({**SPEC, "temperature": 1}, "chunked", "speculative.temperature: unknown field"),
    (SPEC, "static", "speculative.num_tokens = 4: needs policy.name 'continuous' or 'chunked'"),
])
def test_errors_name_the_field(spec: dict[str, Any], policy: str, match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        resolve(_point(spec, policy))


def test_a_catalogue_draft_is_priced_on_the_same_gpus() -> None:
    point = {"model": {"name": "llama-3.1-70b"}, "hardware": {"gpu": "h100-sxm", "tp": 4},
             "policy": {"name": "chunked"},
             "speculative": {"num_tokens": 4, "acceptance": 0.7, "draft": "llama-3.1-8b"}}
    dep = resolve(point)
    assert "draft llama-3.1-8b: roofline prior" in dep.cost_source
    draft = RooflineCost(get_model("llama-3.1-8b"), get_hardware("h100-sxm"), tp=4,
                         **prior_knobs("h100-sxm", "bf16"))  # the prior the simulator builds
    shape = _verify(2, 500, 4)
    plain = resolve({**point, "speculative": {}}).cost
    passes = sum(draft.step_time(StepShape(num_decode_seqs=2, decode_context_tokens=1000 + 2 * j))
                 for j in range(4))
    assert dep.cost.step_time(shape) == pytest.approx(plain.step_time(shape) + passes, rel=1e-12)


def test_the_policy_knob_is_set_only_through_the_section() -> None:
    with pytest.raises(ConfigError, match=r"policy.num_speculative_tokens = 3: set it as "
                                          r"speculative.num_tokens \(now 0\)"):
        resolve(_point({}, num_speculative_tokens=3))
    with pytest.raises(ConfigError, match="not with num_scheduler_steps = 4"):
        resolve(_point(SPEC, "continuous", num_scheduler_steps=4))


def test_a_scenario_file_runs_and_reports_acceptance(tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    text = """
[model]
name = "llama-3.1-8b"
[policy]
name = "chunked"
[workload]
rate = 4.0
num_requests = 30
prompt = { dist = "fixed", tokens = 128 }
output = { dist = "fixed", tokens = 64 }
[speculative]
num_tokens = [0, 3]
acceptance_counts = [0.1, 0.2, 0.3, 0.4]
draft_layers = 4
"""
    (tmp_path / "s.toml").write_text(text)
    assert main(["run", str(tmp_path / "s.toml"), "--out", str(tmp_path / "o"), "--json"]) == 0
    plain, spec = json.loads(capsys.readouterr().out)
    assert "spec_mean_accepted_tokens_per_step" not in plain  # off: the summary is unchanged
    # 1 + (0.2 + 2 x 0.3 + 3 x 0.4) = 3 for a row given 3 drafts; ~630 row-steps of
    # variance 1 (E a^2 = 10): 4 standard errors are 0.16
    assert abs(spec["spec_mean_accepted_tokens_per_step"] - 3.0) < 0.16
    assert spec["spec_acceptance_rate"] == pytest.approx(
        spec["spec_drafts_accepted"] / spec["spec_drafts_verified"])
    assert spec["mean_tpot_ms"] < plain["mean_tpot_ms"]
    (tmp_path / "bad.toml").write_text(text.replace("[0.1, 0.2, 0.3, 0.4]", "[0.5, 0.5]"))
    assert main(["run", str(tmp_path / "bad.toml"), "--out", str(tmp_path / "b")]) == 2
    assert "speculative.acceptance_counts" in capsys.readouterr().err


# --- pricing -------------------------------------------------------------------------

def _verify(d: int, ctx: int, s: int) -> StepShape:
    """d rows, each with ctx tokens attended by its first query, verifying s drafts."""
    return StepShape(num_decode_seqs=d, decode_context_tokens=d * ctx, num_spec_tokens=d * s,
                     spec_attn_work=d * (s * ctx + s * (s + 1) / 2), num_draft_passes=s)


def test_roofline_verify_is_memory_bound_at_batch_one_and_compute_bound_at_scale() -> None:
    cost = RooflineCost(get_model("llama-3.1-8b"), get_hardware("h100-sxm"))
    plain, spec = StepShape(num_decode_seqs=1, decode_context_tokens=1000), _verify(1, 1000, 4)
    # batch 1: the weights dominate; 4 more tokens only write 4 more tokens of KV
    k = cost.terms(spec)
    assert k.memory_s > k.compute_s
    kv = get_model("llama-3.1-8b").kv_bytes_per_token("bf16")
    assert cost.terms(spec).bytes - cost.terms(plain).bytes == pytest.approx(4 * kv)
    assert cost.step_time(spec) == pytest.approx(cost.terms(spec).total_s, rel=1e-12)
    assert cost.step_time(spec) < 1.01 * cost.step_time(plain)  # nearly free at batch 1
    # batch 512 x 5 positions: compute-bound, and the step more than twice a plain decode's
    big = cost.terms(_verify(512, 1000, 4))
    assert big.compute_s > big.memory_s
    assert big.total_s > 2 * cost.step_time(
        StepShape(num_decode_seqs=512, decode_context_tokens=512_000))


def test_fitted_forms_price_drafts_as_rows_and_their_pairs_as_attention() -> None:
    lin = LinearCost(step_s=1e-3, prefill_attn_s=1e-8, decode_seq_s=1e-4, decode_context_s=1e-6)
    plain = StepShape(num_decode_seqs=2, decode_context_tokens=200)
    spec = _verify(2, 100, 3)  # S = 6, W = 2 * (300 + 6) = 612
    assert lin.step_time(spec) - lin.step_time(plain) == pytest.approx(6e-4 + 612e-8)
    pw = PiecewiseCost(decode_step_s=0.06, single_token_step_s=0.03, decode_seq_s=1e-3,
                       prefill_attn_s=1e-6, knee1_tokens=4, knee1_token_s=2e-3)
    one = StepShape(num_decode_seqs=1, decode_context_tokens=100)
    # batch 1 + 3 drafts: 4 tokens, a matrix-matrix step (decode_step_s), no knee yet
    assert pw.step_time(_verify(1, 100, 3)) == pytest.approx(0.06 + 4e-3 + 306e-6)
    assert pw.step_time(one) == pytest.approx(0.03 + 1e-3)


def test_draft_passes_and_layer_drafts() -> None:
    target = LinearCost(step_s=0.01, decode_seq_s=1e-3, decode_context_s=1e-5)
    draft = LinearCost(step_s=2e-3, decode_seq_s=1e-4, decode_context_s=1e-6)
    cost = SpeculativeCost(target, draft, draft_prefills=True)
    shape = _verify(3, 50, 2)  # 2 passes over 3 rows, contexts 150 then 153
    expect = 2 * (2e-3 + 3e-4) + 1e-6 * (150 + 153)
    assert cost.step_time(shape) - target.step_time(shape) == pytest.approx(expect)
    prefill = StepShape(num_prefill_tokens=100, prefill_attn_work=5000.0)
    assert cost.step_time(prefill) == pytest.approx(target.step_time(prefill) + 2e-3)
    model = get_model("llama-3.1-8b")
    cut = first_layers(model, 8)
    assert cut.num_layers == 8 and cut.vocab_size == model.vocab_size
    frac = LayerFractionCost(target, cut.params_active / model.params_active)
    assert 8 / 32 < frac.fraction < 0.5  # embedding and LM head ride along
    with pytest.raises(ConfigError, match="draft_layers = 32"):
        first_layers(model, 32)


def test_benefit_shrinks_with_batch_size() -> None:
    """Per-step speed-up (alpha = 0.7, k = 4) falls with the batch on the default GPU."""
    dep = resolve(_point({**SPEC, "draft_layers": 4}))
    mean = (1 - 0.7 ** 5) / 0.3
    ups = []
    for d in (1, 8, 64, 512):
        plain = dep.cost.step_time(StepShape(num_decode_seqs=d, decode_context_tokens=d * 1000))
        ups.append(mean * plain / dep.cost.step_time(_verify(d, 1000, 4)))
    assert ups == sorted(ups, reverse=True)
    assert ups[0] > 1.2 and ups[-1] < 1.0


def test_simulated_speed_up_shrinks_with_concurrency() -> None:
    """Closed loops of d clients on the default GPU (Llama-3.1-8B, H100 SXM), k = 4,
    alpha = 0.7, draft = the first 4 layers: speculative decoding wins at d = 1 and loses
    at d = 256 (docs/speculative.md has the whole table)."""
    from simulator.runner import run_point

    def tpot(d: int, k: int) -> float:
        point = _point({**SPEC, "num_tokens": k}, max_num_seqs=d)
        point["workload"] = {"arrival": "closed", "concurrency": d, "num_requests": 2 * d,
                             "prompt": {"dist": "fixed", "tokens": 128},
                             "output": {"dist": "fixed", "tokens": 256}}
        return float(run_point({}, point).summary["mean_tpot_ms"])

    ups = [tpot(d, 0) / tpot(d, 4) for d in (1, 32, 256)]
    assert ups[0] > ups[1] > ups[2]
    assert ups[0] > 1.3 and ups[2] < 1.0
