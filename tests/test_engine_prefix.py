"""Prefix reuse on the engine (engine/prefix_kv.py): exact tokens, exact hits, exact replay.

On the random-weight ``tiny`` model: a prefix hit copies KV instead of computing it, so
greedy outputs with reuse on must equal those with reuse off token for token (any wrong
copied position changes the logits). Skipped without torch, as the other engine tests are.
"""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from engine_support import greedy  # noqa: E402

from engine.core import EngineCore  # noqa: E402
from engine.models import build_model  # noqa: E402
from engine.prefix_prompts import SegmentPrompts  # noqa: E402
from engine.serving import prompt_ids, replay  # noqa: E402
from engine.speculative_draft import layer_draft  # noqa: E402
from servesim.cli import main  # noqa: E402
from simulator.cluster import ClusterSpec, simulate  # noqa: E402
from simulator.costs.replay import ReplayCost  # noqa: E402
from simulator.policies import Sequence, make_policy  # noqa: E402
from simulator.prefix_cache import PrefixBlockManager  # noqa: E402
from simulator.records import STEP_COLUMNS  # noqa: E402
from simulator.speculative_acceptance import ReplayAcceptance  # noqa: E402
from simulator.workload.prefixes import (  # noqa: E402
    START,
    STOP,
    PrefixIdentity,
    from_lists,
    identity_segments,
    session_prompts,
)

BLOCK = 16
POLICIES = {  # continuous: whole prompts; chunked: the system prompt spans two steps
    "continuous": {"max_num_batched_tokens": 256},
    "chunked": {"max_num_batched_tokens": 24},
}


@pytest.fixture(scope="module")
def tiny():
    torch.set_num_threads(1)
    return build_model("tiny", seed=0)


def workload():
    """Nine requests: seven behind system prompt 0 (40 tokens), one behind prompt 1 (24),
    one with none. Requests 0 and 1 arrive together (1 hits blocks 0 computes in the same
    step); request 1's prompt is cut to 33 tokens, so its hit leaves it one token (a
    one-token prefill whose source block is computed by a packed chunk of the same step)."""
    segs = [[(0, 40)], [(0, 40)], [(0, 40)], [(1, 24)], [(0, 40)], [], [(0, 40)],
            [(0, 40)], [(0, 40)]]
    segments, start, stop = from_lists(segs)
    table = pd.DataFrame({
        "request_id": range(9),
        "arrival_s": [0.0, 0.0, 0.05, 0.06, 0.08, 0.09, 0.2, 0.2, 0.21],
        "prompt_tokens": [47, 33, 60, 30, 41, 12, 56, 70, 48],
        "output_tokens": [5, 4, 7, 3, 6, 4, 8, 2, 17],
        START: start, STOP: stop,
    })
    return table, segments


@pytest.fixture(scope="module", params=sorted(POLICIES))
def served(request, tiny):
    name = request.param
    table, segments = workload()
    runs = {on: replay(table, tiny, make_policy(name, **POLICIES[name]), kv_blocks=64,
                       block_size=BLOCK, segments=segments, prefix_caching=on)
            for on in (False, True)}
    return name, runs


def test_segment_prompts_share_their_segments(tiny):
    table, segments = workload()
    p = SegmentPrompts(table, segments, tiny.vocab_size)
    a, b, c = p.prompt(0, 47), p.prompt(2, 60), p.prompt(1, 33)
    assert a[:40] == b[:40] and c == a[:33]  # cut to 33: the segment's first 33 ids
    assert a[40:] != b[40:47]  # the messages are each request's own
    assert p.prompt(5, 12) == prompt_ids(5, 12, tiny.vocab_size)  # no segment: as before
    assert p.prompt(3, 30)[:24] != a[:24]  # another segment, other ids


