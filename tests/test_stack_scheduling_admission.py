"""Stack scheduler knobs on hand-checkable timelines: admission, watermark, limits (issue 12).

Every step costs 10 ms (``TokenCost(step_s=0.01)``), KV blocks hold 4 tokens, and every
request arrives at 0 unless said. Token k of a request (1-based) is computed at position
``prompt + k - 2`` (the first comes from the prefill); a decode that computes position p
opens a KV block when ``p % 4 == 0``.
"""

from __future__ import annotations

import pytest
from helpers import TokenCost, table, timeline

from simulator.cluster import ClusterSpec, simulate
from simulator.metrics import summarize
from simulator.policies import ContinuousPolicy
from simulator.policies.token_ratio import MIN_NEW_TOKEN_RATIO, TokenRatio

STEP = TokenCost(step_s=0.01)
ROWS = [(0, 4, 4), (0, 4, 8), (0, 4, 4)]  # 2, 3 and 2 blocks for their whole prompt + output


def run(policy: ContinuousPolicy, rows: list[tuple[float, int, int]], kv_blocks: int,
        fast_forward: bool = True):  # noqa: ANN201
    spec = ClusterSpec(policy, STEP, kv_blocks=kv_blocks, block_size=4, check_invariants=True)
    return simulate(table(rows), spec, fast_forward=fast_forward)


@pytest.mark.parametrize("fast_forward", [True, False])
def test_no_evict_admits_what_fits_whole_and_never_preempts(fast_forward: bool) -> None:
    # 5 blocks. no_evict: r0 reserves 2 (3 left), r1 3 (0 left): r2 (2) waits.
    # 0-.01 prefill r0, r1 (first tokens). .01-.04 three decodes: r0 ends at .04 (4 tokens)
    # and hands back its 2 blocks: r2 fits. .04-.05 prefill r2 (r1 stalls). .05-.09 r1
    # decodes tokens 5..8 (done .09); r2 decodes tokens 2..4 at .06-.08.
    res = run(ContinuousPolicy(admission="no_evict"), ROWS, 5, fast_forward)
    assert timeline(res.requests) == [(0, 0.0, 0.01, 0.04), (1, 0.0, 0.01, 0.09),
                                      (2, 0.04, 0.05, 0.08)]
    assert res.requests["preemptions"].tolist() == [0, 0, 0]
    assert res.steps["num_running"].max() == 2
    # greedy admits all three at 0; at .01-.02 each opens its 2nd block, 2 are free:
    # r2 (newest) is preempted
    greedy = run(ContinuousPolicy(), ROWS, 5, fast_forward)
    assert greedy.requests["preemptions"].tolist() == [0, 0, 1]


def test_no_evict_runs_as_many_as_fit_and_no_more() -> None:
    # 2000 + 200 tokens = 138 blocks of 16; 4 x 138 + 100 = 652 blocks hold 4 of them.
    rows = [(0, 2000, 200)] * 12
    spec = ClusterSpec(ContinuousPolicy(admission="no_evict", chunked_prefill=True),
                       TokenCost(step_s=0.01), kv_blocks=652, block_size=16)
    res = simulate(table(rows), spec)
    assert res.steps["num_running"].max() == 4
    assert res.requests["preemptions"].sum() == 0
    assert (res.requests["status"] == "finished").all()
    greedy = ClusterSpec(ContinuousPolicy(chunked_prefill=True), TokenCost(step_s=0.01),
                         kv_blocks=652, block_size=16)
    assert simulate(table(rows), greedy).requests["preemptions"].sum() > 0


