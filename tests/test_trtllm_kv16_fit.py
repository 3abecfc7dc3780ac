"""benchmarks/trtllm_kv16_fit.py: the 16-bit re-read term recovered from synthetic rows.

The rows are made from the simulator itself: each one's "published" throughput is what
the simulator gives with a known beta, so the fit must give beta back (to the search's
tolerance), and with beta = 0 the error is what that beta took away.
"""

from __future__ import annotations

import dataclasses
import importlib
import math
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
pc = importlib.import_module("benchmarks.published_cases")
fit = importlib.import_module("benchmarks.trtllm_kv16_fit")

BETA = 0.2  # the term hidden in the synthetic rows


def synthetic_rows() -> list[tuple[object, dict, int]]:
    """Two decode-heavy bursts of 60 requests (128 + 1024 tokens) on one H100 at TP 1, bf16,
    TensorRT-LLM 0.13: Llama-3.1-8B (G = 4) and Llama-2-7B (G = 1)."""
    out = []
    for model, group in (("llama-3.1-8b", 4), ("llama-2-7b", 1)):
        case = pc.Case(id=f"synthetic-{model}", source="test", stack="trtllm",
                       stack_version="0.13", gpu="h100-sxm", model=model,
                       weight_dtype="bf16", kv_dtype="bf16", tp=1,
                       workload={"prompt_tokens": 128, "output_tokens": 1024,
                                 "num_prompts": 60, "arrival": "burst"},
                       metrics={"output_throughput": 1.0})
        point, _ = fit.replay_point(case, max_prompts=60, burst_rate=math.inf)
        # error() is sim / published - 1, so with published = 1 it is sim - 1
        truth = fit.error(case, point, 1.0 + BETA * (group - 1)) + 1.0
        out.append((dataclasses.replace(case, metrics={"output_throughput": truth}), point,
                    group))
    return out


def test_beta_is_recovered_and_g_1_rows_do_not_move() -> None:
    rows = synthetic_rows()
    assert fit.fit(rows) == pytest.approx(BETA, abs=0.01)
    before = fit.errors(rows, 0.0)
    assert before[0] > 0.02  # one read: the G = 4 burst runs faster than "published"
    # G = 1 reads the cache once at any beta (1 + beta (G - 1)): its error stays 0 where
    # the G = 4 burst's moves past its truth
    high = fit.errors(rows, 2 * BETA)
    assert high[1] == pytest.approx(0.0, abs=1e-12)
    assert high[0] < -0.02


def test_the_0_10_fit_takes_the_masked_kernels_16_bit_rows_only() -> None:
    # Under 0.10 only G = 4 has no XQA kernel: Llama-3.1-8B (32 / 8 heads) is taken at TP 1
    # and 2, Llama-3.1-70B (G = 8) is not, nor an FP8 cache, nor a row another fit used;
    # a row this fit used is (its walk, handshake and host cost wrap the tables it scales)
    def case(cid: str, model: str, tp: int, kv: str, fitted: str = "") -> object:
        return pc.Case(id=cid, source="test", stack="trtllm", stack_version="0.10",
                       gpu="h100-sxm", model=model, weight_dtype=kv, kv_dtype=kv, tp=tp,
                       workload={"prompt_tokens": 128, "output_tokens": 128,
                                 "num_prompts": 8, "arrival": "burst"},
                       metrics={"output_throughput": 1.0}, fitted=fitted)
    cases = [case("a", "llama-3.1-8b", 1, "fp16"), case("b", "llama-3.1-8b", 2, "bf16"),
             case("c", "llama-3.1-70b", 4, "fp16"), case("d", "llama-3.1-8b", 1, "fp8"),
             case("e", "llama-3.1-8b", 1, "fp16", fitted="another preset's term"),
             case("f", "llama-3.1-8b", 1, "fp16", fitted="benchmarks/trtllm_kv16_fit.py")]
    picked = fit.rows(cases, "0.10")
    assert [(c.id, g) for c, _, g in picked] == [("a", 4), ("b", 4), ("f", 4)]
    assert fit.rows(cases, "0.11") == []  # none of them is a 0.11 release