def test_reuse_gives_the_same_tokens_as_computing(served):
    _, runs = served
    off, on = runs[False], runs[True]
    assert on.outputs == off.outputs
    assert (on.result.requests["status"] == "finished").all()
    hits = on.result.requests.set_index("request_id")["cached_tokens"]
    assert hits.sum() > 0  # the reuse happened (the hits are counted exactly below)
    assert "cached_tokens" not in off.result.requests


def test_cached_tokens_count_full_blocks_of_the_shared_prompt(served):
    """Hand count: 2 full blocks (32 tokens) of system prompt 0 for every request behind it
    but the first; request 1 (33 tokens) may hit 2 blocks ((33 - 1) // 16); prompt 1 (24
    tokens, one full block) and the request without a system prompt never hit."""
    _, runs = served
    hits = runs[True].result.requests.set_index("request_id")["cached_tokens"].to_dict()
    assert hits == {0: 0, 1: 32, 2: 32, 3: 0, 4: 32, 5: 0, 6: 32, 7: 32, 8: 32}


def test_store_mirrors_the_manager(tiny):
    """After a run the engine's store holds exactly the manager's cached blocks."""
    table, segments = workload()
    kv = PrefixBlockManager(12, BLOCK, PrefixIdentity(table, segments))  # small: evictions
    core = EngineCore(tiny, make_policy("chunked", max_num_batched_tokens=24), kv,
                      clock=lambda: 0.0)
    prompts = SegmentPrompts(table, segments, tiny.vocab_size)
    for row in table.itertuples():
        seq = Sequence(int(row.request_id), 0.0, int(row.prompt_tokens), int(row.output_tokens))
        core.arrive(seq, prompts.prompt(seq.request_id, seq.prompt_tokens))
    core.state.arrivals_done = True
    while core.state.waiting or core.state.running:
        core.run(core.schedule(0.0), 0.0)
        assert core.prefix is not None and len(core.prefix.blocks) <= kv.num_cached
    assert kv.stats.evictions > 0
    assert len(core.prefix.blocks) == kv.num_cached


def test_an_aborted_request_leaves_its_blocks_cached(tiny):
    """A request aborted mid-decode frees its blocks into the cache; a later request
    behind the same system prompt hits them and emits the greedy reference's tokens."""
    table, segments = workload()
    kv = PrefixBlockManager(64, BLOCK, PrefixIdentity(table, segments))
    core = EngineCore(tiny, make_policy("continuous", max_num_batched_tokens=256), kv,
                      clock=lambda: 0.0)
    prompts = SegmentPrompts(table, segments, tiny.vocab_size)
    first = Sequence(0, 0.0, 47, 20)
    core.arrive(first, prompts.prompt(0, 47))
    for _ in range(3):
        core.run(core.schedule(0.0), 0.0)
    assert core.abort(0, "client left")
    later = Sequence(2, 0.0, 60, 7)
    ids = prompts.prompt(2, 60)
    core.arrive(later, ids)
    core.state.arrivals_done = True
    while core.state.waiting or core.state.running:
        core.run(core.schedule(0.0), 0.0)
    assert kv.stats.cached_tokens[2] == 32
    assert core.tokens[2][60:] == greedy(tiny, ids, 7)
    assert core.prefix is not None and len(core.prefix.blocks) == kv.num_cached


def test_simulator_replays_prefix_engine_exactly(served):
    """The engine's step times fed to the simulator with prefix caching on: same batches,
    every request's times within 1e-9 s, and the same cached tokens per request."""
    name, runs = served
    run = runs[True]
    table, segments = workload()
    cost = ReplayCost(run.result.steps)
    spec = ClusterSpec(make_policy(name, **POLICIES[name]), cost, kv_blocks=64,
                       block_size=BLOCK, prefix_caching=True, check_invariants=True)
    sim = simulate(table, spec, fast_forward=False, segments=segments)
    assert cost.next == len(run.result.steps)
    exact = [c for c in STEP_COLUMNS if c not in ("start_s", "end_s")]
    pd.testing.assert_frame_equal(sim.steps[exact], run.result.steps[exact])
    for col in ("start_s", "end_s"):
        np.testing.assert_allclose(sim.steps[col], run.result.steps[col], rtol=0, atol=1e-9)
    times = ["arrival_s", "scheduled_s", "first_token_s", "finish_s"]
    e = run.result.requests.set_index("request_id").sort_index()
    s = sim.requests.set_index("request_id").sort_index()
    np.testing.assert_allclose(s[times], e[times], rtol=0, atol=1e-9)
    assert (s["cached_tokens"] == e["cached_tokens"]).all()
    assert sim.prefix_stats == run.result.prefix_stats


