"""Mixtral-8x7B and -8x22B composed from AIConfigurator's dense and MoE tables
(calibrate/aic_moe.py): which deployments, what the shipped files say, a step op by op by
hand, and which file a scenario finds."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from calibrate import aic_moe
from calibrate import aiconfigurator as aic
from calibrate.aic_backends import systems
from simulator.costs.from_config import cost_model_from_config
from simulator.costs.profile import PROFILES_DIR, load_profile, profile_file_name
from simulator.errors import ConfigError
from simulator.shapes import StepShape
from simulator.specs.hardware import get_hardware
from simulator.specs.models import MODELS

ROOT = aic.find_data_root()
needs_tables = pytest.mark.skipif(ROOT is None, reason=f"needs the aiconfigurator extra: "
                                                       f"{aic.EXTRA_HINT}")
MIX = "mixtral-8x7b"
MIXTRAL = MODELS[MIX]
H100 = get_hardware("h100-sxm")
# (backend, hardware, dtype, tp) of the shipped files: the deployments whose MoE rows each
# backend's tables hold (per-tensor fp8: TensorRT-LLM's and vLLM's; A100 in TensorRT-LLM's
# and vLLM's with power-law routing only, made balanced by H100's measured ratio)
SHIPPED = [(b, hw, model, dtype, tp) for b in ("trtllm", "vllm", "sglang")
           for hw, model, dtype, tp in aic_moe.deployments(b)
           if not (dtype == "fp8" and b == "sglang")]
MAPE_BOUND = {"trtllm": 0.12, "vllm": 0.18, "sglang": 0.10}  # docs/gpu-profiles.md lists each
# (trtllm: A100 TP 8, composed from power-law rows made balanced, fits at 11.0%)


def test_the_deployments() -> None:
    every = list(aic_moe.deployments("trtllm"))
    d = [(hw, dtype, tp) for hw, model, dtype, tp in every if model == "mixtral-8x7b"]
    # 93.4 GB of bf16 weights: tp >= 2 on 80 GB GPUs, tp 1 on the H200 (141 GB x 0.9)
    assert MIXTRAL.weight_bytes("bf16") == pytest.approx(2 * 46.7e9, rel=0.01)
    assert ("a100-80gb", "bf16", 1) not in d and ("a100-80gb", "bf16", 2) in d
    assert ("h100-sxm", "bf16", 1) not in d and ("h200", "bf16", 1) in d
    assert ("h100-sxm", "fp8", 1) in d and ("a100-80gb", "fp8", 2) not in d  # A100: no FP8
    assert len(d) == 3 + 3 + 4 + 4 + 4  # a100 bf16, h100 bf16, h100 fp8, h200 bf16, fp8
    # Mixtral-8x22B: 281 GB in bf16, 141 GB in fp8: bf16 at tp 4 and 8 on 80 GB GPUs
    # (70.3 GB <= 72) and on the H200 (tp 2: 141 > 127); fp8 from tp 2 (70.3 GB)
    big = [(hw, dtype, tp) for hw, model, dtype, tp in every if model == "mixtral-8x22b"]
    assert MODELS["mixtral-8x22b"].weight_bytes("bf16") == pytest.approx(2 * 140.6e9, rel=0.01)
    assert sorted(big) == [("a100-80gb", "bf16", 4), ("a100-80gb", "bf16", 8),
                           ("h100-sxm", "bf16", 4), ("h100-sxm", "bf16", 8),
                           ("h100-sxm", "fp8", 2), ("h100-sxm", "fp8", 4), ("h100-sxm", "fp8", 8),
                           ("h200", "bf16", 4), ("h200", "bf16", 8), ("h200", "fp8", 2),
                           ("h200", "fp8", 4), ("h200", "fp8", 8)]
    assert len(SHIPPED) == (18 + 12) + (18 + 12) + (10 + 6)


@pytest.mark.parametrize("shipped", SHIPPED, ids=lambda d: "-".join(map(str, d)))
def test_shipped_files_name_their_source(shipped: tuple[str, str, str, str, int]) -> None:
    backend, hw, model, dtype, tp = shipped
    folder = PROFILES_DIR if backend == "trtllm" else PROFILES_DIR / "stacks" / backend
    p = load_profile(folder / profile_file_name(hw, model, dtype, tp))
    assert (p.model, p.weight_dtype, p.kv_dtype, p.tp, p.form) == (model, dtype, dtype, tp,
                                                                    aic.FORM)
    assert p.provenance["notes"].startswith(f"python -m calibrate.aic_moe: {model} ")
    assert p.provenance["aiconfigurator"]["model"] == {model: aic_moe.HF_IDS[model]}
    system, version = systems(backend)[hw]
    table = f"data/{system}/moe/{backend}/{version}/moe_perf.parquet"
    assert p.provenance["aiconfigurator"]["moe_table"] == table
    assert table in p.provenance["notes"]
    assert 0 < p.fit["mape"] < MAPE_BOUND[backend]


def test_a_scenario_finds_them() -> None:
    _, used = cost_model_from_config({}, MIXTRAL, H100, 2, "bf16", "bf16")
    assert used.startswith("h100-sxm__mixtral-8x7b__bf16__tp2.json (measured per operation")
    _, used = cost_model_from_config({}, MIXTRAL, H100, 2, "fp8", "fp8", stack="vllm")
    assert used.startswith("stacks/vllm/h100-sxm__mixtral-8x7b__fp8__tp2.json")


@needs_tables
def test_a_step_by_hand() -> None:
    assert ROOT is not None
    system, version = systems("trtllm")["h100-sxm"]
    tables = aic.SystemTables(ROOT, system, version)
    curve = aic_moe.moe_curve(ROOT, system, version, "trtllm", "bf16", 2, MIX)
    assert curve is not None
    moe = aic_moe.MoeComposer(tables, MIXTRAL, "bf16", 2, moe=curve)
    dense = aic.Composer(tables, MIXTRAL, "bf16", 2)
    # 3 decode rows: 3 tokens, between the table's collected 2 and 4
    ops, llama = moe.step_ops([], [1024] * 3), dense.step_ops([], [1024] * 3)
    d = pd.read_parquet(ROOT / curve.table)
    rows = d[(d.hidden_size == 4096) & (d.inter_size == 14336) & (d.num_experts == 8)
             & (d.topk == 2) & (d.moe_tp_size == 2) & (d.moe_ep_size == 1)
             & (d.moe_dtype == "bfloat16") & (d.distribution == "balanced")]
    ms = rows.set_index("num_tokens").latency
    assert 3 not in ms.index
    assert ops["moe"] == pytest.approx(32 * (ms[2] + ms[4]) / 2 / 1e3, rel=1e-12)
    # every other op is the Llama composer's at Mixtral's shapes; the dense MLP is gone
    assert set(llama) - set(ops) == set(aic_moe.MLP_OPS)
    for name, seconds in ops.items():
        if name != "moe":
            assert seconds == llama[name], name
    # a prefill past the table's 16,384 tokens is refused, not extrapolated
    with pytest.raises(ConfigError, match="16385 tokens is outside"):
        curve.query(16385)
    # the shipped fit prices a 3-row decode within 15% of the composed sum
    p = load_profile(PROFILES_DIR / "h100-sxm__mixtral-8x7b__bf16__tp2.json")
    shape = StepShape(num_decode_seqs=3, decode_context_tokens=3 * 1024)
    assert p.build(MIXTRAL, H100).step_time(shape) == pytest.approx(sum(ops.values()),
                                                                    rel=0.15)


@needs_tables
def test_missing_moe_rows_are_refused_not_invented() -> None:
    assert ROOT is not None
    system, version = systems("sglang")["h100-sxm"]  # SGLang: fp8_block rows only
    assert aic_moe.moe_curve(ROOT, system, version, "sglang", "fp8", 2, MIX) is None
    assert not (PROFILES_DIR / "stacks/sglang/h100-sxm__mixtral-8x7b__fp8__tp2.json").exists()


@needs_tables
def test_power_law_only_tables_are_made_balanced_by_the_h100_ratio() -> None:
    assert ROOT is not None
    system, version = systems("trtllm")["a100-80gb"]
    curve = aic_moe.moe_curve(ROOT, system, version, "trtllm", "bf16", 2, MIX)
    assert curve is not None and "power_law_1.01" in curve.derived
    own = _mixtral(ROOT / curve.table, 2, "power_law_1.01")
    h100 = ROOT / aic_moe.moe_table(ROOT, *systems("trtllm")["h100-sxm"], "trtllm")
    bal, skew = (_mixtral(h100, 2, d) for d in ("balanced", "power_law_1.01"))
    # 1,024 tokens: the running median of the capped ratio at 512-2,048 tokens
    ratio = [min(1.0, bal[n] / skew[n]) for n in (512, 768, 1024, 1536, 2048)]
    assert sorted(ratio)[2] < 0.9  # skew costs at a thousand tokens
    assert curve.query(1024) == pytest.approx(own[1024] * sorted(ratio)[2], rel=1e-12)
    assert curve.query(1) == pytest.approx(own[1], rel=0.02)  # one token: no skew to undo
    # it agrees with SGLang's A100 table, which collected balanced routing itself
    sglang = aic_moe.moe_curve(ROOT, *systems("sglang")["a100-80gb"], "sglang", "bf16", 2, MIX)
    assert sglang is not None and sglang.derived == ""
    assert curve.query(1024) == pytest.approx(sglang.query(1024), rel=0.1)
    p = load_profile(PROFILES_DIR / "a100-80gb__mixtral-8x7b__bf16__tp2.json")
    assert p.provenance["aiconfigurator"]["moe_routing"] == curve.derived


def _mixtral(path: object, tp: int, distribution: str) -> pd.Series:
    """Median ms by token count of Mixtral's bf16 rows at ``tp`` in one MoE table."""
    d = pd.read_parquet(path)
    rows = d[(d.hidden_size == 4096) & (d.inter_size == 14336) & (d.num_experts == 8)
             & (d.topk == 2) & (d.moe_tp_size == tp) & (d.moe_ep_size == 1)
             & (d.moe_dtype == "bfloat16") & (d.distribution == distribution)]
    kernel = sorted(rows.kernel_source.unique())[0]
    return rows[rows.kernel_source == kernel].groupby("num_tokens").latency.median()


