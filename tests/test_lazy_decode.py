"""The lazy decode clock gives the same sequences, KV and records as eager bookkeeping.

- Driven like the real engine (schedule -> complete, one step at a time), every
  sequence's counters read exactly what the per-request loop gives, after every step.
- Write-back is exact when a member is preempted or finishes.
- Whole simulations under KV pressure keep the clock's invariants and match eager runs.
"""

from __future__ import annotations

from dataclasses import replace

import pytest
from helpers import TokenCost, table
from hypothesis import given, settings
from hypothesis import strategies as st
from test_sim_speedpaths import SlowContinuous

from simulator.cluster import ClusterSpec, simulate
from simulator.kvcache import BlockManager
from simulator.policies import Batch, ContinuousPolicy, Sequence, ServerState, complete

COST = TokenCost(step_s=0.003, prefill_token_s=1e-4, decode_seq_s=2e-4)

workloads = st.lists(st.tuples(st.integers(1, 40), st.integers(1, 30)), min_size=1, max_size=12)


def _view(seq: Sequence) -> tuple[int, int, int, bool, float, float, int]:
    return (seq.num_computed, seq.num_generated, seq.remaining, seq.decoding,
            seq.first_token_s, seq.finish_s, seq.preemptions)


@settings(max_examples=150, deadline=None)
@given(rows=workloads, seqs_cap=st.integers(1, 6), budget=st.integers(8, 64),
       chunked=st.booleans(), kv_blocks=st.integers(4, 40), block_size=st.integers(1, 6))
@pytest.mark.pure_python
def test_engine_loop_reads_exact_counters_after_every_step(  # type: ignore[no-untyped-def]
    rows, seqs_cap, budget, chunked, kv_blocks, block_size
) -> None:
    lazy = ContinuousPolicy(seqs_cap, budget, chunked)
    eager = SlowContinuous(seqs_cap, budget, chunked)
    states = [ServerState(kv=BlockManager(kv_blocks, block_size)) for _ in range(2)]
    seqs = [[Sequence(i, 0.0, p, o) for i, (p, o) in enumerate(rows)
             if -(-(p + o) // block_size) <= kv_blocks] for _ in range(2)]
    for state, mine in zip(states, seqs, strict=True):
        state.waiting.extend(mine)
        state.arrivals_done = True
    now = 0.0
    for _ in range(2000):
        batches = [policy.schedule(state, now) for policy, state in
                   zip((lazy, eager), states, strict=True)]
        if not isinstance(batches[0], Batch):
            assert not isinstance(batches[1], Batch)
            break
        assert isinstance(batches[1], Batch)
        assert batches[0].shape == batches[1].shape
        ids = [[s.request_id for s in b.decode] for b in batches]
        assert ids[0] == ids[1]
        end = now + 0.01
        done = [complete(state, b, now, end) for state, b in zip(states, batches, strict=True)]
        assert [s.request_id for s in done[0]] == [s.request_id for s in done[1]]
        now = end
        assert [_view(s) for s in seqs[0]] == [_view(s) for s in seqs[1]]
        assert states[0].kv.used == states[1].kv.used
        states[0].check()
    assert all(s.remaining == 0 or s.reason for s in seqs[0])


def test_preempted_member_is_written_back_exactly() -> None:
    state = ServerState(kv=BlockManager(num_blocks=100, block_size=4))
    seqs = [Sequence(i, 0.0, prompt_tokens=5 + i, output_tokens=20) for i in range(3)]
    for seq in seqs:
        state.kv.allocate(seq.request_id, seq.prompt_tokens)
        seq.num_computed, seq.num_generated = seq.prompt_tokens, 1
        state.running.append(seq)
        state.clock.join(seq)
    for _ in range(7):  # seven decode steps over every member, as the policy takes them
        state.kv.take(state.clock.openings_now())
        state.clock.advance(1)
    state.check()
    assert [(s.num_computed, s.num_generated) for s in seqs] == [(12, 8), (13, 8), (14, 8)]
    state.preempt(seqs[1])
    assert (seqs[1].clock, seqs[1].num_computed, seqs[1].num_generated) == (None, 0, 8)
    assert seqs[1].preemptions == 1 and state.waiting[0] is seqs[1]
    assert state.kv.used == state.kv.blocks_for(12) + state.kv.blocks_for(14)
    state.check()
    state.clock.flush(state.running, state.kv)
    assert [(s.num_computed, s.num_generated) for s in (seqs[0], seqs[2])] == [(12, 8), (14, 8)]
    assert state.kv.held(2) == state.kv.blocks_for(14)


def test_writing_a_member_counter_is_refused() -> None:
    state = ServerState(kv=BlockManager(num_blocks=10, block_size=4))
    seq = Sequence(0, 0.0, prompt_tokens=3, output_tokens=4)
    seq.num_computed, seq.num_generated = 3, 1
    state.clock.join(seq)
    with pytest.raises(RuntimeError, match="decodes on a clock"):
        seq.num_computed += 1


@settings(max_examples=100, deadline=None)
@given(rows=st.lists(st.tuples(st.floats(0, 1), st.integers(1, 40), st.integers(1, 30)),
                     min_size=1, max_size=25),
       seqs_cap=st.integers(1, 8), chunked=st.booleans(), kv_blocks=st.integers(4, 30),
       block_size=st.integers(1, 6), fast_forward=st.booleans())
@pytest.mark.pure_python
def test_lazy_and_eager_simulations_agree_under_kv_pressure(  # type: ignore[no-untyped-def]
    rows, seqs_cap, chunked, kv_blocks, block_size, fast_forward
) -> None:
    def run(policy: ContinuousPolicy):  # type: ignore[no-untyped-def]
        spec = ClusterSpec(policy, COST, kv_blocks=kv_blocks, block_size=block_size)
        return simulate(table(rows), replace(spec, check_invariants=True),
                        fast_forward=fast_forward)

    lazy = run(ContinuousPolicy(seqs_cap, 64, chunked))
    eager = run(SlowContinuous(seqs_cap, 64, chunked))
    assert lazy.requests.equals(eager.requests)
    assert lazy.steps.equals(eager.steps)
