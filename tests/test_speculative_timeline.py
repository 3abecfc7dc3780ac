"""Speculative decoding's closed-form extremes on tiny hand timelines (issue 14).

alpha = 1: every draft is accepted, so a request emits ``k + 1`` tokens a step and, at a
constant step cost ``c``, its TPOT is ``c * ceil((out - 1) / (k + 1)) / (out - 1)``.
alpha = 0: one token a step, each step dearer than plain decoding by exactly the draft
passes and the wider verify (priced by hand from the linear coefficients below).
"""

from __future__ import annotations

import math

import pytest
from helpers import TokenCost, table, timeline

from simulator.cluster import ClusterSpec, simulate
from simulator.costs import LinearCost
from simulator.costs.speculative import SpeculativeCost
from simulator.metrics import request_metrics
from simulator.policies import ContinuousPolicy
from simulator.speculative_acceptance import Acceptance

C = 0.01  # seconds per step, whatever its shape


def _run(rows, k: int, alpha: float, cost=None, **knobs):  # type: ignore[no-untyped-def]
    policy = ContinuousPolicy(num_speculative_tokens=k, **knobs)
    spec = ClusterSpec(policy, cost or TokenCost(step_s=C), kv_blocks=64, block_size=4,
                       check_invariants=True,
                       speculative=Acceptance(alpha=alpha, seed=0) if k else None)
    return simulate(table(rows), spec)


@pytest.mark.parametrize("k", [1, 2, 4, 7])
@pytest.mark.parametrize("out", [2, 5, 11, 12, 40])
def test_alpha_one_emits_k_plus_one_a_step(k: int, out: int) -> None:
    res = _run([(0.0, 8, out)], k, 1.0)
    decode_steps = math.ceil((out - 1) / (k + 1))
    # prefill at [0, C) emits the first token; then ceil((out - 1) / (k + 1)) steps
    assert timeline(res.requests) == [(0, 0.0, round(C, 9), round(C * (1 + decode_steps), 9))]
    tpot_ms = request_metrics(res.requests)["tpot_ms"].iloc[0]  # (E2E - TTFT) / (out - 1)
    assert tpot_ms == pytest.approx(1e3 * C * decode_steps / (out - 1), rel=1e-9)
    # full steps emit k + 1; the last one what was left
    stats = res.spec_stats
    assert stats is not None and stats.num_row_steps == decode_steps
    assert stats.num_emitted == out - 1
    full = (out - 1) // (k + 1)
    assert stats.with_drafts(k) == (full, full * (k + 1))


def test_alpha_one_two_requests_share_steps() -> None:
    # two prompts prefilled in one step, then both decode 5 tokens a step (k = 4)
    res = _run([(0.0, 8, 11), (0.0, 8, 6)], 4, 1.0)
    assert timeline(res.requests) == [(0, 0.0, 0.01, 0.03), (1, 0.0, 0.01, 0.02)]
    steps = res.steps
    # one ITL sample per row per step: 2 rows, then 1
    assert steps["num_decode_tokens"].tolist() == [0, 2, 1]


@pytest.mark.parametrize("out", [2, 9, 30])
def test_alpha_zero_emits_one_a_step(out: int) -> None:
    res = _run([(0.0, 8, out)], 4, 0.0)
    assert timeline(res.requests) == [(0, 0.0, round(C, 9), round(C * out, 9))]
    assert res.spec_stats is not None and res.spec_stats.num_emitted == out - 1
    assert res.spec_stats.num_accepted == 0


def test_alpha_zero_costs_the_draft_passes_and_the_wider_verify() -> None:
    target = LinearCost(step_s=0.010, prefill_token_s=1e-4, prefill_attn_s=1e-7,
                        decode_seq_s=2e-4, decode_context_s=3e-6)
    draft = LinearCost(step_s=0.001, decode_seq_s=5e-5, decode_context_s=1e-6)
    k, prompt, out = 3, 20, 8
    plain = _run([(0.0, prompt, out)], 0, 0.0, target)
    spec = _run([(0.0, prompt, out)], k, 0.0, SpeculativeCost(target, draft, False))
    ds = (plain.steps["end_s"] - plain.steps["start_s"]).to_numpy()
    dt = (spec.steps["end_s"] - spec.steps["start_s"]).to_numpy()
    assert len(ds) == len(dt) == out  # one prefill, out - 1 decodes, in both runs
    assert dt[0] == pytest.approx(ds[0], rel=1e-12)  # the prefill is not speculative
    for t in range(1, out):
        ctx = prompt + t  # tokens the row's first query attends at decode step t
        s = min(k, out - t - 1)  # drafts it verifies: k, fewer near the end
        verify = 2e-4 * s + 1e-7 * (s * ctx + s * (s + 1) / 2)
        drafts = sum(0.001 + 5e-5 + 1e-6 * (ctx + j) for j in range(s))
        assert dt[t] - ds[t] == pytest.approx(verify + drafts, rel=1e-9), t