def _table(path: Path, rows: list[tuple[str, int, float]], kernel: str = "k") -> None:
    """A MoE table of Mixtral bf16 rows at tp 2: (distribution, tokens, ms) each."""
    path.parent.mkdir(parents=True, exist_ok=True)
    pd.DataFrame([{"kernel_source": kernel, "moe_dtype": "bfloat16", "num_tokens": n,
                   "hidden_size": 4096, "inter_size": 14336, "topk": 2, "num_experts": 8,
                   "moe_tp_size": 2, "moe_ep_size": 1, "distribution": dist, "latency": ms}
                  for dist, n, ms in rows]).to_parquet(path)


def test_balanced_from_power_law_by_hand(tmp_path: Path) -> None:
    a100 = aic_moe.moe_table(tmp_path, *systems("trtllm")["a100-80gb"], "trtllm")
    h100 = aic_moe.moe_table(tmp_path, *systems("trtllm")["h100-sxm"], "trtllm")
    # A100: power-law rows only (1.2 as well, which is not read while 1.01 has rows)
    _table(a100, [("power_law_1.01", n, ms) for n, ms in [(1, 1.0), (100, 2.0), (1000, 10.0)]]
           + [("power_law_1.2", 100, 9.9)])
    # H100: balanced / power_law_1.01 = 1.2 (capped to 1), 0.9, 0.5 (a one-count dip), 0.8,
    # 0.8 at 1, 10, 100, 1,000, 10,000 tokens
    ratios = {1: 1.2, 10: 0.9, 100: 0.5, 1000: 0.8, 10000: 0.8}
    _table(h100, [(d, n, 4.0 * (r if d == "balanced" else 1.0)) for n, r in ratios.items()
                  for d in ("balanced", "power_law_1.01")])
    curve = aic_moe.moe_curve(tmp_path, *systems("trtllm")["a100-80gb"], "trtllm", "bf16", 2, MIX)
    assert curve is not None and curve.derived.startswith("balanced routing = its "
                                                          "power_law_1.01 rows")
    # capped: 1.0, 0.9, 0.5, 0.8, 0.8; running median of 5 (centred, ends shortened):
    # 1: median(1.0, 0.9, 0.5) = 0.9; 100: median of all five = 0.8; 1,000: median(0.9, 0.5,
    # 0.8, 0.8) = 0.8
    assert curve.query(1) == pytest.approx(1.0 * 0.9)
    assert curve.query(100) == pytest.approx(2.0 * 0.8)
    assert curve.query(1000) == pytest.approx(10.0 * 0.8)
    assert "x0.80-0.90" in curve.derived
    # no power-law rows in the reference: refused, not invented
    _table(h100, [("balanced", n, 1.0) for n in ratios])
    assert aic_moe.moe_curve(tmp_path, *systems("trtllm")["a100-80gb"], "trtllm", "bf16",
                             2, MIX) is None


