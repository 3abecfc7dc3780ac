"""``[cost] decode_kv_reads``: a decode kernel reading each KV head's cache G times a step.

It multiplies a fitted profile's decode-context term by G and nothing else (worked by
hand on an inline piecewise profile, on the shipped Mistral-7B H200 profile and behind a
``time_scale``), and a roofline prior's decode KV bytes (its B_kv's C term: by hand on a
KV-bound decode step, the scalar, array and decode pricers alike); a value below 1 is
refused naming the field.
"""

from __future__ import annotations

import dataclasses

import pytest

from simulator.costs.base import ScaledCost
from simulator.costs.from_config import cost_model_from_config
from simulator.costs.kv_reads import with_decode_kv_reads
from simulator.costs.piecewise import PiecewiseCost
from simulator.costs.roofline import RooflineCost
from simulator.costs.shape_equivalent import LogitsOffsetCost
from simulator.errors import ConfigError
from simulator.shapes import StepShape, StepShapes
from simulator.specs import get_hardware, get_model

MODEL, H200 = get_model("mistral-7b"), get_hardware("h200")
INLINE = {"form": "piecewise", "decode_step_s": 0.01, "decode_seq_s": 1e-4,
          "decode_context_s": 1e-6, "prefill_token_s": 2e-5}
DECODE = StepShape(num_decode_seqs=8, decode_context_tokens=1000)
PREFILL = StepShape(num_prefill_tokens=500)


def _cost(section: dict[str, object]) -> tuple[object, str]:
    return cost_model_from_config(section, MODEL, H200, 1, "bf16", "bf16")


def test_inline_profile_by_hand() -> None:
    once, _ = _cost(INLINE)
    four, used = _cost({**INLINE, "decode_kv_reads": 4})
    # 0.01 + 8 x 1e-4 + 1000 x 1e-6 = 0.0118 read once; the context term x 4: 0.0148
    assert once.step_time(DECODE) == pytest.approx(0.0118, abs=1e-15)
    assert four.step_time(DECODE) == pytest.approx(0.0148, abs=1e-15)
    assert four.step_time(PREFILL) == once.step_time(PREFILL)  # no decode rows: unchanged
    assert "decode KV cache read 4x a step" in used


def test_shipped_profile_changes_by_its_context_term_only() -> None:
    # Mistral-7B is priced by Llama-3.1-8B's profile plus its vocabulary's offset
    once, used = _cost({})
    four, _ = _cost({"decode_kv_reads": 4})
    assert isinstance(once, LogitsOffsetCost) and used.startswith("profile of llama-3.1-8b")
    inner = once.inner
    assert isinstance(inner, PiecewiseCost)
    added = 3 * inner.decode_context_s * 1000  # three more reads of C = 1000
    assert added > 0
    assert four.step_time(DECODE) - once.step_time(DECODE) == pytest.approx(added, rel=1e-9)
    assert four.step_time(PREFILL) == once.step_time(PREFILL)


def test_behind_a_time_scale() -> None:
    inner = PiecewiseCost(decode_step_s=0.01, decode_context_s=1e-6)
    scaled = with_decode_kv_reads(ScaledCost(inner, 0.5), 2.0, "cost.decode_kv_reads")
    assert isinstance(scaled, ScaledCost) and scaled.time_scale == 0.5
    assert scaled.inner == dataclasses.replace(inner, decode_context_s=2e-6)


def test_roofline_prior_by_hand() -> None:
    # Mistral-7B bf16 on one H200: 32 layers x 8 KV heads x 128 x 2 (K, V) x 2 bytes =
    # 131,072 bytes of KV a token. A decode of 64 rows attending 64 x 4,000 tokens reads
    # 64 x 4,000 x 131,072 bytes once; read 4 times, 3 x that more, at the prior's KV
    # bandwidth (bandwidth x eff_kv), while its attention FLOPs (4 L n_h d_h C, at the
    # attention peak) stay far below either: so the step grows by exactly those bytes.
    once = RooflineCost(MODEL, H200)
    four = RooflineCost(MODEL, H200, decode_kv_reads=4.0)
    shape = StepShape(num_decode_seqs=64, decode_context_tokens=64 * 4000)
    kv_bw = H200.bandwidth_gbps * 1e9 * once.kv_memory_efficiency
    added = 3 * 64 * 4000 * 131_072 / kv_bw
    assert MODEL.kv_bytes_per_token("bf16") == 131_072
    flops_s = 4 * 32 * 32 * 128 * 64 * 4000 / H200.peak_flops("bf16") / once.compute_efficiency
    assert flops_s < 64 * 4000 * 131_072 / kv_bw  # the attention is bound by its reads
    assert four.step_time(shape) - once.step_time(shape) == pytest.approx(added, rel=1e-12)
    assert four.step_time(PREFILL) == once.step_time(PREFILL)  # no decode rows: unchanged
    # the array path and the decode pricer price the same step the same
    many = StepShapes.from_shapes([shape, PREFILL])
    assert four.step_times(many).tolist() == [four.step_time(shape), four.step_time(PREFILL)]
    assert four.decode_pricer()(64, 64 * 4000, 0) == four.step_time(shape)


def test_roofline_prior_through_the_config() -> None:
    once, _ = _cost({"form": "roofline"})
    four, used = _cost({"form": "roofline", "decode_kv_reads": 4})
    assert isinstance(four, RooflineCost) and four.decode_kv_reads == 4.0
    assert four.step_time(DECODE) > once.step_time(DECODE)
    assert four.step_time(PREFILL) == once.step_time(PREFILL)
    assert "decode KV cache read 4x a step" in used


@pytest.mark.parametrize("section, message", [
    ({"form": "roofline", "decode_kv_reads": 0.5}, "cost.decode_kv_reads=0.5 must be a number"),
    ({**INLINE, "decode_kv_reads": 0.5}, "cost.decode_kv_reads=0.5 must be a number in [1.0"),
    ({**INLINE, "decode_kv_reads": "4"}, "cost.decode_kv_reads='4' must be a number"),
])
def test_refused_with_the_field_named(section: dict[str, object], message: str) -> None:
    with pytest.raises(ConfigError, match=message.replace("[", r"\[").replace("(", r"\(")):
        _cost(section)
