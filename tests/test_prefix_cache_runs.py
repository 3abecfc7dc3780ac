"""The run-based prefix cache (simulator/prefix_cache_runs.py) against the per-block one it
replaces in simulations (simulator/prefix_cache.py): the same operations, the same answers.

Random requests share segments; a random sequence of scheduler operations (admit with a
lookup, grow by a chunk or by a lazy take + settle, a speculative over-allocation trimmed
back, finish, preempt and re-admit) is applied to both managers; after every operation
each answer (hit tokens, can_allocate) and every counter (used, cached, cached-free,
evictions, hits, blocks in use) must agree and both must pass their own check().
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from hypothesis import given, settings
from hypothesis import strategies as st

from simulator.prefix_cache import PrefixBlockManager
from simulator.prefix_cache_run import block_manager
from simulator.prefix_cache_runs import PrefixRunManager
from simulator.workload.prefixes import PrefixIdentity, from_lists

# (own prompt tokens, output tokens, shared prefix: (segment id, tokens) or None)
request = st.tuples(st.integers(1, 30), st.integers(1, 20),
                    st.one_of(st.none(), st.tuples(st.integers(0, 2), st.integers(1, 24))))
# (kind, request index, amount, second amount)
operation = st.tuples(st.sampled_from(["admit", "grow", "lazy", "spec", "finish", "preempt"]),
                      st.integers(0, 11), st.integers(1, 12), st.integers(0, 12))


def _identity(rows: list) -> tuple[PrefixIdentity, list[int]]:  # type: ignore[type-arg]
    segs = [[seg] if seg else [] for *_, seg in rows]
    segments, start, stop = from_lists(segs)
    prompts = [own + (seg[1] if seg else 0) for own, _, seg in rows]
    table = pd.DataFrame({"request_id": np.arange(len(rows)), "prompt_tokens": prompts,
                          "segments_start": start, "segments_stop": stop})
    return PrefixIdentity(table, segments), prompts


def _state(kv, running: list[int]) -> tuple:  # type: ignore[no-untyped-def,type-arg]
    st_ = kv.stats
    return (kv.used, kv.num_free, kv.num_cached, kv.num_cached_free, st_.evictions,
            st_.hit_tokens, st_.saved_tokens, st_.prompt_tokens, dict(st_.cached_tokens),
            kv.blocks_in_use(running), [kv.held(i) for i in running])


@settings(max_examples=300, deadline=None)
@given(rows=st.lists(request, min_size=1, max_size=12), ops=st.lists(operation, max_size=80),
       num_blocks=st.integers(6, 40), block_size=st.sampled_from([1, 2, 4]),
       window=st.sampled_from([0, 0, 2]))
def test_runs_answer_as_the_per_block_cache(rows, ops, num_blocks, block_size, window) -> None:  # type: ignore[no-untyped-def]
    identity, prompts = _identity(rows)
    ref = PrefixBlockManager(num_blocks, block_size, identity, window_blocks=window)
    new = PrefixRunManager(num_blocks, block_size, identity, window)
    streams = [p + out for p, (_, out, _) in zip(prompts, rows, strict=True)]
    tokens: dict[int, int] = {}  # running request -> tokens it holds KV for
    for kind, i, a, b in ops:
        i %= len(rows)
        answers = []
        for kv in (ref, new):
            answers.append(_apply(kv, kind, i, a, b, prompts[i], streams[i], dict(tokens)))
        assert answers[0] == answers[1], (kind, i, a, b)
        tokens = answers[0][-1]
        assert _state(ref, sorted(tokens)) == _state(new, sorted(tokens)), (kind, i)
        ref.check()
        new.check()


def _apply(kv, kind: str, i: int, a: int, b: int, prompt: int, stream: int,  # type: ignore[no-untyped-def]
           tokens: dict[int, int]) -> tuple:  # type: ignore[type-arg]
    """One scheduler operation on ``kv``; (what it answered, the running tokens after)."""
    if kind == "admit" and i not in tokens:
        hit = kv.match(i, prompt, stream)
        want = min(prompt, hit + a * 4)  # a chunk of the prompt past the hit
        ok = kv.can_allocate(i, want)
        if ok:
            kv.allocate(i, want)
            tokens[i] = want
        return hit, ok, tokens
    if kind == "admit" or i not in tokens:
        return (None, tokens)
    n = tokens[i]
    if kind == "grow":
        want = min(stream, n + a)
        ok = kv.can_allocate(i, want)
        if ok:
            kv.allocate(i, want)
            tokens[i] = want
        return ok, tokens
    if kind == "lazy":  # a decode batch's blocks taken together, the records settled after
        want = min(stream, n + a)
        extra = kv.blocks_for(want) - kv.held(i)
        ok = extra <= kv.num_free
        if ok:
            kv.take(max(extra, 0))
            kv.settle(i, want)
            tokens[i] = want
        return ok, tokens
    if kind == "spec":  # a verify's lookahead allocated, its rejected positions trimmed back
        want = min(stream, n + a)
        ok = n >= prompt and kv.can_allocate(i, want)
        if ok:
            kv.allocate(i, want)
            kept = n + min(b, want - n)
            kv.trim(i, kept)
            tokens[i] = kept
        return ok, tokens
    kv.free(i)  # finish or preempt: either may be admitted again (a preempted one is)
    del tokens[i]
    return (kind, tokens)


def test_the_simulator_uses_runs_and_the_engine_the_per_block_cache() -> None:
    identity, _ = _identity([(4, 2, None)])
    assert isinstance(block_manager(8, 4, identity), PrefixRunManager)
    assert isinstance(block_manager(8, 4, identity, mirrored=True), PrefixBlockManager)


def test_a_preempted_requests_own_blocks_come_back_as_one_run_and_leave_top_first() -> None:
    """Page size 1, no segments: request 0 computes 10 tokens (10 full blocks) and is
    preempted; they queue as one run. Request 1 takes 4 of the 6 plain blocks; a decode
    batch's 10 more find 2 plain and evict 8 off the run's top (positions 9 down to 2).
    Re-admitted with its 10 prompt tokens, request 0 finds positions 0 and 1: 2 tokens."""
    identity, _ = _identity([(10, 5, None), (4, 1, None)])
    kv = PrefixRunManager(16, 1, identity)
    assert kv.match(0, 10, 15) == 0
    kv.allocate(0, 10)
    kv.free(0)
    assert (kv.used, kv.num_cached_free, kv.num_cached) == (0, 10, 10)
    kv.match(1, 4, 5)
    kv.allocate(1, 4)
    assert kv.stats.evictions == 0
    kv.take(10)  # a decode batch's blocks, not yet settled on any request
    assert (kv.stats.evictions, kv.num_cached_free, kv.used) == (8, 2, 14)
    kv.free(1)
    assert kv.match(0, 10, 15) == 2
    # positions 0-1 back from the run; no plain block is left (10 taken, 4 + 2 cached), so
    # 2 fresh blocks evict the top 2 of request 1's 4, now the oldest entries
    kv.allocate(0, 4)
    assert (kv.stats.evictions, kv.used, kv.num_cached_free) == (10, 14, 2)


def test_a_readmission_takes_part_of_a_run_and_registers_around_the_rest() -> None:
    """Page size 1: request 0 (prompt 6, output 6) decodes to 10 tokens and is preempted:
    one run of 10 free blocks. Re-admitted, a match stops at its prompt's last token (5
    blocks): the run's bottom 0-4 is taken back and 5-9 stays queued. Growing to 12 tokens,
    positions 5-9 stay private (their old copies are still cached) and 10-11 are cached
    anew: the per-block cache says the same at every step."""
    identity, _ = _identity([(6, 6, None)])
    ref, new = PrefixBlockManager(32, 1, identity), PrefixRunManager(32, 1, identity)
    for kv in (ref, new):
        assert kv.match(0, 6, 12) == 0
        kv.allocate(0, 10)
        kv.free(0)
        assert kv.match(0, 6, 12) == 5
        kv.allocate(0, 6)
        assert (kv.used, kv.num_cached_free, kv.num_cached) == (6, 5, 10)
        kv.allocate(0, 12)
        assert (kv.used, kv.num_cached_free, kv.num_cached) == (12, 5, 12)
        kv.check()
    assert [r.lo for r in new._free_runs[0]] == [5] and new._own[0] == [[0, 5], [10, 12]]
