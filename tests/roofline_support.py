"""Shared check for the roofline prior's two paths (tests/test_attention_dp.py,
tests/test_deepseek.py): one step's floats and many steps' arrays give the same seconds."""

from __future__ import annotations

from simulator.costs.roofline import RooflineCost
from simulator.shapes import StepShape, StepShapes

# (prompt tokens, cached prefix, decode rows, admitted, finished): decode alone, a large
# decode batch, a prompt alone, a mixed step over a cached prefix, a large mixed step
MIXES = [(0, 0, 1, 0, 0), (0, 0, 777, 0, 3), (4096, 0, 0, 4, 0), (333, 2000, 64, 1, 1),
         (8192, 100, 2048, 9, 7)]


def assert_one_and_many_agree(cost: RooflineCost) -> None:
    """``cost``'s scalar step time, vectorised step times and decode pricer agree bit for
    bit over :data:`MIXES` (900 tokens of context a decode row)."""
    shapes = [StepShape(num_prefill_tokens=p, prefill_attn_work=p * (p / 2 + c0),
                        num_decode_seqs=d, decode_context_tokens=d * 900,
                        num_admitted=a, num_finished=f)
              for p, c0, d, a, f in MIXES]
    many = cost.step_times(StepShapes.from_shapes(shapes))
    assert many.tolist() == [cost.step_time(s) for s in shapes]
    for s in shapes:
        if s.num_prefill_tokens == 0:
            assert cost.decode_pricer()(s.num_decode_seqs, s.decode_context_tokens,
                                        s.num_finished) == cost.step_time(s)
