"""``mixed_chunks``: decodes ride along with prefill chunks (vLLM v1) or wait (SGLang) (issue 12).

Every step costs 10 ms (``TokenCost(step_s=0.01)``) and the token budget is 4, so a
timeline can be written down step by step.
"""

from __future__ import annotations

import itertools
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from helpers import TokenCost, table, timeline
from hypothesis import given, settings
from hypothesis import strategies as st

from servesim.cli import main
from simulator.cluster import ClusterSpec, simulate
from simulator.policies import ContinuousPolicy
from simulator.scenario_fields import rules

STEP = TokenCost(step_s=0.01)
# Two 2-token prompts with 6 outputs at 0, a 10-token prompt with 2 outputs at 5 ms.
ROWS = [(0, 2, 6), (0, 2, 6), (0.005, 10, 2)]


def run(policy: ContinuousPolicy, rows: list[tuple[float, int, int]], kv_blocks: int = 100,
        fast_forward: bool = True):  # noqa: ANN201
    spec = ClusterSpec(policy, STEP, kv_blocks=kv_blocks, block_size=4, check_invariants=True)
    return simulate(table(rows), spec, fast_forward=fast_forward)


def step_log(res) -> list[tuple[int, int]]:  # noqa: ANN001
    """(prefill tokens, decode rows) of each step."""
    steps = res.steps
    return list(zip(steps["num_prefill_tokens"].astype(int).tolist(),
                    steps["num_decode_seqs"].astype(int).tolist(), strict=True))


def chunked(mixed: bool, **knobs: object) -> ContinuousPolicy:
    return ContinuousPolicy(max_num_batched_tokens=4, chunked_prefill=True,
                            mixed_chunks=mixed, **knobs)


@pytest.mark.parametrize("fast_forward", [True, False])
def test_mixed_chunks_let_decodes_ride_along_with_the_prompt(fast_forward: bool) -> None:
    # 0-.01 prefill r0 + r1 (2 + 2 tokens; first tokens at .01). r2 arrives at .005.
    # .01-.06: r0 and r1 decode (2 tokens) and r2 takes the other 2 of the budget, five
    # times: r0/r1 tokens 2..6 at .02-.06 (done at .06), r2's 10th prompt token at .06
    # (its first token). .06-.07 r2 decodes its 2nd token alone.
    res = run(chunked(True), ROWS, fast_forward=fast_forward)
    assert step_log(res) == [(4, 0)] + [(2, 2)] * 5 + [(0, 1)]
    assert timeline(res.requests) == [(0, 0.0, 0.01, 0.06), (1, 0.0, 0.01, 0.06),
                                      (2, 0.01, 0.06, 0.07)]


@pytest.mark.parametrize("fast_forward", [True, False])
def test_unmixed_chunks_prefill_first_and_stall_the_decodes(fast_forward: bool) -> None:
    # SGLang: prefill has priority and a prefill batch holds no decodes.
    # 0-.01 prefill r0 + r1 (first tokens at .01). .01-.04 r2's prompt in chunks of 4, 4
    # and 2 while r0 and r1 wait (r2's first token at .04). .04-.05 all three decode:
    # r2's 2nd token ends it at .05, r0/r1 get token 2. .05-.09 r0/r1 tokens 3..6.
    res = run(chunked(False), ROWS, fast_forward=fast_forward)
    assert step_log(res) == [(4, 0), (4, 0), (4, 0), (2, 0), (0, 3)] + [(0, 2)] * 4
    assert timeline(res.requests) == [(0, 0.0, 0.01, 0.09), (1, 0.0, 0.01, 0.09),
                                      (2, 0.01, 0.04, 0.05)]


def test_one_request_at_a_time_is_mid_prompt() -> None:
    # Two 6-token prompts at 0, budget 4: r0 takes 4; then r0's last 2 and r1's first 2
    # (r0's first token at .02); then r1's last 4 (.03) while r0 waits; then decodes.
    res = run(chunked(False), [(0, 6, 3), (0, 6, 3)])
    assert step_log(res) == [(4, 0), (4, 0), (4, 0), (0, 2), (0, 2)]
    assert timeline(res.requests) == [(0, 0.0, 0.02, 0.05), (1, 0.01, 0.03, 0.05)]


def test_unmixed_decodes_when_nothing_can_be_admitted() -> None:
    # max_num_seqs 2: r2 cannot start while r0 and r1 run, so the replica decodes them
    # (no stall) and prefills r2 in the step after r0 and r1 finish at .03.
    res = run(chunked(False, max_num_seqs=2), [(0, 2, 3), (0, 2, 3), (0, 2, 2)])
    assert step_log(res) == [(4, 0), (0, 2), (0, 2), (2, 0), (0, 1)]
    assert timeline(res.requests)[2] == (2, 0.03, 0.04, 0.05)


@pytest.mark.parametrize("mixed", [False])  # True is the default: nothing to compare
def test_without_chunked_prefill_the_knob_changes_nothing(mixed: bool) -> None:
    rows = [(0, 3, 5), (0.004, 6, 2), (0.012, 2, 7), (0.02, 5, 1)]
    base = run(ContinuousPolicy(max_num_batched_tokens=16), rows, kv_blocks=6)
    other = run(ContinuousPolicy(max_num_batched_tokens=16, mixed_chunks=mixed), rows,
                kv_blocks=6)
    pd.testing.assert_frame_equal(base.requests, other.requests)
    pd.testing.assert_frame_equal(base.steps, other.steps)


