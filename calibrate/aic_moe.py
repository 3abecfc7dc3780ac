"""Mixtral-8x7B and -8x22B profiles composed from AIConfigurator's dense and MoE tables.

    python -m calibrate.aic_moe [--backend trtllm|vllm|sglang] [--check] [--data DIR]
                                [--out DIR] [--model NAME]

(``--model``: that MoE model only, one of ``HF_IDS``, shipped or not; with ``--check``
nothing is written.)

Mixtral's attention, norms, logits and TP all-reduce are Llama's, so
calibrate/aiconfigurator.py's ``Composer`` prices them at Mixtral's shapes (32 layers, hidden
4,096, 32 query / 8 KV heads). Its MLP is a mixture of 8 experts, 2 per token: the dense
MLP's three ops (``gate_ffn1_gemm``, ``act_gate``, ``ffn2_gemm``) are replaced by one
``moe`` op, ``num_layers`` x the latency of AIConfigurator 0.12.0's
``data/<system>/moe/<backend>/<version>/moe_perf.parquet`` at the step's token count
(Mixtral-8x7B: hidden 4,096, inter 14,336; Mixtral-8x22B: hidden 6,144, inter 16,384,
56 layers, 48 query / 8 KV heads; both 8 experts, top 2, moe_tp = tp, ep 1, balanced
routing; the 8x7B rows are the ones benchmarks/moe_table_check.py reads). Between
collected token counts the latency is linear in tokens; outside the table's range
(1-16,384 tokens in every table read) the composer refuses (ConfigError) rather than
extrapolate: the sweep's largest step is 16,384 tokens, inside it. Where a table holds
several kernels for one dtype (``kernel_source``), the first in sorted order is read, and
named in the provenance.

Deployments: bf16 on A100-80GB, H100 SXM and H200, fp8 (weights and KV; the table's
per-tensor ``fp8`` rows, not ``fp8_block``) on the last two, at each tp in 1, 2, 4, 8
whose weights fit. A deployment whose MoE rows the table lacks is skipped and listed,
never invented (SGLang's hold no per-tensor fp8); TensorRT-LLM's and vLLM's A100 tables
hold the shapes with power-law routing only, made balanced by H100's measured ratio
(:func:`balanced_from_power_law`). The files replace the roofline priors of the same name, as
calibrate/aic_models.py's do; ``--backend vllm``/``sglang`` write into
``simulator/profiles/stacks/<backend>/``.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from calibrate.aic_backends import systems
from calibrate.aic_models import fit_composition, run_cli
from calibrate.aic_tables import BACKEND, SystemTables
from calibrate.aiconfigurator import (
    Composer,
    _weights_fit,
    provenance,
)
from calibrate.fit import FitReport
from simulator.costs.profile import CostProfile, profile_file_name
from simulator.errors import ConfigError
from simulator.specs.hardware import HARDWARE
from simulator.specs.models import MODELS

# catalogue name -> Hugging Face id of the MoE models whose shapes AIConfigurator 0.12.0's
# MoE tables collected (it ships their configs too)
HF_IDS = {"mixtral-8x7b": "mistralai/Mixtral-8x7B-v0.1",
          "mixtral-8x22b": "mistralai/Mixtral-8x22B-v0.1",
          "qwen3-235b-a22b": "Qwen/Qwen3-235B-A22B"}
# The ones composed and shipped. Not Qwen3-235B-A22B (128 experts, 8 a token): its decode
# steps' expert reads grow with the batch until all 128 are read, which the piecewise form
# cannot follow (`python -m calibrate.aic_moe --model qwen3-235b-a22b --check` prints the
# fits: decode held-out MAPE 27% on the H200 in bf16 at tp 4); it keeps the prior
# (docs/gpu-profiles.md).
MOE_MODELS = ("mixtral-8x7b", "mixtral-8x22b")
TP_DEGREES = (1, 2, 4, 8)
MLP_OPS = ("gate_ffn1_gemm", "act_gate", "ffn2_gemm")  # the dense MLP the MoE op replaces
# moe_perf.parquet's moe_dtype; mxfp4: gpt-oss's experts, bf16 activations (W4A16)
MOE_DTYPE = {"bf16": "bfloat16", "fp8": "fp8", "mxfp4": "w4a16_mxfp4", "fp8_block": "fp8_block"}


@dataclass(frozen=True)
class MoeCurve:
    """Milliseconds per MoE layer by token count: one shape's rows of one MoE table."""

    tokens: np.ndarray  # increasing token counts collected
    latency_ms: np.ndarray
    table: str  # the parquet file, relative to the systems folder
    kernel_source: str
    # "" for the table's balanced rows; else how balanced routing was derived from its
    # power-law rows (balanced_from_power_law)
    derived: str = ""

    def query(self, tokens: int) -> float:
        """Milliseconds at ``tokens``: linear between collected counts; refuses outside."""
        lo, hi = int(self.tokens[0]), int(self.tokens[-1])
        if not lo <= tokens <= hi:
            raise ConfigError(f"{self.table}: {tokens} tokens is outside the MoE table's "
                              f"{lo}-{hi} tokens")
        return float(np.interp(tokens, self.tokens, self.latency_ms))


