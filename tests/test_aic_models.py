"""The other dense catalogue models composed from AIConfigurator's tables
(calibrate/aic_models.py): which deployments, what the shipped files say, a step by hand,
and which file a scenario finds."""

from __future__ import annotations

import pytest
from calibrate_support import composed_mape_bound

from calibrate import aic_models
from calibrate import aiconfigurator as aic
from calibrate.roofline_profiles import sync as sync_priors
from simulator.costs.from_config import cost_model_from_config
from simulator.costs.profile import PROFILES_DIR, load_profile, profile_file_name
from simulator.shapes import StepShape
from simulator.specs.hardware import get_hardware
from simulator.specs.models import MODELS

ROOT = aic.find_data_root()
needs_tables = pytest.mark.skipif(ROOT is None, reason=f"needs the aiconfigurator extra: "
                                                       f"{aic.EXTRA_HINT}")
# The A100's TensorRT-LLM attention tables hold head width 128 only: GPT-J's 256 and
# Falcon-180B's 64 are skipped there (and keep the prior), never invented.
SKIPPED = {("a100-80gb", "gpt-j-6b", "bf16", 1), ("a100-80gb", "gpt-j-6b", "bf16", 2),
           ("a100-80gb", "falcon-180b", "bf16", 8)}
DEPLOYMENTS = [d for d in aic_models.deployments() if d not in SKIPPED]
A100, H100 = get_hardware("a100-80gb"), get_hardware("h100-sxm")


def test_the_composed_set() -> None:
    # 5 models x their tps (bf16 on 3 GPUs, fp8 on 2); every model on B200, and at tp 1 on L40S;
    # Llama-3.1-405B where its weights fit 90% of each GPU (below): 105 + 4 + 3; GPT-J-6B
    # (12.1 GB in bf16) at tp 1 and 2 on A100, H100, H200 and B200 (bf16, and fp8 but on the
    # A100: 14) and tp 1 on L40S (2); Falcon-180B (357 GB bf16, 179 GB fp8) at tp 8 in bf16
    # on 80 GB GPUs, from tp 4 on the H200 and B200, fp8 from tp 4 (12); less the 3 skipped
    assert len(DEPLOYMENTS) + len(SKIPPED) == 112 + 16 + 12
    assert SKIPPED <= set(aic_models.deployments())
    big = sorted((hw, dtype, tp) for hw, model, dtype, tp in DEPLOYMENTS
                 if model == "llama-3.1-405b")
    # 405.85B parameters: 811.7 GB in bf16, 405.9 GB in fp8. bf16 at tp 8 is 101.5 GB a GPU:
    # only the H200 (141 GB) and B200 hold it at 90%; fp8 at tp 4 is the same 101.5 GB,
    # at tp 8 50.7 GB (the H100 too); the A100 has no FP8 and no room
    assert big == [("b200", "bf16", 8), ("b200", "fp8", 4), ("b200", "fp8", 8),
                   ("h100-sxm", "fp8", 8), ("h200", "bf16", 8), ("h200", "fp8", 4),
                   ("h200", "fp8", 8)]
    assert ("l40s", "llama-3.1-8b", "fp8", 1) in DEPLOYMENTS
    assert ("l40s", "llama-3.1-70b", "fp8", 2) not in DEPLOYMENTS  # its all-reduce: see the module
    assert ("a100-80gb", "codellama-34b", "bf16", 2) in DEPLOYMENTS  # the peer's deployment
    assert ("a100-80gb", "qwen-72b", "bf16", 1) not in DEPLOYMENTS  # not in its tps
    assert ("a100-80gb", "llama-2-7b", "fp8", 1) not in DEPLOYMENTS  # A100 has no FP8
    # 34B in bf16 is 67.5 GB: it fits one 80 GB GPU at the 90% bound, so tp 1 is composed
    assert MODELS["codellama-34b"].weight_bytes("bf16") <= 0.9 * A100.memory_bytes
    assert ("a100-80gb", "codellama-34b", "bf16", 1) in DEPLOYMENTS


@pytest.mark.parametrize("deployment", DEPLOYMENTS, ids=lambda d: "-".join(map(str, d)))
def test_shipped_files_name_their_source(deployment: tuple[str, str, str, int]) -> None:
    hw, model, dtype, tp = deployment
    p = load_profile(PROFILES_DIR / profile_file_name(hw, model, dtype, tp))
    assert (p.model, p.weight_dtype, p.kv_dtype, p.tp, p.form) == (model, dtype, dtype, tp,
                                                                    aic.FORM)
    assert p.provenance["notes"].startswith(f"python -m calibrate.aic_models: {model} ")
    assert p.provenance["aiconfigurator"]["model"] == {model: aic_models.HF_IDS[model]}
    assert 0 < p.fit["mape"] < composed_mape_bound("trtllm", dtype)  # docs/gpu-profiles.md


def test_roofline_generator_spares_them() -> None:
    assert sync_priors(PROFILES_DIR, check=True, date="x") == []


