"""The decode-attention kernel note on TensorRT-LLM's pre-0.10 static-batch rows
(benchmarks/trtllm_xqa.py) as benchmarks/published_cases.py replays them.
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
xqa = importlib.import_module("benchmarks.trtllm_xqa")

CASES = {c.id: c for c in pc.load_cases()}


def _kernel_notes(case: object) -> list[str]:
    _, notes = pc.scenario_point(case, max_prompts=1000, use_stack=True, burst_rate=math.inf)
    return [n for n in notes if n.startswith("decode attention:")]


@pytest.mark.parametrize("model, group", [
    ("mistral-7b", 4),  # 32 query heads / 8 KV heads
    ("mixtral-8x7b", 4),  # 32 / 8
    ("llama-2-70b", 8),  # 64 / 8
    ("llama-2-7b", 1),  # 32 / 32: MHA
])
def test_group_size_is_query_heads_over_kv_heads(model: str, group: int) -> None:
    assert xqa.group_size(model) == group


@pytest.mark.parametrize("case_id, group, reads", [
    # 0.9.0 had contiguous-KV XQA kernels for 8 query heads per KV head only
    ("trtllm0.9.0static-h200-mistral-7b-fp8-tp1-bs120-128-2048", 4, 3.725373),
    ("trtllm0.8.0static-h200-mistral-7b-fp8-tp1-bs120-128-2048", 4, 3.725373),
    # 0.6.1 had no XQA kernel: the 70B's 8:1 groups ran the masked MHA kernel too
    ("trtllm0.6.1static-h100-sxm-llama-2-70b-fp8-tp2-bs1024-128-128", 8, 5.2),
    # a 16-bit cache at a group size the re-read was not fitted at: G reads
    ("trtllm0.5static-a100-80gb-llama-2-70b-fp16-tp4-bs64-128-2048", 8, 8),
    # 0.10's performance table (in-flight batching): the preset's XQA groups, 1 and 8
    ("trtllm0.10-h100-sxm-mixtral-8x7b-fp8-tp2-128-2048", 4, 2.6),
])
def test_a_group_without_a_kernel_is_named(case_id: str, group: int, reads: float) -> None:
    notes = _kernel_notes(CASES[case_id])
    assert len(notes) == 1
    assert f"no XQA kernel for {group} query heads per KV head" in notes[0]
    assert notes[0].endswith(f"cost.decode_kv_reads = {reads:g} (benchmarks/trtllm_xqa.py)")


@pytest.mark.parametrize("case_id", [
    "trtllm0.9.0static-h200-llama-2-70b-fp8-tp2-bs512-128-2048",  # 8:1 has its kernel
    "trtllm0.9.0static-h200-llama-2-7b-fp8-tp1-bs120-128-2048",  # MHA: read once anyway
    "trtllm0.10-h200-llama-2-70b-fp8-tp4-128-128",  # 0.10 had XQA for 8:1
    "nim1.0-dli-h100-sxm-llama-3-8b-fp8-tp1-200-200-c1",  # NIM's engines: not read here
])
def test_no_note_where_the_kernel_existed_or_is_unknown(case_id: str) -> None:
    assert _kernel_notes(CASES[case_id]) == []


def test_the_repeated_reads_are_the_only_setting_changed() -> None:
    case = CASES["trtllm0.9.0static-h200-mistral-7b-fp8-tp1-bs120-128-2048"]
    unknown = dataclasses.replace(case, id="probe", stack_version="0.7.1")
    with_note, _ = pc.scenario_point(case, max_prompts=1000, use_stack=True,
                                     burst_rate=math.inf)
    without, notes = pc.scenario_point(unknown, max_prompts=1000, use_stack=True,
                                       burst_rate=math.inf)
    assert not [n for n in notes if n.startswith("decode attention:")]
    # 32 query heads / 8 KV heads over an FP8 cache on an H200: 4 x 13 x 4.8 / 67 reads
    assert with_note.pop("cost") == {"decode_kv_reads": pytest.approx(3.725373)}
    assert {**with_note, "name": "probe"} == without


def test_a_prior_priced_row_keeps_its_reads() -> None:
    # Falcon-180B (232 query heads, 8 KV heads: 29 a KV head) on the A100 has no kernel
    # tables at head width 64, so a roofline prior prices it; the prior takes the reads on
    # its decode KV bytes, so the point keeps cost.decode_kv_reads = 29 and gets no note
    case = CASES["trtllm0.6.1static-a100-80gb-falcon-180b-fp16-tp8-bs128-128-2048"]
    point, _ = pc.scenario_point(case, max_prompts=1000, use_stack=True, burst_rate=math.inf)
    assert point["cost"] == {"decode_kv_reads": 29}
    priced, note = xqa.priced_reads(point)
    assert note is None and priced == point


@pytest.mark.parametrize("case_id, reads", [
    # 16-bit cache at 4 query heads per KV head: the trtllm 0.10 preset's fitted masked
    # kernel re-read, 1 + 0.234 x 3 = 1.702 (the same kernel, the group size it was fitted at)
    ("trtllm0.9.0static-a100-80gb-mistral-7b-fp16-tp1-bs120-128-2048", 1.702),
    ("trtllm0.9.0static-a100-80gb-mixtral-8x7b-fp16-tp2-bs128-128-2048", 1.702),
    # 16-bit at group sizes the re-read was not fitted at: G (8 and 29)
    ("trtllm0.5static-a100-80gb-llama-2-70b-fp16-tp4-bs64-128-2048", 8.0),
    ("trtllm0.6.1static-a100-80gb-falcon-180b-fp16-tp8-bs128-128-2048", 29.0),
])
def test_a_16_bit_cache_takes_the_fitted_re_read_only_at_its_group_size(
        case_id: str, reads: float) -> None:
    case = CASES[case_id]
    assert xqa.masked_mha_reads(case) == pytest.approx(reads)
    point, notes = pc.scenario_point(case, max_prompts=1000, use_stack=True,
                                     burst_rate=math.inf)
    assert point["cost"]["decode_kv_reads"] == pytest.approx(reads)
    assert f"cost.decode_kv_reads = {reads:g}" in _kernel_notes(case)[0]


@pytest.mark.parametrize("group, gpu, reads", [
    (4, "h200", 4 * 13 * 4800 / 67000),  # 3.725: bound by the CUDA cores, about G
    (4, "h100-sxm", 4 * 13 * 3350 / 67000),  # 2.6: the same work, less bandwidth
    (4, "l40s", 1.0),  # 4 x 13 x 864 / 91600 = 0.49: one read of the cache bounds it
    (29, "l40s", 29 * 13 * 864 / 91600),  # 3.556
    (4, "a100-80gb", 4.0),  # no FP32 rate here (and no FP8 on the A100): G
])
def test_an_fp8_cache_on_the_masked_kernel_is_bound_by_the_cuda_cores(
        group: int, gpu: str, reads: float) -> None:
    assert xqa.fp8_masked_reads(group, gpu) == pytest.approx(reads, abs=1e-6)


def test_the_fp8_fit_set_is_what_the_case_files_mark_in_sample() -> None:
    # benchmarks/masked_reads_fit.py fits FP8_MASKED_OPS on the H200 static rows over an
    # FP8 cache: those 22 and no other masked-kernel row carry its `fitted` mark
    fit = importlib.import_module("benchmarks.masked_reads_fit")
    rows = fit.masked_rows("fp8")
    chosen = {c.id for c in rows if c.gpu == fit.FIT_GPU and "gptSessionBenchmark" in c.notes}
    marked = {c.id for c in CASES.values() if "FP8_MASKED_OPS" in c.fitted}
    assert len(chosen) == 22 and chosen == marked
