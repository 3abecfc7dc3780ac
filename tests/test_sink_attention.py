"""vLLM V1 runs a sink model (gpt-oss) below SM90 on its Triton attention: the prior's
``attention_efficiency`` (eff_a) slows attention's compute and nothing else.

By hand: a prefill of P tokens with an empty cache reads A = P^2 / 2 query-key pairs in
every full-attention layer (gpt-oss's window layers at most W a query), so attention's
compute is F_attn / (peak x tp x eff_c x eff_a); halving eff_a doubles it exactly, and
the matmuls, KV reads and all-reduces stay as they were. (``published_fit.py --knob``
recovering an efficiency from a synthetic burst: tests/test_published_fit.py.)
"""

from __future__ import annotations

import pytest

from simulator.costs.roofline import RooflineCost
from simulator.deployment import resolve
from simulator.errors import ConfigError
from simulator.shapes import StepShape
from simulator.specs.hardware import get_hardware
from simulator.specs.models import get_model
from simulator.stack_presets import VLLM_TRITON_SINK_ATTENTION
from simulator.stacks import STACKS


def prefill(p: int) -> StepShape:
    """One prompt of ``p`` tokens prefilled from an empty cache."""
    return StepShape(num_prefill_tokens=p, prefill_attn_work=p * p / 2,
                     num_decode_seqs=0, decode_context_tokens=0, num_admitted=1)


def test_attention_compute_is_flops_over_peak_times_both_efficiencies() -> None:
    model, hw = get_model("llama-3.1-8b"), get_hardware("a100-80gb")
    p = 8192
    cost = RooflineCost(model, hw, compute_efficiency=0.5, attention_efficiency=0.25)
    flops = 4 * 32 * 32 * 128 * (p * p / 2)  # 4 L n_h d_h x A (n (ctx + n / 2), ctx 0)
    want = flops / (hw.peak_flops("bf16") * 0.5 * 0.25)
    terms = cost.terms(prefill(p))
    assert terms.attention_s == pytest.approx(want, rel=1e-12)  # compute-bound at 8k
    # the scalar pricer the simulator steps with gives the same total, bit for bit
    assert cost.step_time(prefill(p)) == terms.total_s


def test_halving_eff_a_doubles_attention_and_leaves_the_rest() -> None:
    model, hw = get_model("gpt-oss-20b"), get_hardware("a100-80gb")
    base = RooflineCost(model, hw, weight_dtype="mxfp4").terms(prefill(32000))
    slow = RooflineCost(model, hw, weight_dtype="mxfp4", attention_efficiency=0.5).terms(
        prefill(32000))
    assert slow.attention_s == pytest.approx(2 * base.attention_s, rel=1e-12)
    assert (slow.matmul_s, slow.allreduce_s, slow.overhead_s, slow.memory_s) == (
        base.matmul_s, base.allreduce_s, base.overhead_s, base.memory_s)


@pytest.mark.parametrize("value", [0, 1.5, -0.1])
def test_an_attention_efficiency_outside_0_1_is_refused(value: float) -> None:
    with pytest.raises(ConfigError, match="cost.attention_efficiency"):
        resolve({"model": {"name": "tiny"}, "cost": {"form": "roofline",
                                                     "attention_efficiency": value}})


def deployment(model: str, gpu: str, stack: str = "vllm-v1", version: str = "0.11"):  # noqa: ANN201
    weights = "mxfp4" if model.startswith("gpt-oss") else "bf16"
    return resolve({"model": {"name": model, "weight_dtype": weights},
                    "hardware": {"gpu": gpu}, "stack": {"name": stack, "version": version}})


def kernel_eff_a(dep) -> float:  # noqa: ANN001
    """The attention efficiency of the prior under the deployment's host terms."""
    cost = dep.cost
    while not isinstance(cost, RooflineCost):
        cost = getattr(cost, "inner", None) or cost.kernel
    return cost.attention_efficiency


def test_vllm_v1_prices_gpt_oss_on_an_a100_with_its_triton_attention() -> None:
    dep = deployment("gpt-oss-20b", "a100-80gb")
    assert kernel_eff_a(dep) == VLLM_TRITON_SINK_ATTENTION
    assert f"attention computes at {VLLM_TRITON_SINK_ATTENTION:g}" in dep.cost_source


@pytest.mark.parametrize(("model", "gpu", "stack", "version"), [
    ("gpt-oss-20b", "h100-sxm", "vllm-v1", "0.11"),  # Hopper: FlashAttention 3 has sinks
    ("gpt-oss-20b", "b200", "vllm-v1", "0.11"),  # Blackwell: FlashInfer
    ("llama-3.1-8b", "a100-80gb", "vllm-v1", "0.11"),  # no sinks: FlashAttention 2
    ("gpt-oss-20b", "a100-80gb", "sglang", ""),  # not vLLM's rule
])
def test_other_deployments_keep_the_matmuls_efficiency(model: str, gpu: str, stack: str,
                                                       version: str) -> None:
    dep = deployment(model, gpu, stack, version)
    assert "attention computes at" not in dep.cost_source
    preset = dep_preset(stack, version)
    assert preset.attention_efficiency(get_model(model), get_hardware(gpu)) == 1.0


def dep_preset(stack: str, version: str):  # noqa: ANN201
    """The preset a ``[stack]`` section names."""
    from simulator.stacks import StackSection
    return StackSection(name=stack, version=version).preset()


def test_every_vllm_v1_preset_carries_the_rule_and_no_other_stack_does() -> None:
    model, a100 = get_model("gpt-oss-120b"), get_hardware("a100-80gb")
    for name, presets in STACKS.items():
        for preset in presets:
            want = VLLM_TRITON_SINK_ATTENTION if name == "vllm-v1" else 1.0
            assert preset.attention_efficiency(model, a100) == want, preset.describe()


def test_a_form_of_the_scenarios_own_sets_its_knobs_whole() -> None:
    # an inline roofline form prices steps as the scenario says: the stack's eff_a is not
    # laid over it (as the stack's other kernel terms are not)
    dep = resolve({"model": {"name": "gpt-oss-20b", "weight_dtype": "mxfp4"},
                   "hardware": {"gpu": "a100-80gb"}, "stack": {"name": "vllm-v1"},
                   "cost": {"form": "roofline"}})
    assert kernel_eff_a(dep) == 1.0


def test_a_shipped_prior_file_takes_the_stacks_attention_efficiency() -> None:
    # the prior an empty section falls back to may be a shipped file (form "roofline"),
    # whose knobs leave eff_a out (STACK_KNOBS): the stack's is laid on it, a file's own wins
    from dataclasses import replace

    from simulator.costs.from_config import PROFILES_DIR
    from simulator.costs.profile import load_profile
    from simulator.costs.roofline import STACK_KNOBS

    profile = load_profile(PROFILES_DIR / "a100-40gb__llama-3.1-8b__bf16__tp1.json")
    assert profile.form == "roofline" and not set(STACK_KNOBS) & set(profile.coefficients)
    model, hw = get_model("llama-3.1-8b"), get_hardware("a100-40gb")
    assert profile.build(model, hw, attention_efficiency=0.5).attention_efficiency == 0.5
    assert profile.build(model, hw).attention_efficiency == 1.0
    own = replace(profile, coefficients={**profile.coefficients, "attention_efficiency": 0.7})
    assert own.build(model, hw, attention_efficiency=0.5).attention_efficiency == 0.7
