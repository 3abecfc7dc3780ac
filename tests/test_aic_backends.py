"""Per-stack GPU profiles composed from AIConfigurator's vLLM and SGLang tables.

calibrate/aic_backends.py names each backend's tables; calibrate/aiconfigurator.py composes
them (``--backend``) into simulator/profiles/stacks/<backend>/. The shipped stack profiles
and the backend bookkeeping are checked without the tables; composing needs the
``aiconfigurator`` extra (aiconfigurator-core==0.12.0) and is skipped without it.
"""

from __future__ import annotations

import math

import pandas as pd
import pytest
from calibrate_support import composed_mape_bound

from calibrate import aiconfigurator as aic
from calibrate.aic_backends import (
    VERSIONS,
    check_backend,
    fmha_dtype,
    profiles_dir,
    select_lane,
    systems,
)
from simulator.costs import load_profile, profile_file_name
from simulator.costs.profile import PROFILES_DIR
from simulator.errors import ConfigError
from simulator.shapes import StepShape
from simulator.specs import get_hardware, get_model

ROOT = aic.find_data_root()
needs_tables = pytest.mark.skipif(
    ROOT is None, reason=f"needs the aiconfigurator extra: {aic.EXTRA_HINT}")
STACKS = ("vllm", "sglang")
SHIPPED = [(b, *d) for b in STACKS for d in aic.deployments()]


def test_backend_names_its_versions_and_folders() -> None:
    assert systems("trtllm") == aic.SYSTEMS  # the generic profiles' tables, unchanged
    assert systems("vllm")["h100-sxm"] == ("h100_sxm", "0.24.0")
    assert systems("sglang")["a100-80gb"] == ("a100_sxm", "0.5.10")
    assert profiles_dir("trtllm") == PROFILES_DIR
    assert profiles_dir("vllm") == PROFILES_DIR / "stacks" / "vllm"
    with pytest.raises(ConfigError, match="backend='tgi'"):
        check_backend("tgi")
    assert fmha_dtype("vllm", "fp8") == "bfloat16"  # vLLM's FA3 tables: bf16 FMHA only
    assert fmha_dtype("sglang", "fp8") == "fp8" and fmha_dtype("trtllm", "fp8") == "fp8"


def test_lane_selection_on_a_small_table() -> None:
    attn = pd.DataFrame({"kernel_source": ["fa3", "triton", "fa3"], "latency": [1.0, 2.0, 3.0]})
    assert list(select_lane(attn, "sglang", 90, "attention")["latency"]) == [1.0, 3.0]
    assert len(select_lane(attn, "vllm", 90, "attention")) == 3  # no default: the slice picks
    comm = pd.DataFrame({"kernel_source": ["vLLM_custom_eager", "vLLM_custom_graph"],
                         "latency": [0.0206, 0.0043]})
    assert list(select_lane(comm, "vllm", 90, "comm")["latency"]) == [0.0043]  # CUDA graph
    one = pd.DataFrame({"kernel_source": ["torch_flow"], "latency": [5.0]})
    assert select_lane(one, "trtllm", 90, "attention") is one


@pytest.mark.parametrize("shipped", SHIPPED, ids=lambda d: "-".join(map(str, d)))
def test_shipped_stack_profiles_name_their_backend(shipped) -> None:
    backend, hw, model, dtype, tp = shipped
    path = profiles_dir(backend) / profile_file_name(hw, model, dtype, tp)
    p = load_profile(path)
    system, version = systems(backend)[hw]
    meta = p.provenance["aiconfigurator"]
    assert (meta["backend"], meta["backend_version"]) == (backend, version)
    assert f"system {system}, backend {backend} {version}" in p.provenance["source"]
    assert all(f"data/{system}/" in t and f"/{backend}/{version}/" in t for t in meta["tables"])
    assert meta["query_slot"].startswith("current") and "composition" in meta
    assert (p.form, p.weight_dtype, p.kv_dtype, p.tp) == (aic.FORM, dtype, dtype, tp)
    assert 0 < p.fit["mape"] < composed_mape_bound(backend, dtype) and p.fit["n_points"] >= 60
    cost = p.build(get_model(model), get_hardware(hw))
    step = cost.step_time(StepShape(num_decode_seqs=8, decode_context_tokens=8 * 1024))
    assert math.isfinite(step) and step > 0


@needs_tables
def test_versions_are_aiconfigurators_current_slots() -> None:
    import yaml

    slots = yaml.safe_load((ROOT / "query_versions.yaml").read_text())
    for backend, by_gpu in VERSIONS.items():
        for system, version in by_gpu.values():
            slot = slots["overrides"].get(system, {}).get(backend, slots["defaults"][backend])
            assert slot["current"] == version, (backend, system)


@needs_tables
def test_backend_selects_its_table_folder() -> None:
    t = aic.SystemTables(ROOT, "h100_sxm", "0.24.0", "vllm")
    assert t.table("gemm", "gemm_perf.parquet") == (
        ROOT / "data" / "h100_sxm" / "gemm" / "vllm" / "0.24.0" / "gemm_perf.parquet")
    assert all("/vllm/0.24.0/" in f for f in t.table_files())
    assert aic.SystemTables(ROOT, "h100_sxm", "1.3.0rc20").backend == "trtllm"
    with pytest.raises(ConfigError, match="table not found"):
        aic.SystemTables(ROOT, "h100_sxm", "1.3.0rc20", "vllm")  # a trtllm version