def moe_table(root: Path, system: str, version: str, backend: str) -> Path:
    """``data/<system>/moe/<backend>/<version>/moe_perf.parquet`` under ``root``."""
    return root / "data" / system / "moe" / backend / version / "moe_perf.parquet"


POWER_LAWS = ("power_law_1.01", "power_law_1.2")  # the skewed routings tables collect, least first
REFERENCE_GPU = "h100-sxm"  # whose table, same backend, gives the balanced / power-law ratio
SMOOTH = 5  # token counts in the running median of that ratio
# balanced / power-law at the reference's fewest tokens (one token reads k experts whatever
# the routing): outside this band its power-law rows at that tp are not comparable
ONE_TOKEN_BAND = (0.8, 1.25)


def shape_rows(root: Path, system: str, version: str, backend: str, dtype: str, model: str,
               ep: int = 1, tables: dict[Path, pd.DataFrame] | None = None
               ) -> tuple[Path, pd.DataFrame] | None:
    """One MoE table and ``model``'s rows of it at every moe_tp and expert-parallel degree
    ``ep``, every routing; None when the system has no such table. ``tables`` keeps the
    tables read, by path, for a caller that asks for many shapes of the same tables."""
    path = moe_table(root, system, version, backend)
    if not path.is_file():
        return None
    m = MODELS[model]
    d = tables.get(path) if tables is not None else None
    if d is None:
        d = pd.read_parquet(path)
        if tables is not None:
            tables[path] = d
    return path, d[(d.hidden_size == m.hidden_size) & (d.inter_size == m.intermediate_size)
                   & (d.num_experts == m.num_experts) & (d.topk == m.experts_per_token)
                   & (d.moe_ep_size == ep) & (d.moe_dtype == MOE_DTYPE[dtype])]


def _moe_rows(root: Path, system: str, version: str, backend: str, dtype: str, tp: int,
              model: str) -> tuple[Path, pd.DataFrame] | None:
    """:func:`shape_rows` at ``tp`` (moe_tp = tp)."""
    table = shape_rows(root, system, version, backend, dtype, model)
    if table is None:
        return None
    path, rows = table
    return path, rows[rows.moe_tp_size == tp]


def routing_curve(rows: pd.DataFrame, distribution: str) -> tuple[pd.Series, str] | None:
    """Median latency by token count of ``distribution``'s rows, first kernel in sorted
    order, and the kernel's name; None when the routing has no rows."""
    rows = rows[rows.distribution == distribution]
    if rows.empty:
        return None
    kernel = sorted(rows.kernel_source.unique())[0]
    return rows[rows.kernel_source == kernel].groupby("num_tokens").latency.median(), kernel


def moe_curve(root: Path, system: str, version: str, backend: str, dtype: str,
              tp: int, model: str) -> MoeCurve | None:
    """``model``'s balanced-routing rows at ``tp`` (moe_tp = tp, ep 1), or None if
    absent. A table with only power-law routing for the shape (TensorRT-LLM's and vLLM's
    A100 tables) gets :func:`balanced_from_power_law` of its power-law rows."""
    table = _moe_rows(root, system, version, backend, dtype, tp, model)
    if table is None:
        return None
    path, rows = table
    balanced = routing_curve(rows, "balanced")
    if balanced is None:
        return balanced_from_power_law(root, path, rows, backend, dtype, tp, model)
    latency, kernel = balanced
    return MoeCurve(tokens=latency.index.to_numpy(dtype=float),
                    latency_ms=latency.to_numpy(dtype=float),
                    table=str(path.relative_to(root)), kernel_source=kernel)


