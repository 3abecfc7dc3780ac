"""vLLM v0 multi-step scheduling (``num_scheduler_steps``) on hand-checkable timelines.

Every forward pass costs 10 ms; KV blocks hold 4 tokens. A prefill is one pass; a decode
decision is ``n`` passes whose tokens all reach the client at the end of the last one.
"""

from __future__ import annotations

import numpy as np
import pytest
from helpers import TokenCost, table, timeline

from simulator.cluster import ClusterSpec, simulate
from simulator.metrics import itl_samples, request_metrics
from simulator.policies import ContinuousPolicy

STEP = TokenCost(step_s=0.01)


def run(policy: ContinuousPolicy, rows: list[tuple[float, int, int]], kv_blocks: int = 100,
        fast_forward: bool = True):  # noqa: ANN201
    spec = ClusterSpec(policy, STEP, kv_blocks=kv_blocks, block_size=4, check_invariants=True)
    return simulate(table(rows), spec, fast_forward=fast_forward)


@pytest.mark.parametrize("fast_forward", [True, False])
def test_tokens_arrive_in_chunks_of_n(fast_forward: bool) -> None:
    # n = 4. r0 (4 + 6), r1 (4 + 3) at 0, r2 (4 + 1) at .02.
    # 0-.01 prefill r0, r1 (first tokens). .01-.05 chunk: r0 tokens 2..5, r1 tokens 2, 3
    # (done; it stays in the batch to the end), all at .05. r2 arrived at .02 but waits
    # for the chunk: .05-.06 its prefill. .06-.10 chunk: r0's token 6, done at .10.
    res = run(ContinuousPolicy(num_scheduler_steps=4), [(0, 4, 6), (0, 4, 3), (0.02, 4, 1)],
              fast_forward=fast_forward)
    assert timeline(res.requests) == [(0, 0.0, 0.01, 0.1), (1, 0.0, 0.01, 0.05),
                                      (2, 0.05, 0.06, 0.06)]
    steps = res.steps  # one row per decision: the prefills, then the chunks of 4 passes
    assert steps["start_s"].round(9).tolist() == [0.0, 0.01, 0.05, 0.06]
    assert steps["end_s"].round(9).tolist() == [0.01, 0.05, 0.06, 0.1]
    assert steps["num_decode_seqs"].tolist() == [0, 2, 0, 1]
    assert steps["num_decode_tokens"].tolist() == [0, 2, 0, 1]  # requests served per chunk
    # ITL: one sample per request and chunk (vLLM's bench: the gap between two streamed
    # messages): the first chunk's 40 ms for r0 and r1; r0's last chunk reached it at .10,
    # 50 ms after its previous one at .05, since it waited through r2's prefill too
    values, weights = itl_samples(steps)
    assert np.round(values, 9).tolist() == [40.0, 50.0] and weights.tolist() == [2, 1]
    # TPOT stays per token: r0 (0.10 - 0.01) / 5 = 18 ms, r1 (0.05 - 0.01) / 2 = 20 ms
    tpot = request_metrics(res.requests)["tpot_ms"].round(9).tolist()
    assert tpot[:2] == [18.0, 20.0]


def test_one_step_is_todays_scheduling() -> None:
    # one pass per decision: r2 (arriving at .02) is prefilled in the very next step, which
    # multi-step would have deferred. 0-.01 prefill r0 + r1; .01-.02 decode both; .02-.03
    # prefill r2 (its only token); .03-.04 decode both (r1 done); r0 alone to .07.
    rows = [(0, 4, 6), (0, 4, 3), (0.02, 4, 1)]
    one = run(ContinuousPolicy(num_scheduler_steps=1), rows)
    default = run(ContinuousPolicy(), rows)
    assert timeline(one.requests) == timeline(default.requests) == [
        (0, 0.0, 0.01, 0.07), (1, 0.0, 0.01, 0.04), (2, 0.02, 0.03, 0.03)]
    assert one.steps.equals(default.steps)
    assert one.steps["num_prefill_tokens"].tolist() == [8, 0, 4, 0, 0, 0, 0]
    assert one.steps["num_decode_seqs"].tolist() == [0, 2, 0, 2, 1, 1, 1]


def test_a_chunk_reserves_its_blocks_up_front_and_preempts_then() -> None:
    # 3 blocks; r0 and r1 (4 + 5) hold 1 block each after the prefill. A 4-pass chunk
    # needs positions 4..7 for both: a 2nd block each, 1 free: r1 (newest) is preempted
    # before the chunk starts. .01-.05 r0 tokens 2..5 (done); .05-.06 r1 recomputes
    # 4 + 1 tokens (token 2); .06-.10 chunk: tokens 3..5, done at .10.
    res = run(ContinuousPolicy(num_scheduler_steps=4), [(0, 4, 5), (0, 4, 5)], kv_blocks=3)
    assert timeline(res.requests) == [(0, 0.0, 0.01, 0.05), (1, 0.0, 0.01, 0.1)]
    assert res.requests["preemptions"].tolist() == [0, 1]