def sessions():
    """Two closed-loop clients, sessions of 3 turns (turn t+1's prompt = turn t's prompt +
    answer + a new message); client 0's session starts with the 40-token system prompt."""
    table = pd.DataFrame({
        "request_id": range(6), "arrival_s": np.nan, "client_id": [0, 1] * 3,
        "think_s": [0.0, 0.01, 0.02, 0.005, 0.01, 0.005],
        "prompt_tokens": [20, 10, 12, 8, 9, 11], "output_tokens": [6, 21, 17, 4, 6, 5],
    })
    session, _, prompt = session_prompts(table, 2, 3, "test")
    system = np.where(session == 0, 0, -1)
    prompt = prompt + np.where(system >= 0, 40, 0)
    segments, start, stop = identity_segments(prompt, table["output_tokens"].to_numpy(),
                                              system, 40, 1, session)
    return table.assign(prompt_tokens=prompt, **{START: start, STOP: stop}), segments


def test_a_session_turn_reads_the_last_answer_in_its_prompt(tiny):
    table, segments = sessions()
    p = SegmentPrompts(table, segments, tiny.vocab_size)
    first = p.prompt(0, int(table.prompt_tokens[0]))  # 40 system + 20 message
    answer = [7, 8, 9, 10, 11, 12]
    p.finished(0, len(first), answer)
    second = p.prompt(2, int(table.prompt_tokens[2]))  # turn 2: 60 + 6 + 12 tokens
    assert len(second) == 78 and second[:60] == first and second[60:66] == answer


@pytest.mark.parametrize("name", sorted(POLICIES))
def test_session_hits_reuse_decoded_blocks_exactly(tiny, name):
    """Later turns hit the blocks earlier turns filled while decoding (their answers); the
    answers are in the next prompt, so the tokens equal reuse off."""
    table, segments = sessions()
    runs = {on: replay(table, tiny, make_policy(name, **POLICIES[name]), kv_blocks=64,
                       block_size=BLOCK, segments=segments, prefix_caching=on)
            for on in (False, True)}
    assert runs[True].outputs == runs[False].outputs
    hits = runs[True].result.requests.set_index("request_id")["cached_tokens"]
    # client 1, turn 2 (prompt 10 + answer 21 + message 8 = 39): turn 1 computed the KV
    # of 10 + 20 positions (never its last answer token's): 1 full block
    assert hits[3] == 16
    # client 0, turn 2 (40 + 20 + 6 + 12 = 78): turn 1 computed 40 + 20 + 5 = 65: 4 blocks
    assert hits[2] == 64
    cost = ReplayCost(runs[True].result.steps)
    spec = ClusterSpec(make_policy(name, **POLICIES[name]), cost, kv_blocks=64,
                       block_size=BLOCK, prefix_caching=True)
    sim = simulate(table, spec, fast_forward=False, segments=segments)
    e = runs[True].result.requests.set_index("request_id").sort_index()
    s = sim.requests.set_index("request_id").sort_index()
    cols = ["first_token_s", "finish_s", "cached_tokens"]
    np.testing.assert_allclose(s[cols], e[cols], rtol=0, atol=1e-9)