def balanced_from_power_law(root: Path, path: Path, rows: pd.DataFrame, backend: str,
                            dtype: str, tp: int, model: str) -> MoeCurve | None:
    """Balanced routing for a table (``path``, its ``model`` ``rows`` at ``tp``) that
    collected only power-law routing: its least skewed power-law latency x the balanced /
    power-law ratio that the same backend's H100 table measured at the same tp and token
    count (log-linear between counts). The ratio is capped at 1 (skew never helps) and
    smoothed by a running median of ``SMOOTH`` counts: single counts of the reference jump
    (a kernel tactic changing, not routing). A reference tp whose ratio at its fewest
    tokens falls outside ``ONE_TOKEN_BAND`` is not comparable (there, every routing reads
    the same top-k experts) and the nearest tp that is takes its place: with ep 1 every GPU
    holds a slice of every expert, so the skew's cost does not depend on tp (H100 trtllm,
    Mixtral-8x22B, 2,048 tokens: 0.71-0.78 at tp 1, 2, 4, 16, 32; its tp 8 power-law rows
    read 3.8x balanced at one token). None when no power law has rows in both tables."""
    reference = shape_rows(root, *systems(backend)[REFERENCE_GPU], backend, dtype, model)
    if reference is None:
        return None
    ref_path, ref_all = reference
    # the reference's own moe_tp sizes, the nearest to ``tp`` first (log2; ties: the lower)
    for ref_tp in sorted(set(ref_all.moe_tp_size), key=lambda t: (abs(np.log2(t / tp)), t)):
        ref = ref_all[ref_all.moe_tp_size == ref_tp]
        ref_bal = routing_curve(ref, "balanced")
        for law in POWER_LAWS:
            own, ref_law = routing_curve(rows, law), routing_curve(ref, law)
            if own is None or ref_bal is None or ref_law is None:
                continue
            (bal, _), (skew, _), (latency, kernel) = ref_bal, ref_law, own
            both = bal.index.intersection(skew.index)
            if both.empty:
                continue
            raw = (bal[both] / skew[both]).sort_index()
            if not ONE_TOKEN_BAND[0] <= raw.iloc[0] <= ONE_TOKEN_BAND[1]:
                continue
            ratio = raw.clip(upper=1.0).rolling(SMOOTH, center=True, min_periods=1).median()
            tokens = latency.index.to_numpy(dtype=float)
            scale = np.interp(np.log(tokens), np.log(ratio.index.to_numpy(dtype=float)),
                              ratio.to_numpy(dtype=float))
            at = f"at tp {ref_tp}" + ("" if ref_tp == tp else
                                      f" (its tp {tp} rows fail the one-token check)")
            return MoeCurve(tokens=tokens, latency_ms=latency.to_numpy(dtype=float) * scale,
                            table=str(path.relative_to(root)), kernel_source=kernel,
                            derived=(f"balanced routing = its {law} rows x balanced / {law} "
                                     f"of {ref_path.relative_to(root)} {at}, capped at 1, "
                                     f"running median of {SMOOTH} (x{scale.min():.2f}-"
                                     f"{scale.max():.2f}; it holds no balanced rows for "
                                     "this shape)"))
    return None


@dataclass
class MoeComposer(Composer):
    """calibrate/aiconfigurator.py's Composer with the dense MLP replaced by a MoE table."""

    moe: MoeCurve | None = field(default=None)

    def step_ops(self, chunks: Sequence[tuple[int, int]] = (),
                 decode_contexts: Sequence[int] = ()) -> dict[str, float]:
        """The Llama ops less ``MLP_OPS``, plus ``moe``: layers x the table's latency at the
        step's token count (prompt tokens plus decode rows)."""
        if self.moe is None:
            raise ConfigError("MoeComposer needs a MoE curve")
        m = self.model
        if m.dense_layers or m.shared_experts or m.kv_lora_rank:
            raise ConfigError(f"{m.name}: MoeComposer composes Llama attention and an expert "
                              f"MLP in every layer; dense layers, shared experts and latent "
                              f"attention are the roofline prior's (simulator/costs)")
        ops = super().step_ops(chunks, decode_contexts)
        for name in MLP_OPS:
            del ops[name]
        tokens = sum(n for n, _ in chunks) + len(decode_contexts)
        ops["moe"] = m.num_layers * self.moe.query(tokens) / 1e3
        return ops


