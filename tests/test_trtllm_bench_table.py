"""0.12 trtllm-bench's per-model engine table (benchmarks/trtllm_bench_table.py) in replaying
that release's performance-overview rows (benchmarks/published_cases.py).
"""

from __future__ import annotations

import dataclasses
import importlib
import math
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
pc = importlib.import_module("benchmarks.published_cases")

CASES = {c.id: c for c in pc.load_cases()}


def _policy(case_id: str) -> dict[str, object]:
    point, _ = pc.scenario_point(CASES[case_id], max_prompts=1000, use_stack=True,
                                 burst_rate=math.inf)
    return dict(point.get("policy", {}))


@pytest.mark.parametrize("case_id, batch, tokens", [
    # Meta-Llama-3-70B tp2: 2048 + 2048 = 4096 has its own entry (2048, 1024)
    ("trtllm0.12-a100-80gb-llama-3-70b-fp16-tp2-2048-2048", 2048, 1024),
    # 128 + 2048 = 2176 has none: the general entry (256, 1024)
    ("trtllm0.12-a100-80gb-llama-3-70b-fp16-tp2-128-2048", 256, 1024),
    # Llama-2-70b tp4: 128 + 4096 = 4224 has its own entry (256, 8192)
    ("trtllm0.12-a100-80gb-llama-2-70b-fp16-tp4-128-4096", 256, 8192),
    ("trtllm0.12-a100-80gb-llama-2-70b-fp16-tp4-128-128", 4096, 8192),
    # Llama-2-7b tp1: (4096, 8192), as the 0.12 doc's example output prints
    # ("Max Runtime Batch Size: 4096", "Max Runtime Tokens: 8192")
    ("trtllm0.12-h100-sxm-llama-2-7b-fp8-tp1-128-128", 4096, 8192),
])
def test_a_012_row_replays_the_tables_engine(case_id: str, batch: int, tokens: int) -> None:
    policy = _policy(case_id)
    assert policy["max_num_seqs"] == batch
    assert policy["max_num_batched_tokens"] == tokens
    assert policy["chunked_prefill"] is True  # trtllm-bench throughput: chunking on


def test_other_releases_keep_their_rule() -> None:
    row = CASES["trtllm0.12-a100-80gb-llama-3-70b-fp16-tp2-128-2048"]
    # 0.13 lists models the 0.12 table lacks: its rows keep the 1.0 preset's limits
    later = dataclasses.replace(row, id="probe", stack_version="0.13")
    point, notes = pc.scenario_point(later, max_prompts=1000, use_stack=True,
                                     burst_rate=math.inf)
    assert "max_num_seqs" not in point.get("policy", {})
    assert not any("benchmark_config.yml" in n for n in notes)
    # a 0.12 row that states its own limits keeps them
    stated = dataclasses.replace(row, id="probe2", knobs={"max_num_seqs": 64})
    point, _ = pc.scenario_point(stated, max_prompts=1000, use_stack=True,
                                 burst_rate=math.inf)
    assert point["policy"] == {"max_num_seqs": 64}