def test_a_reference_tp_that_fails_the_one_token_check_is_passed_over(tmp_path: Path) -> None:
    a100 = aic_moe.moe_table(tmp_path, *systems("trtllm")["a100-80gb"], "trtllm")
    h100 = aic_moe.moe_table(tmp_path, *systems("trtllm")["h100-sxm"], "trtllm")
    _table(a100, [("power_law_1.01", n, ms) for n, ms in [(1, 1.0), (1000, 10.0)]])
    # H100 at tp 2: power law 4x balanced at one token (where routing cannot matter): not
    # comparable; at tp 1 and 4 (equally near tp 2 in log2; the lower first): ratio 1.0 at
    # one token, 0.5 at 1,000 (tp 1) or 0.7 (tp 4)
    rows = [("balanced", 1, 1.0), ("power_law_1.01", 1, 4.0), ("balanced", 1000, 1.0),
            ("power_law_1.01", 1000, 4.0)]
    _table(h100, rows)
    assert aic_moe.moe_curve(tmp_path, *systems("trtllm")["a100-80gb"], "trtllm", "bf16",
                             2, MIX) is None  # only tp 2 in the reference, and it fails
    frame = pd.read_parquet(h100)
    extra = [{**frame.iloc[0].to_dict(), "moe_tp_size": t, "distribution": d,
              "num_tokens": n, "latency": ms}
             for t, r in ((1, 0.5), (4, 0.7))
             for d, n, ms in (("balanced", 1, 2.0), ("power_law_1.01", 1, 2.0),
                              ("balanced", 1000, 2.0 * r), ("power_law_1.01", 1000, 2.0))]
    pd.concat([frame, pd.DataFrame(extra)]).to_parquet(h100)
    curve = aic_moe.moe_curve(tmp_path, *systems("trtllm")["a100-80gb"], "trtllm", "bf16", 2, MIX)
    assert curve is not None
    assert "at tp 1 (its tp 2 rows fail the one-token check)" in curve.derived
    # two counts: the running median of (1.0, 0.5) is their mean at both ends
    assert curve.query(1) == pytest.approx(1.0 * 0.75)
    assert curve.query(1000) == pytest.approx(10.0 * 0.75)


