"""Speculative decoding in the engine's serving loop: tokens, counts, and the exact replay.

On the random-weight ``tiny`` model (4 layers), with a draft of its first 3 layers: its
acceptance means nothing about real drafts (tests/test_engine_speculative.py measures
SmolLM2's), but it accepts 0..k drafts in varied steps, which is what the scheduling
checks need. Skipped without torch, as the other engine tests are.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from engine.models import build_model  # noqa: E402
from engine.serving import prompt_ids, replay  # noqa: E402
from engine.speculative_draft import layer_draft  # noqa: E402
from engine.speculative_loop import greedy_reference  # noqa: E402
from simulator.cluster import ClusterSpec, simulate  # noqa: E402
from simulator.costs.replay import ReplayCost  # noqa: E402
from simulator.policies import make_policy  # noqa: E402
from simulator.records import STEP_COLUMNS  # noqa: E402
from simulator.speculative_acceptance import ReplayAcceptance  # noqa: E402

K = 3
POLICIES = {  # continuous: whole prompts; chunked: prefill chunks share steps with drafts
    "continuous": {"max_num_batched_tokens": 128, "num_speculative_tokens": K},
    "chunked": {"max_num_batched_tokens": 24, "num_speculative_tokens": K},
}


@pytest.fixture(scope="module")
def tiny():
    torch.set_num_threads(1)
    em = build_model("tiny", seed=0)
    return em, layer_draft(em, 3)


def table() -> pd.DataFrame:
    """Mixed lengths arriving close together (they share batches)."""
    return pd.DataFrame({
        "request_id": range(6),
        "arrival_s": [0.0, 0.0, 0.01, 0.02, 0.04, 0.05],
        "prompt_tokens": [5, 17, 40, 8, 33, 3],
        "output_tokens": [4, 9, 3, 12, 6, 1],
    })


@pytest.fixture(scope="module", params=sorted(POLICIES))
def served(request, tiny):
    em, draft = tiny
    name = request.param
    run = replay(table(), em, make_policy(name, **POLICIES[name]), kv_blocks=64, draft=draft)
    return name, run


def test_speculative_serving_emits_plain_greedy_tokens(served, tiny):
    _, run = served
    em, _ = tiny
    for i, row in table().iterrows():
        ids = prompt_ids(i, int(row.prompt_tokens), em.vocab_size)
        assert run.outputs[i] == greedy_reference(em, ids, int(row.output_tokens)), f"request {i}"
    assert (run.result.requests["status"] == "finished").all()


def test_accepted_counts_are_within_one_to_k_plus_one_and_vary(served):
    _, run = served
    flat = [a for step in run.accepted for a in step]
    assert flat and all(1 <= a <= K + 1 for a in flat)
    assert len(set(flat)) > 1  # rejections and acceptances both happened
    # Every output token after a request's first came from a speculative row-step, and each
    # step logs its draft and verify seconds (zero on the steps that only prefill).
    assert sum(flat) == int(table()["output_tokens"].sum()) - len(table())
    spec = run.verify_s > 0
    assert spec.sum() == len(run.accepted)
    assert np.all(run.draft_s[~spec] == 0) and np.all(run.draft_s[spec] > 0)
    assert np.all(run.draft_s + run.verify_s <= run.forward_s)


def test_simulator_replays_speculative_engine_exactly(served):
    """The engine's step times and accepted counts, fed to the simulator, give the same
    batches (shape by shape, ReplayCost) and every request's times within 1e-9 s."""
    name, run = served
    reqs = table()
    cost = ReplayCost(run.result.steps)
    accept = ReplayAcceptance(tuple(tuple(a) for a in run.accepted))
    spec = ClusterSpec(make_policy(name, **POLICIES[name]), cost, kv_blocks=64,
                       speculative=accept, check_invariants=True)
    sim = simulate(reqs, spec, fast_forward=False)
    assert cost.next == len(run.result.steps)
    eng_steps, sim_steps = run.result.steps, sim.steps
    exact = [c for c in STEP_COLUMNS if c not in ("start_s", "end_s")]
    pd.testing.assert_frame_equal(sim_steps[exact], eng_steps[exact])
    for col in ("start_s", "end_s"):
        np.testing.assert_allclose(sim_steps[col], eng_steps[col], rtol=0, atol=1e-9)
    times = ["arrival_s", "scheduled_s", "first_token_s", "finish_s"]
    e = run.result.requests.set_index("request_id").sort_index()
    s = sim.requests.set_index("request_id").sort_index()
    np.testing.assert_allclose(s[times], e[times], rtol=0, atol=1e-9)
    assert (s["status"] == e["status"]).all()


def test_a_speculating_policy_without_a_draft_is_refused(tiny):
    em, _ = tiny
    with pytest.raises(ValueError, match="no draft model"):
        replay(table(), em, make_policy("continuous", num_speculative_tokens=2), kv_blocks=64)
