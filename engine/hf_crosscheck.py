"""A cross-check against transformers' own continuous batching (``generate_batch``).

transformers ships a paged-attention continuous-batching manager. Running the same prompts
through it and through :func:`engine.serving.replay` checks the engine's tokens against an
independent implementation (greedy decoding, EOS disabled, same weights) and gives a
throughput to compare with on a GPU. The manager sizes its paged cache from the memory it
finds, so on CPU it is slow to start: the check is meant for GPU runs
(benchmarks/gpu_profile.sh) and a ``gpu``-marked test.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from transformers import GenerationConfig
from transformers.generation.configuration_utils import ContinuousBatchingConfig

from engine.models import EngineModel


@dataclass(slots=True)
class HFBatchResult:
    """What transformers' continuous batching produced."""

    outputs: list[list[int]]  # generated token ids, in prompt order
    wall_s: float  # wall time of the whole batch

    @property
    def output_tokens_per_s(self) -> float:
        """Generated tokens per second of wall time."""
        return sum(map(len, self.outputs)) / self.wall_s


def hf_generate_batch(em: EngineModel, prompts: list[list[int]], max_new_tokens: int, *,
                      num_blocks: int | None = None) -> HFBatchResult:
    """Greedy-generate ``max_new_tokens`` for every prompt with transformers' manager."""
    gen = GenerationConfig(do_sample=False, max_new_tokens=max_new_tokens, eos_token_id=-1,
                           pad_token_id=0)
    cb = ContinuousBatchingConfig(num_blocks=num_blocks) if num_blocks else None
    model: Any = em.model  # generate_batch comes from transformers' generation mixin
    before = model.config._attn_implementation  # the engine's own: not one CB accepts
    model.set_attn_implementation("sdpa")
    try:
        t0 = time.perf_counter()
        out = model.generate_batch(prompts, generation_config=gen,
                                   continuous_batching_config=cb, warmup=False)
        wall = time.perf_counter() - t0
    finally:
        model.set_attn_implementation(before)
    return HFBatchResult([list(out[f"req_{i}"].generated_tokens) for i in range(len(prompts))],
                         wall)