def test_shipped_a100_8x22b_tp8_reads_the_h100_ratio_at_tp4() -> None:
    # H100's trtllm tp 8 power-law rows for Mixtral-8x22B read 3.8x its balanced ones at a
    # single token: derived through them, the A100 layer came out faster than the H100's
    p = load_profile(PROFILES_DIR / "a100-80gb__mixtral-8x22b__bf16__tp8.json")
    routing = p.provenance["aiconfigurator"]["moe_routing"]
    assert "at tp 4 (its tp 8 rows fail the one-token check)" in routing


def test_a_skip_says_whether_rows_or_a_reference_were_missing(tmp_path: Path) -> None:
    a100 = aic_moe.moe_table(tmp_path, *systems("trtllm")["a100-80gb"], "trtllm")
    h100 = aic_moe.moe_table(tmp_path, *systems("trtllm")["h100-sxm"], "trtllm")
    _table(a100, [("power_law_1.01", n, ms) for n, ms in [(1, 1.0), (1000, 10.0)]])
    # the H100 reference fails the one-token check (4x at one token) at its only tp
    _table(h100, [("balanced", 1, 1.0), ("power_law_1.01", 1, 4.0), ("balanced", 1000, 1.0),
                  ("power_law_1.01", 1000, 4.0)])
    assert aic_moe.moe_curve(tmp_path, *systems("trtllm")["a100-80gb"], "trtllm", "bf16",
                             2, MIX) is None
    where = (*systems("trtllm")["a100-80gb"], "trtllm", "bf16")
    why = aic_moe.skip_reason(tmp_path, *where, 2, MIX)
    assert "holds only power-law rows" in why and "no comparable" in why
    # no rows at tp 4 at all: said so
    assert aic_moe.skip_reason(tmp_path, *where, 4, MIX).startswith(
        "no bfloat16 moe_tp 4 rows for mixtral-8x7b")


@needs_tables
def test_a_model_left_out_is_composed_on_request_and_nothing_written(tmp_path: Path) -> None:
    # Qwen3-235B-A22B: not in MOE_MODELS because its decode fits the piecewise form poorly
    # (128 experts, 8 a token: a step's expert reads grow with the batch until all are read)
    assert "qwen3-235b-a22b" in aic_moe.HF_IDS and "qwen3-235b-a22b" not in aic_moe.MOE_MODELS
    assert ROOT is not None
    fitted, _ = aic_moe.compose_and_fit(ROOT, "x", "trtllm", models=("qwen3-235b-a22b",))
    decode = {p.hardware + f" {p.weight_dtype} tp{p.tp}": r.by_phase["decode"]["mape"]
              for p, r in fitted}
    assert decode["h200 bf16 tp4"] > 0.25  # docs/gpu-profiles.md: 27%
    assert min(decode.values()) > 0.15  # every deployment's decode misses by 17% or more
    assert aic_moe.main(["--model", "qwen3-235b-a22b", "--check", "--out", str(tmp_path)]) == 1
    assert not list(tmp_path.iterdir())  # --check writes nothing


@needs_tables
def test_the_reference_ratios_a_script_prints() -> None:
    import importlib
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    check = importlib.import_module("benchmarks.moe_table_check")
    assert ROOT is not None
    lines = check.reference(ROOT, "trtllm", "mixtral-8x22b")
    tp8 = next(line for line in lines if "tp  8 power_law_1.01" in line)
    assert "1 tokens 0.26 (0.079 / 0.302 ms)" in tp8  # docs/gpu-profiles.md: 3.8x
    tp4 = next(line for line in lines if "tp  4 power_law_1.01" in line)
    assert "1 tokens 0.97" in tp4  # inside ONE_TOKEN_BAND