def deployments(backend: str = BACKEND, models: Sequence[str] = MOE_MODELS
                ) -> Iterator[tuple[str, str, str, int]]:
    """(hardware, model, dtype, tp): each of ``models``, bf16 on every GPU of
    ``backend``'s shipped set, fp8 where it has FP8 math, at each tp of ``TP_DEGREES``
    whose weights fit."""
    for hw in systems(backend):
        dtypes = ("bf16", "fp8") if HARDWARE[hw].fp8_tflops is not None else ("bf16",)
        for model in models:
            for dtype in dtypes:
                for tp in TP_DEGREES:
                    if _weights_fit(MODELS[model], hw, dtype, tp):
                        yield hw, model, dtype, tp


def moe_provenance(tables: SystemTables, date: str, curve: MoeCurve, model: str
                   ) -> dict[str, Any]:
    """calibrate/aiconfigurator.py's provenance, naming this module and the MoE table."""
    out = provenance(tables, date)
    out["notes"] = (f"python -m calibrate.aic_moe: {model} composed with "
                    "calibrate/aiconfigurator.py's op list at its own shapes, the dense MLP "
                    f"replaced by num_layers x {curve.table} ({curve.kernel_source}, "
                    "8 experts top 2, moe_tp = tp, ep 1, balanced routing, linear in "
                    f"tokens{'; ' + curve.derived if curve.derived else ''}); "
                    + out["notes"].split("; ", 1)[1])
    out["aiconfigurator"]["model"] = {model: HF_IDS[model]}
    out["aiconfigurator"]["moe_table"] = curve.table
    out["aiconfigurator"]["moe_kernel_source"] = curve.kernel_source
    if curve.derived:
        out["aiconfigurator"]["moe_routing"] = curve.derived
    return out


def skip_reason(root: Path, system: str, version: str, backend: str, dtype: str, tp: int,
                model: str) -> str:
    """Why :func:`moe_curve` found nothing: no rows at all, or power-law rows only with no
    comparable reference (:func:`balanced_from_power_law`)."""
    where = moe_table(root, system, version, backend).relative_to(root)
    own = _moe_rows(root, system, version, backend, dtype, tp, model)
    if own is None or own[1].empty:
        return f"no {MOE_DTYPE[dtype]} moe_tp {tp} rows for {model} in {where}"
    return (f"{where} holds only power-law rows for {model} at moe_tp {tp}, and "
            f"{REFERENCE_GPU}'s table no comparable balanced / power-law pair at any tp")


def compose_and_fit(root: Path, date: str, backend: str = BACKEND,
                    models: Sequence[str] = MOE_MODELS
                    ) -> tuple[list[tuple[CostProfile, FitReport]], list[str]]:
    """Every deployment of ``models`` whose dense and MoE rows ``backend``'s tables hold,
    fitted; and the ones skipped, why."""
    out: list[tuple[CostProfile, FitReport]] = []
    skipped: list[str] = []
    loaded: dict[str, SystemTables] = {}
    for hw, model, dtype, tp in deployments(backend, models):
        system, version = systems(backend)[hw]
        name = profile_file_name(hw, model, dtype, tp)
        curve = moe_curve(root, system, version, backend, dtype, tp, model)
        if curve is None:
            skipped.append(f"skip {name}: "
                           + skip_reason(root, system, version, backend, dtype, tp, model))
            continue
        if hw not in loaded:
            loaded[hw] = SystemTables(root, system, version, backend)
        fitted = fit_composition(MoeComposer(loaded[hw], MODELS[model], dtype, tp, moe=curve),
                                 moe_provenance(loaded[hw], date, curve, model), skipped)
        if fitted is not None:
            out.append(fitted)
    return out, skipped


def main(argv: list[str] | None = None) -> int:
    return run_cli(argv, __doc__ or "", "calibrate.aic_moe", compose_and_fit, tuple(HF_IDS))


if __name__ == "__main__":
    sys.exit(main())
