"""The per-decision shortcuts of continuous batching give the values they replace.

- ``DecodeClock.next_step`` is ``openings_now``, ``context_tokens`` and ``soonest_finish``
  in one call (hand-counted on three members with 4-token blocks).
- The piecewise model's decode pricer keeps each row count's partial sum: still exactly
  ``step_time`` of the decode shape, with row counts interleaved (hand-summed once).
- ``plan_short_run`` given the first step's price plans the same run as without it.
"""

from __future__ import annotations

import pytest

from simulator.costs.piecewise import PiecewiseCost
from simulator.fastforward import plan_short_run
from simulator.kvcache import BlockManager
from simulator.policies import ContinuousPolicy, Sequence, ServerState
from simulator.shapes import StepShape

PIECEWISE = PiecewiseCost(decode_step_s=0.01, single_token_step_s=0.004, knee1_tokens=4,
                          knee1_token_s=0.001, knee2_tokens=64, knee2_token_s=0.002,
                          decode_seq_s=1e-4, decode_context_s=1e-6, admit_s=0.5,
                          finish_s=1e-3, prefill_token_s=0.3, prefill_attn_s=0.2)


def _three_decoders() -> ServerState:
    """Prompts of 5, 6 and 7 tokens, each with its first token out; 20, 3 and 20 to emit."""
    state = ServerState(kv=BlockManager(num_blocks=100, block_size=4))
    for i, (prompt, output) in enumerate(((5, 20), (6, 3), (7, 20))):
        seq = Sequence(i, 0.0, prompt_tokens=prompt, output_tokens=output)
        state.kv.allocate(seq.request_id, prompt)
        seq.num_computed, seq.num_generated = prompt, 1
        state.running.append(seq)
        state.clock.join(seq)
    return state


def test_next_step_is_the_three_reads() -> None:
    state = _three_decoders()
    clock = state.clock
    # tokens written at positions 5, 6, 7 (none opens a block); they attend 6 + 7 + 8;
    # the second request has 2 tokens left
    assert clock.next_step() == (0, 21, 2, 1)
    clock.advance(1)
    # positions 6, 7, 8: the third opens its third block; 7 + 8 + 9 attended; 1 left
    assert clock.next_step() == (1, 24, 1, 1)
    assert clock.next_step() == (clock.openings_now(), clock.context_tokens(),
                                 *clock.soonest_finish())


def test_piecewise_decode_pricer_keeps_partial_sums_exact() -> None:
    price = PIECEWISE.decode_pricer()
    # D = 8, C = 1000, one finishing: 0.01 + 0.001 * (8 - 4) + 1e-4 * 8 + 1e-6 * 1000 + 1e-3
    assert price(8, 1000, 1) == pytest.approx(0.0168, abs=1e-15)
    for d, c, f in ((8, 1000, 0), (1, 7, 1), (8, 1008, 2), (100, 9000, 0), (1, 8, 0),
                    (8, 1000, 1), (100, 9100, 3), (2, 30, 0)):
        shape = StepShape(num_decode_seqs=d, decode_context_tokens=c, num_finished=f)
        assert price(d, c, f) == PIECEWISE.step_time(shape), (d, c, f)


@pytest.mark.parametrize("stop_s", [0.0, 0.0105, 0.0215, 1.0])
def test_short_run_given_its_first_price_plans_the_same_run(stop_s: float) -> None:
    price = PIECEWISE.decode_pricer()
    runs = []
    for first in (False, True):
        state = _three_decoders()
        batch = ContinuousPolicy()._decode_all(state)
        assert batch is not None and batch.cohort is not None
        shape = batch.shape
        first_s = price(shape.num_decode_seqs, shape.decode_context_tokens, 0) if first else None
        runs.append(plan_short_run(state, batch, 2, 0.0, stop_s, price, first_s))
    assert runs[0] == runs[1]
    # 2 steps until the second request finishes, unless the stop cuts the run at the first
    assert len(runs[0].ends) == (1 if stop_s < runs[0].ends[0] else 2)