@needs_tables
def test_a_vllm_decode_step_is_the_sum_of_its_ops_by_hand() -> None:
    tables = aic.SystemTables(ROOT, *systems("vllm")["h100-sxm"], "vllm")
    composer = aic.Composer(tables, get_model("llama-3.1-8b"), "bf16", 1)
    ops = composer.step_ops([], [1024] * 4)  # one decode step, 4 rows at 1,024 tokens
    assert composer.step_time([], [1024] * 4) == pytest.approx(sum(ops.values()), rel=1e-12)
    # Norms: 32 layers x (2 bytes x 16,384 x 4 tokens / (0.8 x 3.35 TB/s) + 3 us).
    assert ops["add_norm_1"] == pytest.approx(32 * (2 * 16384 * 4 / (0.8 * 3.35e12) + 3e-6))
    # qkv (m=4, n=6,144, k=4,096) is a collected shape: 32 x vLLM's measured time.
    raw = pd.read_parquet(tables.table("gemm", "gemm_perf.parquet"))
    row = raw[(raw.gemm_dtype == "bfloat16") & (raw.m == 4) & (raw.n == 6144) & (raw.k == 4096)]
    assert ops["qkv_gemm"] == pytest.approx(32 * row["latency"].iloc[0] / 1e3, rel=1e-12)
    trt = aic.SystemTables(ROOT, *aic.SYSTEMS["h100-sxm"]).gemm("bfloat16").query(4, 6144, 4096)
    assert ops["qkv_gemm"] != pytest.approx(32 * trt / 1e3, rel=1e-3)  # not trtllm's kernel


@needs_tables
def test_an_sglang_all_reduce_is_the_cuda_graph_row() -> None:
    tables = aic.SystemTables(ROOT, *systems("sglang")["h100-sxm"], "sglang")
    ops = aic.Composer(tables, get_model("llama-3.1-70b"), "bf16", 2).step_ops([], [1024] * 4)
    raw = pd.read_parquet(tables.table("comm", "custom_allreduce_perf.parquet"))
    rows = raw[(raw.num_gpus == 2) & (raw.message_size == 4 * 8192)]  # 4 tokens x h
    graph = rows[rows.kernel_source == "SGLang_CustomAllReduce_graph"]["latency"].iloc[0]
    assert ops["allreduce"] == pytest.approx(161 * graph / 1e3, rel=1e-12)  # 1 + 2 x 80


@needs_tables
@pytest.mark.parametrize("backend, deployment", [
    ("vllm", ("h200", "llama-3.1-8b", "fp8", 1)),
    ("sglang", ("a100-80gb", "llama-3.1-70b", "bf16", 4)),
], ids=lambda v: v if isinstance(v, str) else "-".join(map(str, v)))
def test_matches_aiconfigurators_own_engine(backend, deployment) -> None:
    """Our reading of the tables reproduces AIConfigurator's run_static for the backend."""
    from aiconfigurator_core.sdk import common, config
    from aiconfigurator_core.sdk.backends.factory import get_backend
    from aiconfigurator_core.sdk.models import get_model as aic_model
    from aiconfigurator_core.sdk.perf_database import get_database

    hw, model, dtype, tp = deployment
    system, version = systems(backend)[hw]
    quant = {"bf16": "bfloat16", "fp8": "fp8"}[dtype]
    mc = config.ModelConfig(tp_size=tp, gemm_quant_mode=common.GEMMQuantMode[quant],
                            kvcache_quant_mode=common.KVCacheQuantMode[quant],
                            fmha_quant_mode=common.FMHAQuantMode[fmha_dtype(backend, quant)])
    engine, m = get_backend(backend), aic_model(aic.MODEL_IDS[model], mc, backend)
    db = get_database(system, backend, version)
    ours = aic.Composer(aic.SystemTables(ROOT, system, version, backend), get_model(model),
                        dtype, tp)
    for b, isl in [(1, 128), (4, 1024), (2, 8192)]:
        rc = config.RuntimeConfig(batch_size=b, beam_width=1, isl=isl, osl=2)
        ctx = engine.run_static(m, db, rc, mode="static_ctx").get_context_latency_dict()
        gen = engine.run_static(m, db, rc, mode="static_gen").get_generation_latency_dict()
        assert ours.step_time([(isl, 0)] * b) * 1e3 == pytest.approx(sum(ctx.values()), rel=1e-9)
        assert ours.step_time([], [isl + 1] * b) * 1e3 == pytest.approx(sum(gen.values()),
                                                                         rel=1e-9)


@needs_tables
@pytest.mark.parametrize("backend", STACKS)
def test_check_finds_the_shipped_stack_set_current(backend) -> None:
    changes, fitted = aic.sync(ROOT, profiles_dir(backend), check=True, date="x",
                               backend=backend)
    assert changes == [] and len(fitted) == 27
