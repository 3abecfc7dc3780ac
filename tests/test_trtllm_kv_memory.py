"""TensorRT-LLM's KV rule for the 2024 engines (benchmarks/trtllm_kv_memory.py), checked by
hand on one engine, and its use in replaying the 0.11-0.17 performance-overview rows
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
km = importlib.import_module("benchmarks.trtllm_kv_memory")
models = importlib.import_module("simulator.specs.models")
hardware = importlib.import_module("simulator.specs.hardware")

GIB = 2**30
CASES = {c.id: c for c in pc.load_cases()}


def test_constants_read_from_the_two_logs() -> None:
    # perf-benchmarking.md (0.12 trtllm-bench, max_batch_size 4096, vocab 32000): runtime
    # buffers 1.14 GiB + decoder 4.35 GiB = 5.49 GiB over 4096 x 32000 slot-vocab entries
    assert km.SLOT_VOCAB_BYTES == pytest.approx(5.49 * GIB / 131_072_000)
    assert km.SLOT_VOCAB_BYTES == pytest.approx(44.974, abs=1e-3)
    # memory.md's log: 79.10 - 70.48 = 8.62 GiB used, of which the engine 6695 MiB,
    # execution context 1134.01 MiB, runtime buffers 43.29 MiB, decoder 180.30 MiB
    # (8053.60 MiB = 7.8648 GiB): 0.7561 GiB is the context term
    assert km.CONTEXT_GIB == pytest.approx(0.7561, abs=1e-4)


def test_llama_3_70b_tp2_on_a100_by_hand() -> None:
    """0.12's Llama-3-70B FP16 TP 2 engine (max_batch_size 256, max_num_tokens 1024) on
    two A100 80GB, fraction 0.99, per GPU:

    total        79.35 GiB                                  = 85,201,413,734 B
    weights      141,107,412,992 / 2                         = 70,553,706,496 B
    activations  2 x 1024 x 8192 x 6.5                       =    109,051,904 B
    buffers      44.974 x 256 x 128,256                      =  1,476,658,075 B
    context      0.75613 GiB                                 =    811,891,425 B
    NCCL         (AIConfigurator, TP 2)                      =    358,612,992 B
    free                                                     = 11,891,492,842 B (11.07 GiB)
    KV per token per GPU: 2 x 80 layers x 4 heads x 128 x 2 B = 163,840 B
    tokens = floor(0.99 x 11,891,492,842 / 163,840) = 71,854
    (at trtllm-bench's default fraction, 0.90, which 0.12 ran: 65,321)
    """
    mem = km.engine_memory(models.get_model("llama-3-70b"), hardware.get_hardware("a100-80gb"),
                           2, "fp16", "fp16", 256, 1024, 0.99)
    assert mem.total == pytest.approx(85_201_413_734, abs=1)
    assert mem.weights == 70_553_706_496
    assert mem.activations == 109_051_904
    assert mem.slot_buffers == pytest.approx(1_476_658_075, abs=1)
    assert mem.nccl == 358_612_992
    assert mem.kv_bytes_per_token == 163_840
    assert mem.free == pytest.approx(11_891_492_842, abs=2)
    assert mem.kv_tokens == 71_854
    # servesim's [kv] rule gave 0.9 x 2 x 80 GiB - 141.1 GB - 2 x 2 GB: 29,026 tokens
    assert mem.kv_tokens / 29_026 == pytest.approx(2.48, abs=0.01)
    assert dataclasses.replace(mem, fraction=0.90).kv_tokens == 65_321


def test_the_bench_log_engine_is_reproduced_but_for_its_remainder() -> None:
    # The log's own engine (Llama-2-7B FP8, one H100, 4096 x 8192): the buffers are the
    # logged 5.49 GiB by construction; the model leaves 65.65 GiB free, where the log
    # has 63.62 GiB available (it also logs a 6.07 GiB engine and 0.91 GiB activations
    # where servesim counts 6.52 and AIConfigurator 0.69)
    model = models.get_model("llama-2-7b")
    mem = km.engine_memory(model, hardware.get_hardware("h100-sxm"),
                           1, "fp8", "fp8", 4096, 8192, 0.99)
    assert mem.slot_buffers / GIB == pytest.approx(5.49)
    assert mem.free / GIB == pytest.approx(65.65, abs=0.01)
    assert mem.free / GIB / 63.62 - 1 == pytest.approx(0.032, abs=0.001)
    # The weights: 6,738,415,616 of them, the embedding and lm_head's 2 x 32,000 x 4,096 =
    # 262,144,000 in 16 bits and the rest in FP8: 7,000,559,616 B = 6.52 GiB, where
    # memory.md's FAQ log of the same model and precision has an engine of 6,695 MiB
    # (6.54 GiB; all in FP8 would be 6.28 GiB)
    assert mem.weights == 6_738_415_616 + 262_144_000 == 7_000_559_616
    assert mem.weights / GIB == pytest.approx(6695 / 1024, abs=0.02)


@pytest.mark.parametrize("notes, fraction", [
    ("--kv_cache_free_gpu_mem_fraction 0.99 --enable_chunked_context", 0.99),
    ("reports 'KV Memory Percentage: 99.0%'", 0.99),
    ("--kv_cache_free_gpu_mem_fraction 0.95 'in majority of cases', else 0.90", 0.95),
    ("no fraction stated", None),
])
def test_the_fraction_read_from_notes(notes: str, fraction: float | None) -> None:
    assert km.kv_fraction(notes) == fraction


def test_a_012_row_replays_the_engines_kv() -> None:
    point, notes = pc.scenario_point(
        CASES["trtllm0.12-a100-80gb-llama-3-70b-fp16-tp2-128-2048"], max_prompts=1000,
        use_stack=True, burst_rate=math.inf)
    # the engine above (0.12's general entry: 256 sequences, 1024 tokens) at trtllm-bench
    # throughput's default fraction 0.90: 65,321 tokens, 2,041 blocks of 32 (the trtllm
    # preset's)
    assert point["kv"] == {"num_blocks": 65_321 // 32, "block_size": 32}
    assert 65_321 // 32 == 2_041
    assert any("TensorRT-LLM's rule, 0.9 x 11.07 GiB" in n for n in notes)


@pytest.mark.parametrize("version, fraction", [
    ("0.11", 0.99),  # gptManagerBenchmark --kv_cache_free_gpu_mem_fraction 0.99
    ("0.12", 0.90),  # trtllm-bench throughput's default: the commands set none
    ("0.13", 0.90),
    ("0.14", 0.90),
    ("0.15", 0.95),  # the page: 0.95 'in majority of cases', the default 0.90 on OOM
    ("0.17", 0.95),
])
def test_each_release_runs_its_fraction(version: str, fraction: float) -> None:
    rows = [c for c in CASES.values()
            if c.stack == "trtllm" and c.stack_version == version and c.gpu == "h100-sxm"]
    assert rows
    assert {km.kv_fraction(c.notes) for c in rows} == {fraction}


def test_the_copied_example_log_is_not_read_as_the_fraction() -> None:
    # 0.12-0.15's pages all print one 0.12.0.dev2024073000 log ('KV Memory Percentage:
    # 99.0%'); the notes state the fraction the runs used before quoting it
    row = CASES["trtllm0.13-h100-sxm-llama-3.1-70b-fp16-tp8-128-2048"]
    assert "KV Memory Percentage: 99.0%" in row.notes
    assert km.kv_fraction(row.notes) == 0.90


def test_other_releases_and_stacks_keep_the_kv_rule() -> None:
    row = CASES["trtllm0.12-a100-80gb-llama-3-70b-fp16-tp2-128-2048"]
    for other in (dataclasses.replace(row, id="p1", stack_version="0.10"),
                  dataclasses.replace(row, id="p2", stack_version="1.0"),
                  dataclasses.replace(row, id="p3", notes=row.notes.replace("99.0%", "").replace(
                      "mem_fraction 0.90", ""))):
        point, _ = pc.scenario_point(other, max_prompts=1000, use_stack=True,
                                     burst_rate=math.inf)
        assert "kv" not in point


def test_a_static_batch_row_holds_its_whole_batch() -> None:
    # gptSessionBenchmark ran one batch of 64 prompts of 128 tokens decoding 2,048: the
    # cache held 64 x ceil(2,176 / 32) = 64 x 68 = 4,352 blocks of 32 tokens, whatever the
    # L40S's memory rule gives
    case = CASES["trtllm0.5static-l40s-llama-2-7b-fp8-tp1-bs64-128-2048"]
    point, notes = pc.scenario_point(case, max_prompts=1000, use_stack=True,
                                     burst_rate=math.inf)
    assert point["kv"] == {"num_blocks": 4_352, "block_size": 32}
    assert any("a static batch of 64 ran whole" in n for n in notes)
    # an in-flight row keeps the engine's rule or the preset's
    inflight = CASES["trtllm0.12-a100-80gb-llama-3-70b-fp16-tp2-128-2048"]
    assert km.static_session_kv(inflight, {"dist": "fixed", "tokens": 128},
                                {"dist": "fixed", "tokens": 2048},
                                {"max_num_seqs": 256}) == ({}, [])


def test_where_the_logs_buffer_reading_leaves_nothing_the_sourced_one_sizes_the_cache() -> None:
    # 0.13's Llama-3.1-70B FP8 engine on one H100 (max_batch_size 2,048): 79.10 GiB less
    # weights 67.67 (the embedding and lm_head in 16 bits), the log's 11 GiB of buffers and
    # the rest leaves -0.67 GiB. The engine ran, so it had a cache: the term-by-term buffers
    # at max_seq_len 2,176 (6.16 GiB) leave 4.17 GiB, 0.9 of which at 163,840 B a token is
    # 769 blocks of 32
    case = CASES["trtllm0.13-h100-sxm-llama-3.1-70b-fp8-tp1-128-2048"]
    point, notes = pc.scenario_point(case, max_prompts=1000, use_stack=True,
                                     burst_rate=math.inf)
    assert point["kv"] == {"num_blocks": 769, "block_size": 32}
    assert int(0.9 * 4.17 * GIB / 163_840) // 32 == pytest.approx(769, abs=1)
    assert any("0.9 x 4.17 GiB free per GPU" in n for n in notes)  # the figure above, printed
    assert any("the log's buffer reading leaves no KV cache (-0.67 GiB" in n for n in notes)
    # an engine the log's reading leaves memory to keeps that reading
    point, notes = pc.scenario_point(CASES["trtllm0.12-a100-80gb-llama-3-70b-fp16-tp2-128-2048"],
                                     max_prompts=1000, use_stack=True, burst_rate=math.inf)
    assert not any("so the sourced one" in n for n in notes)
