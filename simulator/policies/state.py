"""What a batching policy sees and what it decides: sequences, server state, batches.

Shared by the simulator's replicas and the real engine's serving loop. A request's
progress is counted in tokens, as in vLLM v1: ``num_computed`` tokens have their KV in
the cache, and a step computes ``pending`` more of them. A step that computes a
sequence's last pending token emits one output token. Prefill, chunked prefill,
recompute after preemption and decode are all the same rule with different chunk sizes.
No SimPy here: time arrives as plain floats.
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass, field

from simulator.kvcache import BlockManager
from simulator.policies.identity import remove_same
from simulator.policies.lazy import DecodeClock
from simulator.policies.token_ratio import TokenRatio
from simulator.shapes import StepShape

NAN = math.nan

# A refusal's ``reason`` starts with its cause, then ": " and the figures, so the records
# can be counted by cause (metrics_slo.refusal_causes).
REFUSED_KV = "prompt + output over the replica's KV cache"
REFUSED_BUDGET = "prompt + output over max_num_batched_tokens without chunked prefill"
REFUSED_MODEL_LEN = "prompt + output over max_model_len"


@dataclass(slots=True, eq=False)
class Sequence:
    """One request's progress through a replica.

    ``num_computed`` and ``num_generated`` are exact whenever read. While the sequence
    decodes on its replica's :class:`DecodeClock` (``clock`` set) they are stored as bases
    relative to the clock's steps; see :mod:`simulator.policies.lazy`.
    """

    request_id: int
    arrival_s: float  # when it reached the server
    prompt_tokens: int
    output_tokens: int  # tokens to generate (EOS ignored, as in benchmarks)
    client_id: int = -1  # closed-loop client that sent it (-1 for open loop)
    scheduled_s: float = NAN  # start of the first step that worked on it
    first_token_s: float = NAN  # end of the step that emitted its first token
    finish_s: float = NAN  # end of the step that emitted its last token
    preemptions: int = 0  # times evicted and recomputed
    reason: str = ""  # why it was rejected, if it was: "<cause>: <figures>"
    replica: int = -1  # replica that took it (-1 before routing)
    computed_base: int = 0  # num_computed, less clock.steps while on a clock
    generated_base: int = 0  # num_generated, less clock.steps while on a clock
    clock: DecodeClock | None = None  # the decode clock advancing it, if any
    priority: int = 0  # priority class, lower = more urgent (read by scheduling "priority")

    def __init__(self, request_id: int, arrival_s: float, prompt_tokens: int,
                 output_tokens: int, client_id: int = -1, scheduled_s: float = NAN,
                 first_token_s: float = NAN, finish_s: float = NAN, preemptions: int = 0,
                 reason: str = "", replica: int = -1, computed_base: int = 0,
                 generated_base: int = 0, clock: DecodeClock | None = None,
                 priority: int = 0) -> None:
        # written out (the dataclass keeps it): native when compiled (simulator/accel.py)
        self.request_id = request_id
        self.arrival_s = arrival_s
        self.prompt_tokens = prompt_tokens
        self.output_tokens = output_tokens
        self.client_id = client_id
        self.scheduled_s = scheduled_s
        self.first_token_s = first_token_s
        self.finish_s = finish_s
        self.preemptions = preemptions
        self.reason = reason
        self.replica = replica
        self.computed_base = computed_base
        self.generated_base = generated_base
        self.clock = clock
        self.priority = priority

    @property
    def num_computed(self) -> int:
        """Tokens whose KV is in the cache."""
        clock = self.clock
        return self.computed_base if clock is None else self.computed_base + clock.steps

    @num_computed.setter
    def num_computed(self, value: int) -> None:
        self._check_eager()
        self.computed_base = value

    @property
    def num_generated(self) -> int:
        """Output tokens emitted so far."""
        clock = self.clock
        return self.generated_base if clock is None else self.generated_base + clock.steps

    @num_generated.setter
    def num_generated(self, value: int) -> None:
        self._check_eager()
        self.generated_base = value

    def _check_eager(self) -> None:
        if self.clock is not None:
            raise RuntimeError(f"request {self.request_id} decodes on a clock: leave it first")

    @property
    def num_tokens(self) -> int:
        """Tokens known so far: the prompt plus the outputs generated."""
        return self.prompt_tokens + self.num_generated

    @property
    def pending(self) -> int:
        """Tokens to compute before the next output token appears."""
        return self.num_tokens - self.num_computed

    @property
    def remaining(self) -> int:
        """Output tokens still to generate."""
        return self.output_tokens - self.num_generated

    @property
    def decoding(self) -> bool:
        """True when the next step for this sequence is a one-token decode."""
        return self.num_generated > 0 and self.num_computed == self.num_tokens - 1


@dataclass(slots=True)
class PaddedGroup:
    """A static/dynamic batch run to completion as one padded tensor.

    Every row is padded to the longest prompt, and the batch decodes until its longest
    output ends; finished rows keep costing (and keep their KV) until then.
    """

    rows: list[Sequence]
    max_prompt: int  # padded prompt length
    max_output: int  # decode runs until this many tokens exist for every row
    prefilled: bool = False
    decode_steps_done: int = 0

    @property
    def decode_steps_left(self) -> int:
        """Decode steps still to run (the prefill step emits each row's first token)."""
        return self.max_output - 1 - self.decode_steps_done

    def decode_shape(self, step_offset: int = 0) -> StepShape:
        """Shape of the next decode step (``step_offset`` steps later)."""
        n = len(self.rows)
        ctx = self.max_prompt + self.decode_steps_done + step_offset + 1
        finishing = sum(1 for r in self.rows if r.remaining == 1 + step_offset)
        return StepShape(num_decode_seqs=n, decode_context_tokens=n * ctx, num_finished=finishing)


@dataclass(slots=True)
class ServerState:
    """Everything a policy may look at and change on one replica."""

    kv: BlockManager
    waiting: deque[Sequence] = field(default_factory=deque)  # FCFS; preempted go to the front
    running: list[Sequence] = field(default_factory=list)  # hold KV; oldest first
    group: PaddedGroup | None = None  # the padded batch in flight (static/dynamic)
    rejected: list[Sequence] = field(default_factory=list)  # never runnable here, with reason
    arrivals_done: bool = False  # no request will arrive any more (lets static flush)
    clock: DecodeClock = field(init=False)  # the running requests that decode (continuous)
    decode_steps: int = 0  # steps that decoded, admitted nothing and preempted nobody
    token_ratio: TokenRatio = field(default_factory=TokenRatio)  # admission "conservative"

    def __post_init__(self) -> None:
        self.clock = DecodeClock(self.kv.block_size)

    @property
    def num_outstanding(self) -> int:
        """Requests waiting or running (what a least-outstanding router compares)."""
        return len(self.waiting) + len(self.running)

    def arrive(self, seq: Sequence) -> bool:
        """Queue an arriving request; False (with ``seq.reason`` set) if it can never fit."""
        need = self.kv.request_blocks(seq.prompt_tokens + seq.output_tokens)
        if need > self.kv.num_blocks:
            seq.reason = (f"{REFUSED_KV}: needs {need} KV blocks for {seq.prompt_tokens}+"
                          f"{seq.output_tokens} tokens; the replica has {self.kv.num_blocks}")
            return False
        self.waiting.append(seq)
        return True

    def reject(self, seq: Sequence, reason: str) -> None:
        """Drop ``seq`` for good with ``reason`` (it could never run on this replica)."""
        seq.reason = reason
        self.rejected.append(seq)

    def check(self) -> None:
        """Assert the KV and decode-clock invariants (debug runs and property tests)."""
        if self.group is None:
            self.clock.check(self.running, self.kv)
        self.kv.check()

    def preempt(self, seq: Sequence, to_tail: bool = False) -> None:
        """Evict ``seq`` (recompute policy): free its KV, send it to the head of the queue
        (vLLM, TensorRT-LLM) or, with ``to_tail``, to its tail (SGLang's retraction)."""
        if seq.clock is not None:
            seq.clock.leave(seq, self.kv)
        remove_same(self.running, seq)
        self.kv.free(seq.request_id)
        seq.num_computed = 0
        seq.preemptions += 1
        if to_tail:
            self.waiting.append(seq)
        else:
            self.waiting.appendleft(seq)


@dataclass(slots=True)
class DecodeCohort:
    """What the fast-forward needs to know about a batch where every running request decodes."""

    min_remaining: int  # fewest output tokens any of them has left, this step's included
    num_at_min: int  # how many have exactly ``min_remaining`` left
    block_openings: list[int]  # kvcache.new_block_counts of their tokens cached after the step

    def __init__(self, min_remaining: int, num_at_min: int, block_openings: list[int]
                 ) -> None:  # written out: native when compiled (simulator/accel.py)
        self.min_remaining = min_remaining
        self.num_at_min = num_at_min
        self.block_openings = block_openings


@dataclass(slots=True)
class Batch:
    """One step's work, as decided by a policy."""

    prefill: list[tuple[Sequence, int]]  # (sequence, tokens computed this step), not decoding
    decode: list[Sequence]  # sequences computing exactly one token by decoding
    shape: StepShape  # what the cost model prices (padding included)
    preempted: list[Sequence] = field(default_factory=list)  # evicted while building it
    # Set when ``decode`` is every member of the replica's decode clock (every running
    # request that decodes): ``complete`` then advances the clock instead of each sequence.
    cohort: DecodeCohort | None = None
    # Forward passes this one decision runs (vLLM multi-step): > 1 only for a batch of
    # decodes alone, whose tokens all reach the client at the end of the last pass.
    num_steps: int = 1
    # Speculative decoding (policies/speculative.py): k when ``decode`` rows verify drafts
    # (``complete`` then needs each row's emitted tokens), else 0.
    spec_tokens: int = 0
    spec_drafts: list[int] = field(default_factory=list)  # drafts verified per decode row

    def __init__(self, prefill: list[tuple[Sequence, int]], decode: list[Sequence],
                 shape: StepShape, preempted: list[Sequence] | None = None,
                 cohort: DecodeCohort | None = None, num_steps: int = 1,
                 spec_tokens: int = 0, spec_drafts: list[int] | None = None) -> None:
        # written out (the dataclass keeps it): native when compiled (simulator/accel.py)
        self.prefill = prefill
        self.decode = decode
        self.shape = shape
        self.preempted = [] if preempted is None else preempted
        self.cohort = cohort
        self.num_steps = num_steps
        self.spec_tokens = spec_tokens
        self.spec_drafts = [] if spec_drafts is None else spec_drafts


@dataclass(slots=True, frozen=True)
class Wait:
    """Nothing to run before ``until`` (a timeout) or, if ``None``, before the next arrival."""

    until: float | None = None
