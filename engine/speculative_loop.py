"""A fixed batch decoded to the end, plainly or speculatively: tests and benchmarks.

:func:`generate` prefills every prompt in one packed forward, then runs decode steps over
all unfinished rows at once (no scheduler, no arrivals): the smallest loop in which
speculative decoding (engine/speculative.py) can be compared token for token and step for
step with plain greedy decoding on the same slot cache. The serving path is
:class:`engine.core.EngineCore`, which runs the same :class:`SpecDecoder` for batches the
policy marks speculative.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import torch

from engine.models import TORCH_DTYPES, EngineModel
from engine.slot_cache import SlotCache
from engine.speculative import SpecDecoder
from engine.step_runner import BatchRunner, RowWork


@dataclass(slots=True)
class LoopStep:
    """One decode step of the loop."""

    rows: int  # decode rows that ran (unfinished requests)
    wall_s: float  # the whole step (perf_counter)
    cpu_s: float  # process CPU time of the step, all threads
    draft_cpu_s: float = 0.0  # of cpu_s, the draft passes (speculative steps)
    verify_cpu_s: float = 0.0  # of cpu_s, the verify pass (speculative steps)
    accepted: list[int] = field(default_factory=list)  # drafts accepted per row
    drafted: list[int] = field(default_factory=list)  # drafts proposed per row


@dataclass(slots=True)
class LoopRun:
    """Outputs and timings of :func:`generate`."""

    outputs: list[list[int]]  # generated ids per prompt (the prefill's token first)
    steps: list[LoopStep]  # decode steps, in order
    token_steps: list[list[int]]  # per prompt: index of the step that emitted each output
    # (-1: the prefill)
    prefill_s: float = 0.0

    def tpot_s(self, cpu: bool = True) -> list[float]:
        """Per request with 2+ outputs: (finish - first token) / (outputs - 1), on a clock
        summing the decode steps' CPU seconds (``cpu``) or wall seconds."""
        ends = [0.0]
        for s in self.steps:
            ends.append(ends[-1] + (s.cpu_s if cpu else s.wall_s))
        out = []
        for steps in self.token_steps:
            if len(steps) > 1:
                out.append(ends[steps[-1] + 1] / (len(steps) - 1))
        return out


def generate(em: EngineModel, prompts: list[list[int]], max_new: int, *,
             draft: EngineModel | None = None, k: int = 0) -> LoopRun:
    """Greedy decoding of ``max_new`` tokens for every prompt, batched; speculative with
    ``draft`` proposing up to ``k`` tokens a step when both are given."""
    if max_new < 1 or not prompts:
        raise ValueError(f"{max_new=} must be >= 1 and prompts non-empty")
    spec = em.spec
    cache = SlotCache(spec.num_layers, spec.num_kv_heads, spec.head_dim,
                      slots=len(prompts), capacity=max(map(len, prompts)) + max_new,
                      dtype=TORCH_DTYPES[em.dtype], device=em.device)
    runner = BatchRunner(em, cache)
    tokens = [list(p) for p in prompts]
    run = LoopRun([[] for _ in prompts], [], [[] for _ in prompts])
    p0 = time.perf_counter()
    first = runner.run_packed([RowWork(i, 0, len(p)) for i, p in enumerate(prompts)], tokens)
    run.prefill_s = time.perf_counter() - p0
    _emit(run, tokens, {slot: [t] for slot, t in first.items()}, -1)
    spec_decoder = SpecDecoder(runner, draft) if draft is not None and k > 0 else None
    while True:
        rows = [RowWork(i, len(t) - 1, 1) for i, t in enumerate(tokens)
                if len(run.outputs[i]) < max_new]
        if not rows:
            return run
        w0, c0 = time.perf_counter(), time.process_time()
        if spec_decoder is None:
            out = runner.run(rows[0].slot, rows[-1].slot + 1, rows, tokens)
            emitted = {slot: [t] for slot, t in out.items()}
            step = LoopStep(len(rows), 0.0, 0.0)
        else:
            left = {w.slot: max_new - len(run.outputs[w.slot]) for w in rows}
            res = spec_decoder.step(rows, {s: min(k, n - 1) for s, n in left.items()}, tokens)
            emitted = res.emitted
            step = LoopStep(len(rows), 0.0, 0.0, res.draft_cpu_s, res.verify_cpu_s,
                            [len(emitted[w.slot]) - 1 for w in rows],
                            [res.drafted[w.slot] for w in rows])
        step.wall_s, step.cpu_s = time.perf_counter() - w0, time.process_time() - c0
        _emit(run, tokens, emitted, len(run.steps))
        run.steps.append(step)


def _emit(run: LoopRun, tokens: list[list[int]], emitted: dict[int, list[int]],
          step: int) -> None:
    for slot, new in emitted.items():
        tokens[slot] += new
        run.outputs[slot] += new
        run.token_steps[slot] += [step] * len(new)


@torch.inference_mode()
def greedy_reference(em: EngineModel, ids: list[int], n: int) -> list[int]:
    """``n`` greedy tokens by full forward passes over the whole sequence, no cache."""
    seq = list(ids)
    for _ in range(n):
        logits = em.model(input_ids=torch.tensor([seq], device=em.device)).logits
        seq.append(int(logits[0, -1].argmax()))
    return seq[len(ids):]
