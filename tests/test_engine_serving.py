"""The engine's serving loop on CPU: batching correctness, exact lengths, scheduling fidelity.

Skipped as a whole without torch (the core suite runs without the engine extra).
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from engine.models import build_model  # noqa: E402
from engine.serving import prompt_ids, replay  # noqa: E402
from simulator.cluster import ClusterSpec, simulate  # noqa: E402
from simulator.costs.replay import ReplayCost, ReplayMismatch  # noqa: E402
from simulator.policies import make_policy  # noqa: E402
from simulator.records import STEP_COLUMNS  # noqa: E402

POLICIES = {
    "static": {"batch_size": 3},
    "dynamic": {"max_batch_size": 4, "max_wait_s": 0.02},
    "continuous": {"max_num_batched_tokens": 128},
    "chunked": {"max_num_batched_tokens": 24},
}


@pytest.fixture(scope="module")
def tiny():
    torch.set_num_threads(1)
    return build_model("tiny", seed=0)


def table(n: int = 7) -> pd.DataFrame:
    """Mixed prompt and output lengths arriving close together (they share batches)."""
    return pd.DataFrame({
        "request_id": range(n),
        "arrival_s": [0.0, 0.0, 0.01, 0.02, 0.04, 0.05, 0.05][:n],
        "prompt_tokens": [5, 17, 40, 8, 33, 3, 21][:n],
        "output_tokens": [4, 9, 3, 12, 6, 7, 1][:n],
    })


@torch.inference_mode()
def greedy_reference(em, ids: list[int], n: int) -> list[int]:
    """Greedy tokens by full forward passes over the whole sequence, no cache at all."""
    seq = list(ids)
    out = []
    for _ in range(n):
        logits = em.model(input_ids=torch.tensor([seq])).logits
        out.append(int(logits[0, -1].argmax()))
        seq.append(out[-1])
    return out


@pytest.mark.parametrize("name", sorted(POLICIES))
def test_batched_tokens_equal_tokens_alone(tiny, name):
    reqs = table()
    run = replay(reqs, tiny, make_policy(name, **POLICIES[name]), kv_blocks=64)
    for i, row in reqs.iterrows():
        ids = prompt_ids(i, int(row.prompt_tokens), tiny.vocab_size)
        alone = greedy_reference(tiny, ids, int(row.output_tokens))
        assert run.outputs[i] == alone, f"request {i}"
    assert (run.result.requests["status"] == "finished").all()


def test_preemption_recomputes_to_the_same_tokens(tiny):
    reqs = table()
    reqs["output_tokens"] = 20
    # 16 blocks of 4 tokens hold the longest request (40 + 20 tokens) but not two growing
    # requests: the newest running one is preempted and recomputed.
    run = replay(reqs, tiny, make_policy("continuous", max_num_batched_tokens=128), kv_blocks=16,
                 block_size=4)
    records = run.result.requests
    assert records["preemptions"].sum() > 0
    assert (records["status"] == "finished").all()
    for i, row in reqs.iterrows():
        ids = prompt_ids(i, int(row.prompt_tokens), tiny.vocab_size)
        assert run.outputs[i] == greedy_reference(tiny, ids, 20), f"request {i}"


@pytest.mark.parametrize("name", sorted(POLICIES))
def test_exact_lengths_and_ordered_timestamps(tiny, name):
    reqs = table()
    run = replay(reqs, tiny, make_policy(name, **POLICIES[name]), kv_blocks=64)
    rec = run.result.requests.set_index("request_id")
    for rid, group in run.tokens.groupby("request_id"):
        want = int(reqs.loc[reqs.request_id == rid, "output_tokens"].iloc[0])
        assert len(run.outputs[rid]) == want == len(group)
        times = group.sort_values("token_index")["time_s"].to_numpy()
        r = rec.loc[rid]
        assert np.all(np.diff(times) > 0)
        assert r.arrival_s <= r.scheduled_s < r.first_token_s <= r.finish_s
        assert times[0] == r.first_token_s and times[-1] == r.finish_s
    steps = run.result.steps
    assert list(steps.columns) == list(STEP_COLUMNS)
    assert np.all(steps["start_s"].to_numpy()[1:] >= steps["end_s"].to_numpy()[:-1] - 1e-12)


@pytest.mark.parametrize("name", sorted(POLICIES))
def test_simulator_replays_engine_schedule_exactly(tiny, name):
    """The engine's measured step durations, fed to the simulator, give the same batches
    (checked shape by shape by ReplayCost) and the same request timelines."""
    reqs = table()
    policy = make_policy(name, **POLICIES[name])
    run = replay(reqs, tiny, policy, kv_blocks=64)
    cost = ReplayCost(run.result.steps)
    sim = simulate(reqs, ClusterSpec(policy, cost, kv_blocks=64), fast_forward=False)
    assert cost.next == len(run.result.steps)
    eng_steps, sim_steps = run.result.steps, sim.steps
    assert len(sim_steps) == len(eng_steps)
    exact = [c for c in STEP_COLUMNS if c not in ("start_s", "end_s")]
    pd.testing.assert_frame_equal(sim_steps[exact], eng_steps[exact])
    for col in ("start_s", "end_s"):
        np.testing.assert_allclose(sim_steps[col], eng_steps[col], rtol=0, atol=1e-9)
    times = ["arrival_s", "scheduled_s", "first_token_s", "finish_s"]
    e = run.result.requests.set_index("request_id").sort_index()
    s = sim.requests.set_index("request_id").sort_index()
    np.testing.assert_allclose(s[times], e[times], rtol=0, atol=1e-9)
    assert (s["status"] == e["status"]).all()


def test_replay_cost_names_the_first_divergent_step(tiny):
    reqs = table()
    run = replay(reqs, tiny, make_policy("continuous"), kv_blocks=64)
    cost = ReplayCost(run.result.steps)
    with pytest.raises(ReplayMismatch, match="step 0: simulated shape"):
        simulate(reqs, ClusterSpec(make_policy("static", batch_size=2), cost, kv_blocks=64),
                 fast_forward=False)


def test_closed_loop_and_rejection(tiny):
    reqs = pd.DataFrame({
        "request_id": range(5), "arrival_s": [math.nan] * 5,
        "prompt_tokens": [6, 7, 500, 9, 10], "output_tokens": [3, 3, 3, 3, 3],
        "client_id": [0, 1, 0, 1, 0], "think_s": [0.01] * 5,
    })
    run = replay(reqs, tiny, make_policy("continuous"), kv_blocks=8)  # 128 tokens at most
    rec = run.result.requests.set_index("request_id")
    assert rec.loc[2, "status"] == "rejected" and "KV blocks" in rec.loc[2, "reason"]
    assert (rec.drop(index=2)["status"] == "finished").all()
    # Client 0 sends request 2 after request 0 ends plus its think time.
    assert rec.loc[2, "arrival_s"] == pytest.approx(rec.loc[0, "finish_s"] + 0.01)


def _hf_crosscheck(em, device_note: str) -> None:
    from engine.hf_crosscheck import hf_generate_batch

    reqs = table().assign(output_tokens=10)
    run = replay(reqs, em, make_policy("continuous"), kv_blocks=64)
    prompts = [prompt_ids(i, int(p), em.vocab_size) for i, p in enumerate(reqs.prompt_tokens)]
    hf = hf_generate_batch(em, prompts, 10, num_blocks=32)
    assert hf.outputs == [run.outputs[i] for i in range(len(reqs))], device_note


def test_tokens_equal_transformers_continuous_batching(tiny):
    """An independent implementation (transformers' paged continuous batching) agrees."""
    _hf_crosscheck(tiny, "cpu")


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_cuda_engine_matches_transformers_continuous_batching():
    _hf_crosscheck(build_model("tiny", device="cuda"), "cuda fp32")


def test_abort_frees_the_request_and_the_others_carry_on(tiny):
    from engine.core import EngineCore
    from simulator.kvcache import BlockManager
    from simulator.policies import Sequence

    core = EngineCore(tiny, make_policy("continuous"), BlockManager(64, 16), clock=lambda: 0.0)
    seqs = [Sequence(i, 0.0, 10 + i, 6) for i in range(3)]
    for seq in seqs:
        core.arrive(seq, prompt_ids(seq.request_id, seq.prompt_tokens, tiny.vocab_size))
    core.run(core.schedule(0.0), 0.0)  # prefill all three
    core.run(core.schedule(0.0), 0.0)  # one decode step
    used = core.state.kv.used
    assert core.abort(1, "aborted: the client went away")
    assert core.state.kv.used < used and seqs[1] not in core.state.running
    assert not core.abort(1, "again") and not core.abort(99, "unknown")
    while core.state.running:
        core.run(core.schedule(0.0), 0.0)
    for seq in (seqs[0], seqs[2]):
        ids = prompt_ids(seq.request_id, seq.prompt_tokens, tiny.vocab_size)
        assert core.tokens[seq.request_id][seq.prompt_tokens:] == greedy_reference(tiny, ids, 6)
    assert seqs[1].reason.startswith("aborted") and core.state.kv.used == 0


@pytest.mark.parametrize("name", ["continuous", "chunked"])
def test_closed_loop_without_think_time_replays_exactly(tiny, name):
    """A client with no think time sends its next request at its last one's end: the engine
    and the simulator both let it join at the following step boundary (the simulator sends
    it through an event after the step's end; the engine holds it until the next decision),
    so the replay still matches step for step."""
    n = 12
    reqs = pd.DataFrame({
        "request_id": range(n), "arrival_s": [math.nan] * n,
        "prompt_tokens": [6, 17, 30, 9, 10, 25, 8, 40, 12, 5, 20, 7],
        "output_tokens": [3, 5, 2, 4, 6, 3, 2, 5, 4, 3, 2, 6],
        "client_id": [i % 3 for i in range(n)], "think_s": [0.0] * n,
    })
    run = replay(reqs, tiny, make_policy(name, max_num_batched_tokens=64), kv_blocks=64)
    cost = ReplayCost(run.result.steps)
    sim = simulate(reqs, ClusterSpec(make_policy(name, max_num_batched_tokens=64), cost,
                                     kv_blocks=64), fast_forward=False)
    assert cost.next == len(run.result.steps)
    times = ["arrival_s", "scheduled_s", "first_token_s", "finish_s"]
    e = run.result.requests.set_index("request_id").sort_index()
    s = sim.requests.set_index("request_id").sort_index()
    np.testing.assert_allclose(s[times], e[times], rtol=0, atol=1e-9)
    # every later request of a client is sent exactly when its previous one finished
    for client in range(3):
        mine = e[reqs.set_index("request_id")["client_id"] == client]
        np.testing.assert_allclose(mine["arrival_s"].to_numpy()[1:],
                                   mine["finish_s"].to_numpy()[:-1], rtol=0, atol=1e-12)
