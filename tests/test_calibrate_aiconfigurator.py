"""Cost profiles composed from AIConfigurator's per-op tables (calibrate/aiconfigurator.py).

The shipped profiles are checked without the tables; composing needs the ``aiconfigurator``
extra (aiconfigurator-core==0.12.0, which holds NVIDIA's measured tables) and is skipped
without it. Cross-checking against AIConfigurator's own engine needs the full
``aiconfigurator`` package as well and is skipped without it.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
from calibrate_support import composed_mape_bound

from calibrate import aiconfigurator as aic
from calibrate.roofline_profiles import sync as sync_priors
from simulator.costs import find_shipped_profile, load_profile, profile_file_name
from simulator.costs.profile import PROFILES_DIR
from simulator.shapes import StepShape
from simulator.specs import get_hardware, get_model

ROOT = aic.find_data_root()
needs_tables = pytest.mark.skipif(
    ROOT is None, reason=f"needs the aiconfigurator extra: {aic.EXTRA_HINT}")
DEPLOYMENTS = list(aic.deployments())


def shipped(hw: str, model: str, dtype: str, tp: int):
    return load_profile(PROFILES_DIR / profile_file_name(hw, model, dtype, tp))


def test_the_composed_set() -> None:
    assert len(DEPLOYMENTS) == 27  # 8B at tp 1 and 2, 70B where it fits
    assert ("a100-80gb", "llama-3.1-8b", "fp8", 1) not in DEPLOYMENTS  # A100 has no FP8
    assert ("h100-sxm", "llama-3.1-70b", "bf16", 1) not in DEPLOYMENTS  # 141 GB of weights
    assert ("h200", "llama-3.1-70b", "fp8", 1) in DEPLOYMENTS


@pytest.mark.parametrize("deployment", DEPLOYMENTS, ids=lambda d: "-".join(map(str, d)))
def test_shipped_composed_profiles_replace_the_priors(deployment) -> None:
    hw, model, dtype, tp = deployment
    p = shipped(*deployment)
    assert (p.form, p.weight_dtype, p.kv_dtype) == (aic.FORM, dtype, dtype)
    source = p.provenance["source"]
    assert source.startswith("measured") and f"AIConfigurator {aic.AIC_VERSION}" in source
    system, data_version = aic.SYSTEMS[hw]
    meta = p.provenance["aiconfigurator"]
    assert system in meta["system_file"]
    assert meta["backend"] == "trtllm" and meta["backend_version"] == data_version
    assert 0 < p.fit["mape"] < composed_mape_bound("trtllm", dtype) and p.fit["n_points"] >= 60
    per_request = ("request_s", "admit_s", "finish_s")  # GPU kernel time only: no CPU cost
    assert all(v == 0.0 for k, v in p.coefficients.items() if k in per_request)
    assert find_shipped_profile(model, hw, dtype, tp) == PROFILES_DIR / profile_file_name(
        hw, model, dtype, tp)
    cost = p.build(get_model(model), get_hardware(hw))
    decode = StepShape(num_decode_seqs=8, decode_context_tokens=8 * 1024)
    assert math.isfinite(cost.step_time(decode)) and cost.step_time(decode) > 0


def test_roofline_generator_spares_the_composed_profiles() -> None:
    assert sync_priors(PROFILES_DIR, check=True, date="x") == []


def test_no_tables_is_a_clear_error(tmp_path: Path, capsys) -> None:
    assert aic.main(["--data", str(tmp_path), "--out", str(tmp_path)]) == 2
    assert "pip install -e '.[aiconfigurator]'" in capsys.readouterr().err


@needs_tables
def test_a_step_is_the_sum_of_its_ops_by_hand() -> None:
    tables = aic.SystemTables(ROOT, *aic.SYSTEMS["h100-sxm"])
    composer = aic.Composer(tables, get_model("llama-3.1-8b"), "bf16", 1)
    ops = composer.step_ops([], [1024] * 4)  # one decode step, 4 rows at 1,024 tokens
    assert composer.step_time([], [1024] * 4) == pytest.approx(sum(ops.values()), rel=1e-12)
    assert "allreduce" not in ops  # tp 1
    # Norms: 32 layers x (2 bytes x (4096 + 4096 + 4096 + 4096) x 4 tokens / (0.8 x 3.35 TB/s)
    # + 3 us), the system file's empirical memory-op formula.
    norm = 32 * (2 * 16384 * 4 / (0.8 * 3.35e12) + 3e-6)
    assert ops["add_norm_1"] == pytest.approx(norm, rel=1e-12)
    # The qkv GEMM (m=4, n=4096 + 2 x 1024, k=4096) is a collected shape: exactly the
    # measured kernel time x 32 layers.
    gemm = tables.gemm("bfloat16")
    ms, lat = gemm.sites[(6144, 4096)]
    assert 4.0 in ms
    assert ops["qkv_gemm"] == pytest.approx(32 * lat[list(ms).index(4.0)] / 1e3, rel=1e-12)
    # Everything positive, attention by table, no context attention in a decode step.
    assert ops["context_attention"] == 0 and ops["generation_attention"] > 0
    assert all(v >= 0 for v in ops.values())
    tp2 = aic.Composer(tables, get_model("llama-3.1-70b"), "bf16", 2).step_ops([(512, 0)])
    assert tp2["allreduce"] == pytest.approx(161 * tables.allreduce(512 * 8192, 2) / 1e3)


@needs_tables
def test_interpolation_between_and_beyond_collected_shapes() -> None:
    tables = aic.SystemTables(ROOT, *aic.SYSTEMS["h100-sxm"])
    gemm = tables.gemm("bfloat16")
    # 28,672 = 2 x 14,336 is not a collected n: between its neighbours' times.
    lo, mid, hi = (gemm.query(256, n, 4096) for n in (16384, 28672, 51200))
    assert lo < mid < hi
    # Beyond the largest collected m, utilisation is held: time grows ~linearly.
    big = max(gemm.sites[(4096, 4096)][0])
    assert gemm.query(4 * big, 4096, 4096) == pytest.approx(
        4 * gemm.query(big, 4096, 4096), rel=0.15)
    # Context attention is monotone in length, prefix-corrected for a cached prefix.
    a = [tables.context_attention(1, s, 32, 8, 128, "bfloat16", "bfloat16")
         for s in (1000, 2000, 4000)]
    assert a[0] < a[1] < a[2]


@needs_tables
@pytest.mark.parametrize("deployment", [("h100-sxm", "llama-3.1-8b", "bf16", 1),
                                        ("a100-80gb", "llama-3.1-70b", "bf16", 4),
                                        ("h200", "llama-3.1-70b", "fp8", 8)],
                         ids=lambda d: "-".join(map(str, d)))
def test_shipped_profile_prices_the_composition_within_its_stated_error(deployment) -> None:
    hw, model, dtype, tp = deployment
    tables = aic.SystemTables(ROOT, *aic.SYSTEMS[hw])
    composer = aic.Composer(tables, get_model(model), dtype, tp)
    table = aic.profile_table(composer)
    profile = shipped(*deployment)
    cost = profile.build(get_model(model), get_hardware(hw))
    predicted = cost.step_times(table.shapes())
    ape = np.abs(predicted / table.steps["time_s"].to_numpy() - 1)
    assert len(ape) == profile.fit["n_points"]
    assert ape.mean() == pytest.approx(profile.fit["insample_mape"], abs=1e-4)
    assert ape.max() <= profile.fit["max_ape"] + 1e-9
    # A known shape: 8 decode rows at 2,048 tokens, composed vs priced.
    composed = composer.step_time([], [2048] * 8)
    priced = cost.step_time(StepShape(num_decode_seqs=8, decode_context_tokens=8 * 2048))
    assert abs(priced / composed - 1) <= profile.fit["max_ape"]


@needs_tables
def test_check_finds_the_shipped_set_current() -> None:
    changes, fitted = aic.sync(ROOT, PROFILES_DIR, check=True, date="x")
    assert changes == [] and len(fitted) == 27


@needs_tables
def test_matches_aiconfigurators_own_engine() -> None:
    """Our reading of the tables reproduces AIConfigurator's run_static per step."""
    pytest.importorskip("aiconfigurator", reason="needs the full aiconfigurator package")
    from aiconfigurator.sdk import common, config
    from aiconfigurator.sdk.backends.factory import get_backend
    from aiconfigurator.sdk.models import get_model as aic_model
    from aiconfigurator.sdk.perf_database import get_database

    backend = get_backend("trtllm")
    for hw, model, dtype, tp in [("h100-sxm", "llama-3.1-8b", "fp8", 1),
                                 ("a100-80gb", "llama-3.1-70b", "bf16", 4)]:
        system, data_version = aic.SYSTEMS[hw]
        quant = {"bf16": "bfloat16", "fp8": "fp8"}[dtype]
        mc = config.ModelConfig(tp_size=tp, gemm_quant_mode=common.GEMMQuantMode[quant],
                                kvcache_quant_mode=common.KVCacheQuantMode[quant],
                                fmha_quant_mode=common.FMHAQuantMode[quant])
        m = aic_model(aic.MODEL_IDS[model], mc, "trtllm")
        db = get_database(system, "trtllm", data_version)
        ours = aic.Composer(aic.SystemTables(ROOT, system, data_version), get_model(model),
                            dtype, tp)
        for b, isl in [(1, 128), (4, 1024), (2, 8192)]:
            rc = config.RuntimeConfig(batch_size=b, beam_width=1, isl=isl, osl=2)
            ctx = backend.run_static(m, db, rc, mode="static_ctx").get_context_latency_dict()
            gen = backend.run_static(m, db, rc, mode="static_gen").get_generation_latency_dict()
            assert ours.step_time([(isl, 0)] * b) * 1e3 == pytest.approx(
                sum(ctx.values()), rel=1e-9)
            assert ours.step_time([], [isl + 1] * b) * 1e3 == pytest.approx(
                sum(gen.values()), rel=1e-9)
