"""A stack preset's host costs: fixed, per layer, and the multi-GPU terms (vLLM 0.6 sends
every step's batch from its driver to the other workers, and vLLM 0.8's V1 executor
pickles a request object per row for them: a cost per decode row that one GPU does not
pay); vLLM 0.5's cost per output token, from vLLM's own profile."""

from __future__ import annotations

from pathlib import Path

import pytest

from benchmarks.vllm05_host_share import PROMPTS, blog_trace, host_share
from simulator.deployment import resolve
from simulator.shapes import StepShape
from simulator.stack_presets import VLLM_06_MULTI_GPU, VLLM_V1_08_MULTI_GPU
from simulator.stacks import STACKS

DECODE = StepShape(num_decode_seqs=100, decode_context_tokens=100 * 500)


def _step_s(stack: str, tp: int, seq_s: float | None = None) -> float:
    """A 100-row decode step of Llama-3.1-8B on ``tp`` H100s under ``stack``, with the
    scenario's own ``seq_s`` when given."""
    point = {"model": {"name": "llama-3.1-8b"}, "hardware": {"gpu": "h100-sxm", "tp": tp},
             "stack": {"name": stack}}
    if seq_s is not None:
        point["cost"] = {"overhead": {"seq_s": seq_s}}
    return resolve(point).cost.step_time(DECODE)


def test_vllm_v0_preset_adds_its_multi_gpu_terms_only_past_one_gpu() -> None:
    preset = STACKS["vllm-v0"][-1]
    one, two = preset.host_costs(32), preset.host_costs(32, 2)
    assert "seq_s" not in one
    assert two["seq_s"] == VLLM_06_MULTI_GPU["seq_s"] == pytest.approx(30.6e-6)
    assert {k: v for k, v in two.items() if k != "seq_s"} == one  # per layer: unchanged
    assert preset.host_costs(32, 8) == two  # one broadcast, however many workers read it


def test_a_multi_gpu_decode_step_pays_its_rows_once_each() -> None:
    # 100 rows x 30.6 us = 3.06 ms on two GPUs; nothing on one
    assert _step_s("vllm-v0", 2) - _step_s("vllm-v0", 2, seq_s=0.0) == pytest.approx(
        100 * 30.6e-6, rel=1e-9)
    assert _step_s("vllm-v0", 1) == _step_s("vllm-v0", 1, seq_s=0.0)


def test_v1_and_the_scenarios_own_term_are_left_alone() -> None:
    assert _step_s("vllm-v1", 2) == _step_s("vllm-v1", 2, seq_s=0.0)  # V1: no such term
    # the scenario's own seq_s wins over the preset's, term by term
    assert _step_s("vllm-v0", 2, seq_s=1e-3) - _step_s("vllm-v0", 2, seq_s=0.0) == \
        pytest.approx(100 * 1e-3, rel=1e-9)


def _v1_step(version: str, tp: int) -> float:
    point = {"model": {"name": "llama-3.1-8b"}, "hardware": {"gpu": "h100-sxm", "tp": tp},
             "stack": {"name": "vllm-v1", "version": version}}
    return resolve(point).cost.step_time(DECODE)


@pytest.mark.parametrize("version", ["0.8", "0.8.4", "0.8.5"])
def test_vllm_08_pays_a_row_cost_only_with_more_than_one_gpu(version: str) -> None:
    # 100 rows x 52.5 us = 5.25 ms on two GPUs over 0.9's step (the same kernels and per-
    # layer costs); on one GPU the two releases price the step alike
    assert VLLM_V1_08_MULTI_GPU["seq_s"] == pytest.approx(52.5e-6)
    assert _v1_step(version, 2) - _v1_step("0.9", 2) == pytest.approx(100 * 52.5e-6,
                                                                        rel=1e-9)
    assert _v1_step(version, 1) == _v1_step("0.9", 1)
    preset = next(p for p in STACKS["vllm-v1"] if p.version == version)
    assert "seq_s" not in preset.host_costs(80) and "seq_s" in preset.host_costs(80, 8)


def _v0_step(version: str, shape: StepShape) -> float:
    point = {"model": {"name": "llama-3-8b"}, "hardware": {"gpu": "h100-sxm", "tp": 1},
             "stack": {"name": "vllm-v0", "version": version}}
    return resolve(point).cost.step_time(shape)


@pytest.mark.parametrize(("version", "token_s"), [("0.5", 228.4e-6), ("0.5.4", 95.8e-6),
                                                  ("0.5.5", 95.8e-6)])
def test_vllm_05_pays_for_every_output_token_between_steps(version: str,
                                                             token_s: float) -> None:
    # a 100-row decode step samples 100 tokens: 100 x 95.8 us = 9.58 ms more than 0.6
    # under 0.5.4 (0.5.5 takes that preset); 22.84 ms under 0.5.0-0.5.3
    assert _v0_step(version, DECODE) - _v0_step("0.6", DECODE) == pytest.approx(
        100 * token_s, rel=1e-9)
    # a prefill step admitting 3 prompts samples their 3 first tokens
    prefill = StepShape(num_prefill_tokens=600, prefill_attn_work=600 * 100, num_admitted=3)
    assert _v0_step(version, prefill) - _v0_step("0.6", prefill) == pytest.approx(
        3 * token_s, rel=1e-9)


@pytest.mark.parametrize(("version", "parts"), [("0.5", 62.0), ("0.5.4", 29.0)])
def test_vllm_05_presets_give_the_blogs_host_to_gpu_split(version: str, parts: float,
                                                         tmp_path: Path) -> None:
    # vLLM's v0.6.0 blog: v0.5.3 on Llama 3 8B and one H100 spent 33% in its API server,
    # 29% scheduling, 38% on the GPU; on its 500 ShareGPT prompts at once (means 202 /
    # 179) the preset's host
    # seconds (steps x step_s + token_s x output tokens) over the rest of the busy time
    # are 62 : 38 (API server in the engine's process) and 29 : 38 (from 0.5.4)
    trace, _ = blog_trace(tmp_path)
    host, gpu, _, tokens = host_share(trace, None, version)
    assert tokens == pytest.approx(PROMPTS * 179, rel=0.01)
    assert host / gpu == pytest.approx(parts / 38.0, rel=0.005)


def test_vllm_05_without_the_32k_rule_and_0_5_4_with_it() -> None:
    # vllm-project/vllm#6666 (2024-07-23) turned chunked prefill on above 32K context
    def policy(version: str):  # noqa: ANN202
        return resolve({"model": {"name": "llama-3.1-8b"},
                        "stack": {"name": "vllm-v0", "version": version}}).policy
    assert (policy("0.5").chunked_prefill, policy("0.5").max_num_batched_tokens) == \
        (False, 131_072)
    assert (policy("0.5.4").chunked_prefill, policy("0.5.4").max_num_batched_tokens) == \
        (True, 512)