HARD = {  # 14 blocks: preemptions, re-admissions that hit their own blocks, evictions
    "preempt": ("continuous", {"max_num_batched_tokens": 256}, False),
    "speculative-preempt": ("continuous", {"max_num_batched_tokens": 256,
                                           "num_speculative_tokens": 3}, True),
}


@pytest.mark.parametrize("case", sorted(HARD))
def test_reuse_under_preemption_and_speculation(tiny, case):
    """Longer outputs on 14 blocks of 16: requests are preempted and re-admitted (finding
    their own blocks, decode-filled ones too), blocks are evicted; with a draft of the
    first 3 layers, speculative steps are trimmed. Tokens equal reuse off, and the replay
    is exact."""
    name, kw, speculate = HARD[case]
    table, segments = workload()
    table["output_tokens"] = 20
    table["arrival_s"] = 0.0  # all queued at once: the schedule does not follow the CPU's speed
    draft = layer_draft(tiny, 3) if speculate else None
    runs = {on: replay(table, tiny, make_policy(name, **kw), kv_blocks=14, block_size=BLOCK,
                       segments=segments, prefix_caching=on, draft=draft)
            for on in (False, True)}
    run = runs[True]
    assert run.outputs == runs[False].outputs
    stats = run.result.prefix_stats
    assert run.result.requests["preemptions"].sum() > 0 and stats.evictions > 0
    assert stats.saved_tokens > stats.hit_tokens  # re-admissions hit too
    cost = ReplayCost(run.result.steps)
    accept = ReplayAcceptance(tuple(tuple(a) for a in run.accepted)) if speculate else None
    spec = ClusterSpec(make_policy(name, **kw), cost, kv_blocks=14, block_size=BLOCK,
                       prefix_caching=True, speculative=accept, check_invariants=True)
    sim = simulate(table, spec, fast_forward=False, segments=segments)
    assert cost.next == len(run.result.steps)
    times = ["arrival_s", "scheduled_s", "first_token_s", "finish_s", "cached_tokens"]
    e = run.result.requests.set_index("request_id").sort_index()
    s = sim.requests.set_index("request_id").sort_index()
    np.testing.assert_allclose(s[times], e[times], rtol=0, atol=1e-9)
    assert sim.prefix_stats == stats


SCENARIO = """
name = "prefix-engine"
seed = 3
[model]
name = "tiny"
weight_dtype = "fp32"
[hardware]
gpu = "cpu"
[policy]
name = "continuous"
[kv]
prefix_caching = true
[workload]
arrival = "poisson"
rate = 20.0
num_requests = 8
prompt = { dist = "uniform", low = 8, high = 24 }
output = { dist = "uniform", low = 2, high = 4 }
system_prompt_tokens = 40
"""


def test_servesim_run_on_the_engine_records_the_simulators_hits(tmp_path):
    """``servesim run --backend engine`` with ``[kv] prefix_caching = true``: the results
    record ``cached_tokens`` per request and the summary's prefix keys, and the hits are
    the simulator's for the same table (2 blocks of the 40-token prompt, after the first)."""

    path = tmp_path / "s.toml"
    path.write_text(SCENARIO)
    outs = {}
    for backend in ("engine", "sim"):
        out = tmp_path / backend
        assert main(["run", str(path), "--backend", backend, "--out", str(out)]) == 0
        outs[backend] = out
    eng = pd.read_parquet(outs["engine"] / "requests.parquet").set_index("request_id")
    sim = pd.read_parquet(outs["sim"] / "requests.parquet").set_index("request_id")
    assert sorted(eng["cached_tokens"]) == [0] + [32] * 7
    assert (eng["cached_tokens"] == sim["cached_tokens"].reindex(eng.index)).all()
    summary = json.loads((outs["engine"] / "summary.json").read_text())
    row = summary[0] if isinstance(summary, list) else summary
    assert row["prefix_cached_tokens"] == 7 * 32 and row["prefill_tokens_saved"] == 7 * 32
