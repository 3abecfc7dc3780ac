"""Requests leave lists by identity: the helpers find what ``list.remove``/``index`` find.

- ``remove_same``/``index_same`` take the first element that *is* the item, as
  ``list.remove`` does for objects that compare by identity (``Sequence``: ``eq=False``),
  and raise ``ValueError`` for an absent one.
- ``finish_members`` with two members finishing at one step retires them in running order
  and leaves the others in theirs (a hand-built replica of four decoders).
"""

from __future__ import annotations

import pytest

from simulator.kvcache import BlockManager
from simulator.policies import Sequence, ServerState
from simulator.policies.identity import index_same, remove_same
from simulator.policies.step import finish_members


def test_remove_and_index_by_identity() -> None:
    a, b, c = (Sequence(i, 0.0, prompt_tokens=4, output_tokens=2) for i in range(3))
    items = [a, b, c, b]
    assert index_same(items, b) == 1 == items.index(b)
    remove_same(items, b)
    assert items == [a, c, b]  # the first b went, as list.remove takes it
    remove_same(items, b)
    assert items == [a, c]
    with pytest.raises(ValueError):
        remove_same(items, b)
    with pytest.raises(ValueError):
        index_same(items, Sequence(0, 0.0, prompt_tokens=4, output_tokens=2))


def test_two_members_finish_in_running_order() -> None:
    state = ServerState(kv=BlockManager(num_blocks=100, block_size=4))
    # outputs 9, 3, 9, 3 (first token out): requests 1 and 3 finish after 2 more steps
    for i, output in enumerate((9, 3, 9, 3)):
        seq = Sequence(i, 0.0, prompt_tokens=5, output_tokens=output)
        state.kv.allocate(seq.request_id, 5)
        seq.num_computed, seq.num_generated = 5, 1
        state.running.append(seq)
    for seq in reversed(state.running):  # joined in reverse: request 3 before request 1
        state.clock.join(seq)
    done = state.clock.advance(2)
    assert [s.request_id for s in done] == [3, 1]  # the clock's join order
    finished: list[Sequence] = []
    finish_members(state, done, 7.5, finished)
    assert [s.request_id for s in finished] == [1, 3]  # running order
    assert [s.request_id for s in state.running] == [0, 2]
    assert all(s.finish_s == 7.5 for s in finished)
    assert state.kv.used == 2 * 2  # requests 0 and 2 hold 2 blocks each (5 + 2 tokens)
