"""benchmarks/published_fit.py: a host cost recovered from a synthetic published case.

The case is made from the simulator itself: its "published" throughput is what the
simulator gives with a known per-token host cost, so fitting that one term to the case's
throughput must give the cost back (to the search's 1 us tolerance).
"""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
pc = importlib.import_module("benchmarks.published_cases")
pf = importlib.import_module("benchmarks.published_fit")

TOKEN_S = 40e-6  # the cost hidden in the synthetic case
EFF_A = 0.3  # the attention efficiency hidden in the knob's synthetic case


def burst_case(case_id: str, metric: str, published: float, *, prompt: int, output: int,
               prompts: int, stack: str = "trtllm", version: str = "0.10",
               gpu: str = "h100-sxm", model: str = "tiny") -> object:
    """A synthetic burst of ``prompts`` requests of ``prompt`` + ``output`` tokens on one GPU,
    publishing ``published`` for ``metric``."""
    return pc.Case(id=case_id, source="test", stack=stack, stack_version=version, gpu=gpu,
                   model=model, weight_dtype="bf16", kv_dtype="bf16", tp=1,
                   workload={"prompt_tokens": prompt, "output_tokens": output,
                             "num_prompts": prompts, "arrival": "burst"},
                   metrics={metric: published})


def synthetic_case(published: float) -> object:
    """A burst of 40 requests of 64 + 64 tokens of the tiny model on one H100, TensorRT-LLM
    0.10, publishing ``published`` output tokens/s."""
    return pc.Case(id="synthetic", source="test", stack="trtllm", stack_version="0.10",
                   gpu="h100-sxm", model="tiny", weight_dtype="bf16", kv_dtype="bf16", tp=1,
                   workload={"prompt_tokens": 64, "output_tokens": 64, "num_prompts": 40,
                             "arrival": "burst"},
                   metrics={"output_throughput": published})


def test_a_flat_token_cost_is_recovered_from_throughput() -> None:
    probe = synthetic_case(1.0)
    # errors() is (sim - published) / published, so with published = 1 it is sim - 1
    truth = pf.errors(probe, {"token_s": TOKEN_S}, flat=True)["output_throughput"] + 1.0
    without = pf.errors(probe, {"token_s": 0.0}, flat=True)["output_throughput"] + 1.0
    assert truth < without  # the cost slows the burst
    fitted = pf.fit([synthetic_case(truth)], ("token_s",), flat=True, throughput=True)
    assert fitted["token_s"] == pytest.approx(TOKEN_S, abs=1e-6)


def test_throughput_is_left_out_unless_asked() -> None:
    # a throughput-only case gives no latency residual to fit without --throughput
    case = synthetic_case(1000.0)
    assert pf.residuals([case], ("token_s",), pf.np.array([0.04]), flat=True).size == 0
    assert pf.residuals([case], ("token_s",), pf.np.array([0.04]), flat=True,
                        throughput=True).size == 1


def test_an_eager_step_cost_is_recovered_past_the_graph_limit() -> None:
    """SGLang 0.4 replays up to 160 decode rows as a graph: a burst of 300 runs its first
    decode steps eagerly, so the eager cost slows it and is fitted back from throughput."""
    def case(published: float) -> object:
        return pc.Case(id="synthetic-eager", source="test", stack="sglang", stack_version="0.4",
                       gpu="h100-sxm", model="tiny", weight_dtype="bf16", kv_dtype="bf16", tp=1,
                       workload={"prompt_tokens": 64, "output_tokens": 64, "num_prompts": 300,
                                 "arrival": "burst"},
                       metrics={"output_throughput": published})

    eager_s = 2e-3
    probe = case(1.0)
    truth = pf.errors(probe, {"eager_s": eager_s}, flat=True)["output_throughput"] + 1.0
    without = pf.errors(probe, {"eager_s": 0.0}, flat=True)["output_throughput"] + 1.0
    assert truth < 0.9 * without  # the eager steps cost something visible
    fitted = pf.fit([case(truth)], ("eager_s",), flat=True, throughput=True, high_ms=10.0)
    assert fitted["eager_s"] == pytest.approx(eager_s, abs=1e-6)


def test_an_intake_cost_is_recovered_beside_a_held_term() -> None:
    """A burst of 40 reaches the engine over 40 x intake_s and its first tokens wait for
    the server: the intake moves the mean TTFT, and is fitted back from it with request_s
    held where it was set."""
    def case(published: float) -> object:
        return burst_case("synthetic-intake", "mean_ttft_ms", published, prompt=64,
                          output=64, prompts=40)

    held = {"request_s": 1e-3}
    probe = case(1.0)
    truth = pf.errors(probe, {**held, "intake_s": 2e-3}, flat=True)["mean_ttft_ms"] + 1.0
    without = pf.errors(probe, held, flat=True)["mean_ttft_ms"] + 1.0
    assert truth > without + 39 * 2e-3 * 1e3 / 2  # at least half the burst's intake, in ms
    fitted = pf.fit([case(truth)], ("intake_s",), flat=True, high_ms=10.0, fixed=held)
    assert fitted == {"intake_s": pytest.approx(2e-3, abs=1e-6)}


def test_a_roofline_knob_is_recovered_from_a_burst() -> None:
    """--knob: 8 prompts of 16,000 + 16 tokens of Llama-3.1-8B on one A100 under vLLM
    0.11, priced by the prior; attention is much of their prefill, so a slower attention
    kernel delays the first tokens, and its efficiency is fitted back from the mean TTFT."""
    def case(published: float) -> object:
        return burst_case("synthetic-attention", "mean_ttft_ms", published, prompt=16000,
                          output=16, prompts=8, stack="vllm-v1", version="0.11",
                          gpu="a100-80gb", model="llama-3.1-8b")

    probe = case(1.0)
    truth = pf.errors(probe, {}, knobs={"attention_efficiency": EFF_A})["mean_ttft_ms"] + 1
    full = pf.errors(probe, {}, knobs={"attention_efficiency": 1.0})["mean_ttft_ms"] + 1
    assert truth > full  # the slower kernel delays the first tokens
    assert pf.fit_knob([case(truth)], "attention_efficiency") == pytest.approx(EFF_A, abs=0.01)
