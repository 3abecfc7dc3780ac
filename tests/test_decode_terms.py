"""A short decode run priced from its terms (``DecodeTerms``) equals the per-step calls.

``plan_short_run`` reads a piecewise profile's decode terms once and sums each step's
price inline; any other pricer is called per step. Both must give the same floats:
checked by hand on a three-step run, and bit for bit against the same prices behind a
plain function on runs of many lengths and cuts. The KV counts of a run
(``kvcache.used_after_steps``, a loop over the block openings in a cycle) are counted by
hand.
"""

from __future__ import annotations

import pytest

from simulator.costs.decode_terms import DecodeTerms
from simulator.costs.piecewise import PiecewiseCost
from simulator.fastforward import plan_short_run
from simulator.kvcache import BlockManager, used_after_steps, used_sum_after_steps
from simulator.policies.state import Batch, Sequence, ServerState
from simulator.shapes import StepShape

PIECEWISE = PiecewiseCost(decode_step_s=0.01, single_token_step_s=0.004, knee1_tokens=4,
                          knee1_token_s=0.001, knee2_tokens=64, knee2_token_s=0.002,
                          decode_seq_s=1e-4, decode_context_s=1e-6, admit_s=0.5,
                          finish_s=1e-3, prefill_token_s=0.3, prefill_attn_s=0.2,
                          mixed_step_s=0.02, prefill_step_s=0.015)


def _decoding(rows: int, prompt: int, outputs: list[int]) -> tuple[ServerState, Batch]:
    """``rows`` requests past their prompt of ``prompt`` tokens, decoding together."""
    state = ServerState(kv=BlockManager(10_000, 16))
    seqs = []
    for i in range(rows):
        s = Sequence(i, 0.0, prompt, outputs[i % len(outputs)])
        s.computed_base, s.generated_base = prompt + 1, 1
        state.kv.allocate(i, prompt + 2)  # the step's token is cached
        seqs.append(s)
    state.running.extend(seqs)
    shape = StepShape(num_decode_seqs=rows, decode_context_tokens=rows * (prompt + 1))
    return state, Batch([], seqs, shape)


def test_piecewise_pricer_is_its_terms() -> None:
    price = PIECEWISE.decode_pricer()
    assert isinstance(price, DecodeTerms)
    # 0.01 + 0.001 * (8 - 4) + 1e-4 * 8 = 0.0148; + 1e-6 * C; + 1e-3 per finish
    assert price.base(8) == pytest.approx(0.0148, abs=1e-15)
    assert price(8, 1000, 0) == pytest.approx(0.0158, abs=1e-15)
    assert price(8, 1000, 2) == pytest.approx(0.0178, abs=1e-15)


def test_short_run_by_hand() -> None:
    state, batch = _decoding(8, 124, [4])  # C = 8 x 125 = 1000; everyone has 3 steps left
    run = plan_short_run(state, batch, 3, 1.0, float("inf"), PIECEWISE.decode_pricer())
    # steps at C = 1000, 1008, 1016; the last finishes all 8: + 8 ms
    assert run.ends == pytest.approx([1.0158, 1.031608, 1.055424], abs=1e-12)
    assert run.rows == 8 and run.context_tokens == 1000


INF = float("inf")


@pytest.mark.parametrize(("rows", "k", "stop", "cut"), [
    (1, 2, INF, False), (3, 40, INF, False), (8, 40, 1.2, True), (64, 120, INF, False),
    (64, 120, 3.0, True), (100, 17, 1.05, True)])
def test_terms_give_the_calls_floats(rows: int, k: int, stop: float, cut: bool) -> None:
    terms = PIECEWISE.decode_pricer()

    def called(d: int, c: int, f: int) -> float:  # not DecodeTerms: priced call by call
        return terms(d, c, f)

    for first in (None, terms(rows, rows * 300, 0)):
        state, batch = _decoding(rows, 299, [k, k + 5])
        fast = plan_short_run(state, batch, k, 1.0, stop, terms, first)
        slow = plan_short_run(state, batch, k, 1.0, stop, called, first)
        assert fast.ends == slow.ends  # every float, not to a tolerance
        assert (fast.kv_used, fast.openings) == (slow.kv_used, slow.openings)
    assert cut == (len(fast.ends) < k)  # the stops inside the run did cut it


def test_used_after_steps_by_hand() -> None:
    assert used_after_steps([1, 0, 2], 4, 10) == [10, 11, 11, 13, 14]
    assert used_after_steps([1, 0, 2], 0, 10) == [10]
    assert used_after_steps([], 3, 7) == [7]  # nothing to cycle through


def test_used_sum_after_steps_by_hand() -> None:
    assert used_sum_after_steps([1, 0, 2], 4, 10) == (10 + 11 + 11 + 13 + 14, 14)
    assert used_sum_after_steps([1, 0, 2], 0, 10) == (10, 10)
    assert used_sum_after_steps([], 3, 7) == (28, 7)  # no openings: 7 at every step
