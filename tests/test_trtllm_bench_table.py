"""trtllm-bench's per-model engine table (benchmarks/trtllm_bench_table.py: 0.12's, carried
forward to 0.13 and 0.14) in replaying those releases' performance-overview rows
(benchmarks/published_cases.py).
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
    # 0.13 and 0.14, carried forward. Llama-3.1-70B takes Meta-Llama-3-70B's entries:
    # tp4 general (2048, 1024)
    ("trtllm0.13-h100-sxm-llama-3.1-70b-fp16-tp4-500-2000", 2048, 1024),
    ("trtllm0.14-a100-80gb-llama-3.1-70b-fp16-tp4-500-2000", 2048, 1024),
    # Meta-Llama-3-70B tp2, 2048 + 2048 = 4096: its own entry (2048, 1024)
    ("trtllm0.14-h100-sxm-llama-3-70b-fp8-tp2-2048-2048", 2048, 1024),
    # Llama-2-70b tp8, 128 + 2048 = 2176: its own entry (1024, 16384), not general's 8192
    ("trtllm0.13-h100-sxm-llama-2-70b-fp8-tp8-128-2048", 1024, 16384),
    # Llama-3.1-8B takes Meta-Llama-3-8B's tp1 general (2048, 8192)
    ("trtllm0.14-h200-llama-3.1-8b-fp8-tp1-128-128", 2048, 8192),
])
def test_a_012_to_014_row_replays_the_tables_engine(case_id: str, batch: int,
                                                    tokens: int) -> None:
    policy = _policy(case_id)
    assert policy["max_num_seqs"] == batch
    assert policy["max_num_batched_tokens"] == tokens
    assert policy["chunked_prefill"] is True  # trtllm-bench throughput: chunking on


@pytest.mark.parametrize("case_id", [
    "trtllm0.13-h100-sxm-mixtral-8x7b-fp8-tp8-128-2048",  # the table has Mixtral tp2/tp4 only
    "trtllm0.13-h200-llama-2-70b-fp8-tp1-128-2048",  # and Llama-2-70b from tp2 on
])
def test_rows_the_table_lacks_keep_the_older_rule(case_id: str) -> None:
    point, notes = pc.scenario_point(CASES[case_id], max_prompts=1000, use_stack=True,
                                     burst_rate=math.inf)
    assert "max_num_seqs" not in point.get("policy", {})
    assert not any("benchmark_config.yml" in n for n in notes)


def test_other_releases_keep_their_rule() -> None:
    row = CASES["trtllm0.12-a100-80gb-llama-3-70b-fp16-tp2-128-2048"]
    # 0.15 sized its engines with the heuristic: (256, 1024) is not what it gets
    later = dataclasses.replace(row, id="probe", stack_version="0.15")
    point, notes = pc.scenario_point(later, max_prompts=1000, use_stack=True,
                                     burst_rate=math.inf)
    assert not any("benchmark_config.yml" in n for n in notes)
    assert any("trtllm_bench_settings.py" in n for n in notes)
    # a 0.12 row that states its own limits keeps them
    stated = dataclasses.replace(row, id="probe2", knobs={"max_num_seqs": 64})
    point, _ = pc.scenario_point(stated, max_prompts=1000, use_stack=True,
                                 burst_rate=math.inf)
    assert point["policy"] == {"max_num_seqs": 64}