def test_the_knob_is_a_typed_field_defaulting_to_mixed(tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    assert ContinuousPolicy().mixed_chunks is True
    assert {r.name: r.kind for r in rules(ContinuousPolicy)}["mixed_chunks"] == "bool"
    path = tmp_path / "s.toml"
    path.write_text('[policy]\nname = "continuous"\nmixed_chunks = "no"\n')
    assert main(["run", str(path), "--out", str(tmp_path / "o")]) == 2
    assert ("policy.mixed_chunks = 'no': must be true or false"
            in capsys.readouterr().err)


requests = st.lists(st.tuples(st.floats(0, 1), st.integers(1, 40), st.integers(1, 30)),
                    min_size=1, max_size=20)
KNOBS = list(itertools.product(["greedy", "no_evict", "conservative"],
                               ["newest", "fewest_outputs"]))


def _table(rows: list[tuple[float, int, int]]) -> pd.DataFrame:
    return table(sorted(rows))


@pytest.mark.parametrize(("admission", "preemption"), KNOBS)
@settings(max_examples=25, deadline=None)
@given(rows=requests, budget=st.integers(4, 48), seqs=st.integers(1, 6),
       kv_blocks=st.integers(4, 40))
def test_unmixed_invariants_and_fast_forward(  # type: ignore[no-untyped-def]
        admission, preemption, rows, budget, seqs, kv_blocks) -> None:
    policy = ContinuousPolicy(max_num_seqs=seqs, max_num_batched_tokens=budget,
                              chunked_prefill=True, mixed_chunks=False,
                              admission=admission, preemption=preemption)
    cost = TokenCost(step_s=0.003, prefill_token_s=1e-4, decode_seq_s=2e-4)
    spec = ClusterSpec(policy, cost, kv_blocks=kv_blocks, block_size=4, check_invariants=True)
    fast = simulate(_table(rows), spec, fast_forward=True)
    slow = simulate(_table(rows), spec, fast_forward=False)
    recs, steps = fast.requests, fast.steps
    assert set(recs["status"]) <= {"finished", "rejected"}
    assert (steps["kv_blocks_used"] <= kv_blocks).all()
    assert (steps["kv_blocks_used"].tail(1) == 0).all()  # all returned at the end
    # a step prefills or decodes, never both
    assert ((steps["num_prefill_tokens"] == 0) | (steps["num_decode_seqs"] == 0)).all()
    assert (steps["num_prefill_tokens"] + steps["num_decode_seqs"] <= budget).all()
    done = recs[recs["status"] == "finished"]
    assert steps["num_decode_tokens"].sum() == (done["output_tokens"] - 1).sum()
    if admission == "no_evict":
        assert recs["preemptions"].sum() == 0
    # the fast-forward (decode clock) gives what stepping gives
    cols = ["scheduled_s", "first_token_s", "finish_s"]
    np.testing.assert_allclose(fast.requests[cols], slow.requests[cols], rtol=1e-9, atol=1e-9)
    assert fast.requests["preemptions"].tolist() == slow.requests["preemptions"].tolist()
    int_cols = ["num_prefill_tokens", "num_decode_seqs", "num_decode_tokens", "num_running",
                "queue_len", "kv_blocks_used"]
    assert fast.steps[int_cols].values.tolist() == slow.steps[int_cols].values.tolist()


def whole(mixed_prefill: bool, budget: int, admission: str = "greedy") -> ContinuousPolicy:
    return ContinuousPolicy(max_num_batched_tokens=budget, mixed_prefill=mixed_prefill,
                            admission=admission)  # type: ignore[arg-type]


@pytest.mark.parametrize("fast_forward", [True, False])
def test_mixed_prefill_puts_whole_prompts_beside_the_decodes(fast_forward: bool) -> None:
    # TensorRT-LLM in-flight batching, budget 12. .00-.01 prefill r0 + r1 (2 + 2). At .01
    # r0/r1 decode (2 tokens) and r2's whole 10-token prompt takes 10 of the other 10:
    # one step of (10 prefill, 2 decode rows), r2's first token at .02. .02-.03 three
    # decodes (r2's 2nd token: done); r0/r1 decode to their 6th token at .06.
    res = run(whole(True, 12), ROWS, fast_forward=fast_forward)
    assert step_log(res) == [(4, 0), (10, 2), (0, 3)] + [(0, 2)] * 3
    assert timeline(res.requests) == [(0, 0.0, 0.01, 0.06), (1, 0.0, 0.01, 0.06),
                                      (2, 0.01, 0.02, 0.03)]


@pytest.mark.parametrize("fast_forward", [True, False])
def test_mixed_prefill_never_splits_a_prompt(fast_forward: bool) -> None:
    # Budget 11 (no_evict, as TensorRT-LLM: the prompt alone must fit the budget): beside 2
    # decodes only 9 tokens are left, and a prompt is never chunked, so r2 (10) waits
    # until r0/r1 end at .06: prefill .06-.07 alone, decode .07-.08.
    res = run(whole(True, 11, "no_evict"), ROWS, fast_forward=fast_forward)
    assert step_log(res) == [(4, 0)] + [(0, 2)] * 5 + [(10, 0), (0, 1)]
    assert timeline(res.requests)[2] == (2, 0.06, 0.07, 0.08)


def test_without_mixed_prefill_a_prompt_stalls_the_decodes() -> None:
    # vLLM v0: r2's prompt gets a prefill-only step .01-.02 (its first token); r0/r1 stall
    # there and end at .07; r2's 2nd token at .03.
    res = run(whole(False, 12), ROWS)
    assert step_log(res) == [(4, 0), (10, 0), (0, 3)] + [(0, 2)] * 4
    assert timeline(res.requests) == [(0, 0.0, 0.01, 0.07), (1, 0.0, 0.01, 0.07),
                                      (2, 0.01, 0.02, 0.03)]