def test_a_scenario_finds_them_and_a_stack_finds_its_own() -> None:
    _, used = cost_model_from_config({}, MODELS["codellama-34b"], A100, 2, "bf16", "bf16")
    assert used.startswith("a100-80gb__codellama-34b__bf16__tp2.json (measured per operation")
    _, used = cost_model_from_config({}, MODELS["codellama-34b"], A100, 2, "bf16", "bf16",
                                     stack="vllm")
    assert used.startswith("stacks/vllm/a100-80gb__codellama-34b__bf16__tp2.json")
    # vLLM's generation-attention tables hold 1-8 KV heads: Llama-2-7B (32, MHA) at tp 1
    # was skipped there, so a vLLM stack takes the TensorRT-LLM composition.
    assert not (PROFILES_DIR / "stacks" / "vllm" / "h100-sxm__llama-2-7b__bf16__tp1.json"
                ).exists()
    _, used = cost_model_from_config({}, MODELS["llama-2-7b"], H100, 1, "bf16", "bf16",
                                     stack="vllm")
    assert used.startswith("h100-sxm__llama-2-7b__bf16__tp1.json (measured per operation")


@needs_tables
def test_codellama_step_by_hand() -> None:
    system, version = aic.SYSTEMS["h100-sxm"]
    tables = aic.SystemTables(ROOT, system, version)
    model = MODELS["codellama-34b"]
    composer = aic.Composer(tables, model, "bf16", 2)
    ops = composer.step_ops([], [1024] * 4)
    # Norms: 48 layers x (2 bytes x (4 x 8192) x 4 tokens / (0.8 x 3.35 TB/s) + 3 us).
    assert ops["add_norm_1"] == pytest.approx(48 * (2 * 4 * 8192 * 4 / (0.8 * 3.35e12) + 3e-6),
                                              rel=1e-3)
    # The GEMMs at CodeLlama's own shapes on 2 GPUs: qkv n = (32 + 2 x 4) x 128 = 5,120,
    # gate+up n = 2 x 22,016 / 2 = 22,016, down k = 11,008; each priced by the table.
    gemm = tables.gemm("bfloat16")
    assert ops["qkv_gemm"] == pytest.approx(48 * gemm.query(4, 5120, 8192) / 1e3, rel=1e-12)
    assert ops["gate_ffn1_gemm"] == pytest.approx(48 * gemm.query(4, 22016, 8192) / 1e3,
                                                  rel=1e-12)
    assert ops["ffn2_gemm"] == pytest.approx(48 * gemm.query(4, 8192, 11008) / 1e3, rel=1e-12)
    assert ops["allreduce"] == pytest.approx(97 * tables.allreduce(4 * 8192, 2) / 1e3,
                                             rel=1e-12)
    # The shipped fit prices that step within its held-out error of the composed sum.
    p = load_profile(PROFILES_DIR / "h100-sxm__codellama-34b__bf16__tp2.json")
    shape = StepShape(num_decode_seqs=4, decode_context_tokens=4 * 1024)
    assert p.build(model, H100).step_time(shape) == pytest.approx(sum(ops.values()), rel=0.1)


@needs_tables
def test_a_shape_the_tables_lack_is_skipped_and_named() -> None:
    from calibrate.aic_backends import systems

    system, version = systems("vllm")["h100-sxm"]
    tables = aic.SystemTables(ROOT, system, version, "vllm")
    composer = aic.Composer(tables, MODELS["llama-2-7b"], "bf16", 1)
    with pytest.raises(Exception, match="no generation attention for n_kv=32"):
        aic.profile_table(composer)


@needs_tables
def test_head_widths_the_a100_tables_lack_are_skipped() -> None:
    system, version = aic.SYSTEMS["a100-80gb"]
    tables = aic.SystemTables(ROOT, system, version)
    for model, tp in (("gpt-j-6b", 1), ("falcon-180b", 8)):
        with pytest.raises(Exception, match="no context attention for n_kv="):
            aic.profile_table(aic.Composer(tables, MODELS[model], "bf16", tp))
        assert not (PROFILES_DIR / profile_file_name("a100-80gb", model, "bf16", tp)).exists()


@needs_tables
def test_a_parallel_block_has_one_all_reduce_a_layer() -> None:
    import dataclasses

    from simulator.costs.roofline import RooflineCost

    # Falcon-180B: attention and MLP read one LayerNorm's output and are summed, so at tp 8
    # a step runs 1 + 80 all-reduces of tokens x 14,848, not 1 + 2 x 80
    system, version = aic.SYSTEMS["h100-sxm"]
    tables = aic.SystemTables(ROOT, system, version)
    falcon = MODELS["falcon-180b"]
    assert falcon.parallel_block and falcon.layer_allreduces == 80
    ops = aic.Composer(tables, falcon, "fp8", 8).step_ops([], [1024] * 4)
    assert ops["allreduce"] == pytest.approx(81 * tables.allreduce(4 * 14848, 8) / 1e3,
                                             rel=1e-12)
    serial = dataclasses.replace(falcon, parallel_block=False)
    ops2 = aic.Composer(tables, serial, "fp8", 8).step_ops([], [1024] * 4)
    assert ops2["allreduce"] == pytest.approx(161 / 81 * ops["allreduce"], rel=1e-12)
    # the prior counts the same way: L all-reduces a step against 2 L
    shape = StepShape(num_decode_seqs=4, decode_context_tokens=4 * 1024)
    one = RooflineCost(falcon, H100, 8, "fp8").terms(shape).allreduce_s
    two = RooflineCost(serial, H100, 8, "fp8").terms(shape).allreduce_s
    assert two == pytest.approx(2 * one, rel=1e-12) and one > 0
    assert not MODELS["llama-3.1-70b"].parallel_block