def test_watermark_keeps_blocks_back_from_admission() -> None:
    # 5 blocks, watermark 0.4 keeps int(0.4 x 5) = 2 free. r0 (8 + 2): 2 blocks, 2 + 2 <= 5.
    # r1: 2 + 2 > 3 free: waits. 0-.01 prefill r0; .01-.02 decode (position 8 opens a
    # block), r0 done at .02; .02-.03 prefill r1; .03-.04 its decode.
    res = run(ContinuousPolicy(kv_watermark=0.4), [(0, 8, 2), (0, 8, 2)], 5)
    assert timeline(res.requests) == [(0, 0.0, 0.01, 0.02), (1, 0.02, 0.03, 0.04)]


def test_a_request_the_watermark_never_lets_in_is_refused() -> None:
    # 10 blocks, watermark 0.1 keeps 1: a 39-token prompt needs all 10 blocks.
    res = run(ContinuousPolicy(kv_watermark=0.1), [(0, 39, 1), (0, 8, 1)], 10)
    recs = res.requests.set_index("request_id")
    assert recs.loc[0, "status"] == "rejected"
    assert recs.loc[0, "reason"].startswith("prompt + output over the replica's KV cache: 39+1")
    assert recs.loc[1, "status"] == "finished"


def test_max_model_len_refuses_with_the_lengths_and_counts_the_cause() -> None:
    res = run(ContinuousPolicy(max_model_len=16), [(0, 10, 6), (0, 10, 7)], 100)
    recs = res.requests.set_index("request_id")
    assert recs.loc[0, "status"] == "finished"
    assert recs.loc[1, "status"] == "rejected"
    assert recs.loc[1, "reason"] == ("prompt + output over max_model_len: prompt 10 + output "
                                     "7 = 17 tokens > max_model_len = 16")
    summary = summarize(res.requests, res.steps)
    assert summary["rejected_by_cause"] == {"prompt + output over max_model_len": 1}


def test_padded_prefill_counts_rows_times_the_longest_prompt() -> None:
    # budget 16: 8 + 4 + 4 = 16 fits unpadded; padded, 2 rows x 8 = 16 and 3 x 8 = 24 > 16.
    rows = [(0, 8, 1), (0, 4, 1), (0, 4, 1)]
    plain = run(ContinuousPolicy(max_num_batched_tokens=16), rows, 100)
    assert plain.steps["num_prefill_tokens"].tolist() == [16]
    padded = run(ContinuousPolicy(max_num_batched_tokens=16, padded_prefill=True), rows, 100)
    assert padded.steps["num_prefill_tokens"].tolist() == [12, 4]
    assert timeline(padded.requests) == [(0, 0.0, 0.01, 0.01), (1, 0.0, 0.01, 0.01),
                                         (2, 0.01, 0.02, 0.02)]


def test_conservative_admission_counts_future_output_at_the_ratio() -> None:
    # 10 blocks = 40 tokens; three requests of 4 + 12. Step 0: room 40; r0 needs
    # 4 + 12 = 16 < 40 (room 24), r1 16 < 24 (room 8), r2 16 >= 8: waits (greedy would
    # admit it). Step 1: 2 blocks held, room = 8 x 4 - 0.7 x (11 + 11) = 16.6 > 16: r2 in.
    res = run(ContinuousPolicy(admission="conservative"), [(0, 4, 12)] * 3, 10)
    assert res.steps["num_prefill_tokens"].tolist()[:2] == [8, 4]
    greedy = run(ContinuousPolicy(), [(0, 4, 12)] * 3, 10)
    assert greedy.steps["num_prefill_tokens"].tolist()[0] == 12


def test_the_new_token_ratio_decays_per_decode_step_and_restarts() -> None:
    ratio = TokenRatio()
    assert ratio.value(0) == pytest.approx(0.7)
    assert ratio.value(300) == pytest.approx(0.7 - 300 * (0.7 - 0.098) / 600)  # 0.399
    assert ratio.value(10_000) == pytest.approx(MIN_NEW_TOKEN_RATIO) == pytest.approx(0.098)
    ratio.set(0.5, 100)  # a retraction's estimate at decode step 100
    assert ratio.value(100) == 0.5
