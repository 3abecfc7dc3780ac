"""Chunked prefill's runs step by step: ChunkRun's shapes and the decode clock's rotations.

Every figure below is worked by hand from the setup each test states (block size 4).
"""

from __future__ import annotations

import pytest

from simulator.kvcache import BlockManager
from simulator.policies import ContinuousPolicy, Sequence, ServerState
from simulator.policies.chunk_runs import chunk_run
from simulator.policies.state import Batch
from simulator.policies.step import decode_cohort


def _member(state: ServerState, request_id: int, computed: int, output_tokens: int) -> Sequence:
    """A running request that has emitted its first token and decodes on the clock."""
    seq = Sequence(request_id, 0.0, prompt_tokens=computed, output_tokens=output_tokens)
    state.kv.allocate(request_id, computed)
    seq.num_computed, seq.num_generated = computed, 1
    state.running.append(seq)
    state.clock.join(seq)
    return seq


def test_openings_after_rotates_the_residue_counts() -> None:
    # members with 5, 6, 7 tokens cached: -5 % 4 = 3, -6 % 4 = 2, -7 % 4 = 1
    state = ServerState(kv=BlockManager(num_blocks=100, block_size=4))
    members = [_member(state, i, 5 + i, 40) for i in range(3)]
    clock = state.clock
    # the next step writes positions 5, 6, 7 (tokens 6 to 8): none opens a third block
    assert clock.openings_now() == 0
    # then positions 6-8, 7-9, 8-10, 9-11: the 9th token (position 8) opens block 3,
    # for the 7-token member first, then the 6-token one, then the 5-token one
    assert clock.openings_after() == [1, 1, 1, 0]
    assert clock.openings_after() == decode_cohort(members, 4).block_openings
    for _ in range(2):  # two steps, as the policy takes them: the second opens a block
        state.kv.take(clock.openings_now())
        clock.tick()
    assert state.kv.used == 2 + 2 + 2 + 1
    # positions 7, 8, 9 are next (the 6-token member opens)
    assert (clock.steps, clock.openings_now()) == (2, 1)
    # after it, positions 8-10 (the 5-token member opens), 9-11 (none), 10-12 (the
    # 7-token member's 13th token opens block 4), 11-13 (the 6-token member's)
    assert clock.openings_after() == [1, 0, 1, 1]
    state.preempt(members[1])  # the 6-token member leaves the clock: its residue 2 goes
    assert clock.openings_after() == [1, 0, 1, 0]
    state.check()


@pytest.mark.parametrize(
    ("num_blocks", "member_output", "another_waits", "expected"),
    [
        # 95 blocks free, nobody else: chunks 5, 5, then the last 2 tokens
        (100, 50, False, [(5, 37.5, 10, 0), (5, 62.5, 11, 0), (2, 32.0, 12, 0)]),
        # someone waits: the last chunk leaves budget for admission, which decides it
        (100, 50, True, [(5, 37.5, 10, 0), (5, 62.5, 11, 0)]),
        # the member has 3 tokens left, the step after the batch's included: it finishes
        # at the second step, and its run ends there
        (100, 4, False, [(5, 37.5, 10, 0), (5, 62.5, 11, 1)]),
        # 2 free blocks: each chunk opens one, so the third would preempt
        (7, 50, False, [(5, 37.5, 10, 0), (5, 62.5, 11, 0)]),
    ],
)
def test_chunk_run_lists_the_steps_the_policy_would_decide(
    num_blocks: int, member_output: int, another_waits: bool,
    expected: list[tuple[int, float, int, int]],
) -> None:
    # Block size 4, a 6-token budget. One member with 8 tokens cached (3 blocks with its
    # next token's). A 17-token prompt waits: the policy's step decodes the member and
    # admits the prompt's first chunk of 6 - 1 = 5 tokens (2 blocks): 5 blocks used.
    # After that step the member attends 9 + 1 = 10 tokens, then 11, 12; the prompt's
    # chunks are 5 (attention 5 * (5 + 5/2)), 5 (5 * (10 + 5/2)), then 2 (2 * (15 + 1)),
    # each opening one block (10, 15, 17 tokens: 3, 4, 5 blocks); the member's tokens 10
    # to 12 open none (its 13th would).
    state = ServerState(kv=BlockManager(num_blocks=num_blocks, block_size=4))
    _member(state, 0, 8, member_output)
    prompt = Sequence(1, 0.0, prompt_tokens=17, output_tokens=3)
    state.waiting.append(prompt)
    if another_waits:
        state.waiting.append(Sequence(2, 0.0, prompt_tokens=17, output_tokens=3))
    policy = ContinuousPolicy(chunked_prefill=True, max_num_batched_tokens=6)
    batch = policy.schedule(state, 0.0)
    assert isinstance(batch, Batch)
    assert [(s.request_id, n) for s, n in batch.prefill] == [(1, 5)]
    assert state.kv.used == 5
    run = chunk_run(policy, state, batch)
    assert run is not None
    shapes = []
    while (shape := run.next_shape()) is not None:
        shapes.append(shape)
    assert [(s.num_prefill_tokens, s.prefill_attn_work, s.decode_context_tokens,
             s.num_finished) for s in shapes] == expected
    assert all(s.num_decode_seqs == 1 and s.num_admitted == 0 for s in shapes)
    assert run.next_shape() is None  # over for good
    assert state.kv.used == 5  # planning takes nothing


def test_no_run_when_the_prompt_ends_with_the_batch() -> None:
    # a 4-token prompt fits the first chunk (budget 5): it emits its first token and joins
    state = ServerState(kv=BlockManager(num_blocks=100, block_size=4))
    _member(state, 0, 8, 50)
    state.waiting.append(Sequence(1, 0.0, prompt_tokens=4, output_tokens=3))
    policy = ContinuousPolicy(chunked_prefill=True, max_num_batched_tokens=6)
    batch = policy.schedule(state, 0.0)
    assert isinstance(batch, Batch) and batch.prefill[0][1] == 4
    assert chunk_run(policy, state, batch) is None
