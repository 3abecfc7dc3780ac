"""trtllm-bench's engine sizing for a dataset (benchmarks/trtllm_bench_settings.py) and
its use in replaying the TensorRT-LLM max-throughput tables (benchmarks/published_cases.py).
"""

from __future__ import annotations

import importlib
import math
import sys
from pathlib import Path

import pytest

from simulator.specs.hardware import get_hardware
from simulator.specs.models import MODELS

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
tbs = importlib.import_module("benchmarks.trtllm_bench_settings")
pc = importlib.import_module("benchmarks.published_cases")


@pytest.mark.parametrize("requests, isl, osl, expected", [
    (100, 128, 128, (128, 2048)),  # bs: 32 x ceil(100 / 32); tokens 200 -> the 2048 floor
    (40, 128, 128, (64, 2048)),  # bs floor 64
    (300, 1000, 1000, (384, 2048)),  # 128 x ceil(300 / 128)
    (2000, 500, 2000, (2048, 2560)),  # 256 x ceil(2000 / 256); 2500 -> 256 x 10
    (900, 2048, 128, (1024, 15360)),  # 900 x 17 = 15,300 -> 1024 x 15
    (700, 1024, 1024, (768, 2048)),  # 1,400 tokens: max(2048, 256 x ceil(1400 / 256))
    (5000, 2048, 128, (4096, 32768)),  # both caps: 4096 requests, 32,768 tokens
])
def test_rounding(requests: float, isl: int, osl: int, expected: tuple[int, int]) -> None:
    assert tbs.finetune(requests, isl, osl) == expected


def test_llama8b_fp8_on_h100_by_hand() -> None:
    # KV per token: 2 x 32 layers x 8 heads x 128 x 1 byte = 64 KiB; weights 8.03e9 x 1 byte
    # = 7.479 GiB; (80 - 7.479) GiB x 0.95 / (64 KiB x (128 + 2048)) = 518.7 requests
    model, h100 = MODELS["llama-3.1-8b"], get_hardware("h100-sxm")
    requests = (80 - model.params_total / 2**30) * 0.95 / (65536 / 2**30 * 2176)
    assert requests == pytest.approx(518.74, abs=0.01)
    # -> 128 x ceil(518.7 / 128) = 640 sequences; 518.7 x (1 + 128/2048) = 551 tokens -> 2048
    assert tbs.engine_settings(model, h100, 1, "fp8", "fp8", 128, 2048) == (640, 2048)
    # bf16: weights 14.96 GiB and 128 KiB per token: 232.6 requests -> 32 x 8 = 256
    assert tbs.engine_settings(model, h100, 1, "bf16", "bf16", 128, 2048) == (256, 2048)


def test_tp_counts_at_least_one_kv_head_per_gpu() -> None:
    # Llama-3.1-70B has 8 KV heads: at tp 8 each GPU holds one, so KV bytes per token do
    # not change, while the memory is 8 GPUs' (minus 70.6e9 bytes of fp8 weights).
    model, h200 = MODELS["llama-3.1-70b"], get_hardware("h200")
    batch4, _ = tbs.engine_settings(model, h200, 4, "fp8", "fp8", 2048, 2048)
    batch8, _ = tbs.engine_settings(model, h200, 8, "fp8", "fp8", 2048, 2048)
    kv = 2 * 80 * 8 * 128 / 2**30
    raw4 = (141 * 4 - model.params_total / 2**30) * 0.95 / (kv * 4096)
    assert batch4 == 128 * math.ceil(raw4 / 128) and batch8 > batch4


def test_latent_attention_is_sized_as_the_tool_reads_its_config() -> None:
    # DeepSeek-R1: the tool takes num_key_value_heads 128 and hidden / heads = 56 for the
    # head, 2 x 61 x 128 x 56 x 1 byte = 874,496 bytes a token (the latent: 35,136 a GPU)
    model, h200 = MODELS["deepseek-r1"], get_hardware("h200")
    kv = 2 * 61 * 128 * 56 / 2**30
    weights = tbs.checkpoint_elements(model, "fp8") * 1 / 2**30
    raw = (h200.memory_bytes / 2**30 * 8 - weights) * 0.95 / (kv * (1024 + 8192))
    assert 40 < raw < 64  # -> the 64-sequence floor
    assert tbs.engine_settings(model, h200, 8, "fp8", "fp8", 1024, 8192) \
        == tbs.finetune(raw, 1024, 8192) == (64, 2048)


def test_a_bench_row_replays_the_engine_trtllm_bench_sized() -> None:
    case = next(c for c in pc.load_cases()
                if c.id == "trtllm1.0-h100-sxm-llama3.1-8b-fp8-tp1-128-2048")
    point, notes = pc.scenario_point(case, max_prompts=1000, use_stack=True,
                                     burst_rate=math.inf)
    assert point["policy"] == {"max_num_seqs": 640, "max_num_batched_tokens": 2048,
                               "chunked_prefill": True}
    assert any("trtllm-bench's sizing" in n for n in notes)


def test_stated_limits_and_other_tools_keep_theirs() -> None:
    cases = {c.id: c for c in pc.load_cases()}
    # The 0.16 guide's engine was built by the LLM API and printed Max Runtime Tokens 8192
    stated = cases["trtllm0.16-h100-sxm-llama-3.3-70b-bf16-tp4-2048-2048-throughput"]
    point, _ = pc.scenario_point(stated, max_prompts=1000, use_stack=True,
                                 burst_rate=math.inf)
    assert point["policy"] == {"max_num_batched_tokens": 8192}
    # 0.10 ran gptManagerBenchmark with its own limits
    old = cases["trtllm0.10-h200-llama-2-7b-fp8-tp1-128-128"]
    point, _ = pc.scenario_point(old, max_prompts=1000, use_stack=True, burst_rate=math.inf)
    assert point["policy"]["max_num_seqs"] == 2048


def test_a_row_past_the_models_context_serves_its_whole_prompts() -> None:
    # Llama-2-70B's config stops at 4,096 positions; 0.13's 5000/500 row ran 5,500-token
    # sequences on an engine built for them. The replay raises max_model_len to 5,500 and
    # the simulator then serves every prompt whole (without it, each prompt was cut to
    # 4,096 - 500 = 3,596 tokens and the row ran 1.5x too fast).
    from simulator.runner import run_point

    case = next(c for c in pc.load_cases()
                if c.id == "trtllm0.13-h100-sxm-llama-2-70b-fp16-tp2-5000-500")
    point, notes = pc.scenario_point(case, max_prompts=4, use_stack=True, burst_rate=math.inf)
    assert point["policy"]["max_model_len"] == 5500
    assert any("past the model's 4096-token context" in n for n in notes)
    summary = run_point({}, point).summary
    assert summary["total_input_tokens"] == 4 * 5000
    del point["policy"]["max_model_len"]
    assert run_point({}, point).summary["total_input_tokens"] == 4 * 3596


def test_rows_within_the_context_and_other_stacks_keep_the_models_context() -> None:
    cases = {c.id: c for c in pc.load_cases()}
    inside = cases["trtllm0.13-h100-sxm-llama-3-70b-fp16-tp2-5000-500"]  # 8,192 positions
    point, _ = pc.scenario_point(inside, max_prompts=4, use_stack=True, burst_rate=math.inf)
    assert "max_model_len" not in point["policy"]
